"""Findings as a person reads them: evidence keys in words with units, the few figures that carry a finding,
and its advice split into "because" and "what to do" (pure functions of a finding's dict; no new analysis).

findings.json keeps the identifiers (``accounting_us_per_txn``); the page shows ``WORDS`` or, for a key no
one listed, :func:`words`' generic reading (underscores to spaces, ``_us`` to µs, ``_pct`` to %).
"""

from __future__ import annotations

import re
from typing import Any

# The keys the rules write most; each reads as "what, unit".
WORDS: dict[str, str] = {
    "accounting_us_per_txn": "accounting, µs per transaction",
    "accounting_note": "accounting note",
    "wall_us_per_txn": "mean transaction time, µs",
    "us_per_txn": "µs per transaction",
    "parts_exceed_wall_us": "measured parts exceed the transaction time by, µs",
    "own_share_of_txn_pct": "own work, % of transaction time",
    "queueing_share_of_txn_pct": "queueing for a CPU, % of transaction time",
    "share_of_txn_pct": "% of transaction time",
    "lock_share_of_txn_pct": "lock waits, % of transaction time",
    "io_share_of_txn_pct": "data reads, % of transaction time",
    "round_trips_share_of_txn_pct": "round trips, % of transaction time",
    "client_cpu_share_of_txn_pct": "client CPU, % of transaction time",
    "round_trip_gap_us": "gap between statements, µs",
    "client_cpu_cores": "client CPU, cores",
    "server_cpu_cores": "server CPU, cores",
    "other_processes_cpu_cores": "other processes' CPU, cores",
    "other_processes_cpu_pct": "other processes' CPU, %",
    "client_cpu_per_client_pct": "CPU per client, % of one core",
    "client_to_server_cpu_per_txn": "client CPU / server CPU per transaction",
    "client_share_of_run_cpu_pct": "clients' share of the run's CPU, %",
    "run_share_of_busy_cpu_pct": "this run's share of the busy CPU, %",
    "host_busy_pct": "host CPU busy, %",
    "utilisation_pct": "utilisation, %",
    "steal_pct": "CPU steal, %",
    "cpus": "CPUs",
    "server_cpu_us_per_txn": "server CPU, µs per transaction",
    "server_ctx_per_statement": "server context switches per statement",
    "server_ctx_per_txn": "server context switches per transaction",
    "server_ctx_per_s": "server context switches per second",
    "commits_per_s": "commits per second",
    "flush_calls_per_commit": "flush calls per commit",
    "flush_calls_per_s": "flush calls per second",
    "flush_capability_per_s": "device flush capability, per second",
    "log_device_busy_pct": "log device busy, %",
    "buffer_pool_hit_pct": "buffer pool hits, %",
    "pages_read_from_disk_per_txn": "pages read from disk per transaction",
    "parse_plan_pct_of_server_cpu": "parsing and planning, % of server CPU",
    "parse_plan_us_per_txn_est": "parsing and planning, µs per transaction (estimate)",
    "spread_pct": "spread between repeats, %",
    "median_tps": "median transactions per second",
    "wal_mb_per_s": "WAL, MB per second",
    "requested_checkpoints": "checkpoints forced by WAL volume",
    "window": "measured window",
    "source": "from",
}

# Ordered patterns of the keys that prove a finding most directly: shares of the transaction's time first, then
# the transaction time itself, then saturation. A key matching none follows in the evidence's own order.
FIGURE_PRIORITY = (r"_share_of_txn_pct$", r"^share_of_txn_pct$", r"^wall_us_per_txn$", r"^us_per_txn$",
                   r"_pct_of_server_cpu$", r"^utilisation_pct$", r"^host_busy_pct$", r"_cores$", r"_per_s$",
                   r"_per_commit$", r"_pct$", r"_per_txn$")
MAX_FIGURES = 4
TOKENS = {"us": "µs", "pct": "%", "txn": "transaction", "ctx": "context switches", "cpu": "CPU", "wal": "WAL"}


def words(key: str) -> str:
    """An evidence key in words with its unit: the listed reading, else underscores to spaces with the unit
    tokens spelled out (``us`` µs, ``pct`` %, ``txn`` transaction, ``per_s`` per second)."""
    if key in WORDS:
        return WORDS[key]
    out: list[str] = []
    for t in key.split("_"):
        if t == "s" and out and out[-1] == "per":
            out.append("second")
        else:
            out.append(TOKENS.get(t, t))
    return " ".join(x for x in out if x)


def _value(v: Any) -> str:
    """A figure as text: floats rounded to what a reader compares (3 significant digits at most 2 decimals)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:,.2f}" if abs(v) < 10 else (f"{v:,.1f}" if abs(v) < 1000 else f"{v:,.0f}")


def evidence_items(evidence: dict[str, Any]) -> list[tuple[str, str]]:
    """Every evidence entry as (words, value text), in the evidence's order (the folded full evidence)."""
    return [(words(k), _value(v)) for k, v in evidence.items()]


def key_figures(finding: dict[str, Any], n: int = MAX_FIGURES) -> list[tuple[str, str]]:
    """The few numeric evidence entries that carry a finding: by :data:`FIGURE_PRIORITY`, then evidence order."""
    ev = finding.get("evidence") or {}
    nums = [k for k, v in ev.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]

    def rank(k: str) -> int:
        return next((i for i, p in enumerate(FIGURE_PRIORITY) if re.search(p, k)), len(FIGURE_PRIORITY))

    return [(words(k), _value(ev[k])) for k in sorted(nums, key=rank)[:n]]


def because_and_advice(advice: str) -> tuple[str, str]:
    """The advice's first sentence as the "because" and the rest as what to do.

    A first sentence "reason: what to do" splits at its colon. A one-sentence advice stays advice, with no
    "because" (it is an instruction, not a reason).
    """
    text = (advice or "").strip()
    m = re.match(r"(.+?[.!?])\s+(?=[A-Z(])", text)
    if not m:
        head, sep, tail = text.partition(": ")
        if sep and tail[:1].islower() and len(head) >= 20:
            return head + ".", tail[:1].upper() + tail[1:]
        return "", text
    first, rest = m.group(1), text[m.end():]
    head, sep, tail = first.partition(": ")
    if sep and tail[:1].islower() and len(head) >= 20:
        return head + ".", tail[:1].upper() + tail[1:] + " " + rest
    return first, rest
