"""Derived time series from raw bundle records (pure functions; rates via collectors.rates)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collectors.rates import counter_delta, counter_rate

CPU_BUSY = ("user", "nice", "system", "irq", "softirq", "steal")
CPU_ALL = CPU_BUSY + ("idle", "iowait")


def host_cpu_pct(records: Sequence[dict[str, Any]]) -> list[tuple[float, float | None]]:
    """Whole-machine busy CPU in percent of all CPUs, per sample interval."""
    out: list[tuple[float, float | None]] = []
    prev: dict[str, Any] | None = None
    for r in records:
        if prev is not None:
            busy = [counter_delta(prev.get(f"cpu.all.{f}"), r.get(f"cpu.all.{f}")) for f in CPU_BUSY]
            total = [counter_delta(prev.get(f"cpu.all.{f}"), r.get(f"cpu.all.{f}")) for f in CPU_ALL]
            b = sum(x for x in busy if x is not None)
            tot = sum(x for x in total if x is not None)
            out.append((r["t"], 100.0 * b / tot if tot > 0 else None))
        prev = r
    return out


def counter_series(records: Sequence[dict[str, Any]], key: str) -> list[tuple[float, float | None]]:
    """Per-second rate of a counter field over consecutive records."""
    out: list[tuple[float, float | None]] = []
    prev: dict[str, Any] | None = None
    for r in records:
        if prev is not None:
            out.append((r["t"], counter_rate(prev.get(key), r.get(key), r["t"] - prev["t"])))
        prev = r
    return out


def group_deltas(prev: dict[str, list[float]], cur: dict[str, list[float]], prev_t: float) -> list[float]:
    """Sum over PIDs of counter increases (user_s, system_s, ctx_vol, ctx_invol, -, read_b, write_b).

    A PID new since ``prev_t`` counts from zero (it was born in the interval);
    a PID seen before counts its increase; a PID that vanished is not counted
    (its last interval is lost, a known and small undercount).
    """
    tot = [0.0] * 7
    for pid, row in cur.items():
        old = prev.get(pid)
        if old is None or (len(row) > 7 and len(old) > 7 and old[7] != row[7]):
            base = [0.0] * 7 if (len(row) <= 7 or row[7] >= prev_t - 1.0) else None
            if base is None:
                continue  # existed before but unseen: cannot split its history
        else:
            base = old
        for i in (0, 1, 2, 3, 5, 6):
            d = counter_delta(base[i], row[i])
            tot[i] += d or 0.0
    tot[4] = float(sum(row[4] for row in cur.values()))  # rss is a gauge: the sum now
    return tot


def process_group_series(records: Sequence[dict[str, Any]], group: str, label: str | None = None
                         ) -> list[tuple[float, list[float]]]:
    """Per interval: [cpu_user_s, cpu_sys_s, ctx_vol, ctx_invol, rss, read_b, write_b] of a group.

    ``group`` is "server" (with ``label``), "client" or "collector".
    """
    out: list[tuple[float, list[float]]] = []
    prev: dict[str, Any] | None = None
    for r in records:
        procs = r.get(f"procs.{group}") or {}
        cur = procs.get(label, {}) if group == "server" else procs
        if prev is not None:
            pprocs = prev.get(f"procs.{group}") or {}
            pcur = pprocs.get(label, {}) if group == "server" else pprocs
            out.append((r["t"], group_deltas(pcur, cur, prev["t"])))
        prev = r
    return out


def window_sum(series: Sequence[tuple[float, list[float]]], t0: float, t1: float) -> list[float] | None:
    """Sum of per-interval vectors whose interval end lies in (t0, t1]; None when none do."""
    rows = [v for t, v in series if t0 < t <= t1 + 0.5]
    if not rows:
        return None
    return [sum(col) for col in zip(*rows)]
