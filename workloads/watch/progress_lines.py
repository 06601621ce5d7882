"""Progress and result lines of the load tools users run, parsed into client-side figures.

``dbdiag watch -- CMD`` keeps the command's output and reads these lines from it, so
the client's own view (its transactions/s, latency, NOPM) stands beside the server's
counters. Recognised, by the tools' documented output:

* pgbench ``-P N``: ``progress: 5.0 s, 1234.5 tps, lat 3.210 ms stddev 1.234[, 0 failed]``;
  its summary ``number of transactions actually processed: N[/M]``,
  ``latency average = X ms`` and ``tps = X (without initial connection time)``.
* sysbench ``--report-interval N``: ``[ 5s ] thds: 4 tps: 123.45 qps: 2469.00 (r/w/o: ...)
  lat (ms,95%): 40.37 err/s: 0.00 reconn/s: 0.00``; its summary ``transactions: N (X per sec.)``
  and ``queries: N (X per sec.)``.
* HammerDB: ``TEST RESULT : System achieved N NOPM from M <DB> TPM`` (4.0 on),
  ``TEST RESULT : System achieved M <DB> TPM at N NOPM`` (3.3 and before), and the
  transaction counter's ``M <DB> tpm`` lines (each one minute's transactions, sampled).

A line that is none of these is kept in the output file and ignored here. Parsing is
pure: :func:`parse_line` turns one line into a :class:`ProgressPoint` or a
:class:`Summary`, or None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_NUM = r"(\d+(?:\.\d+)?)"

_PGBENCH_PROGRESS = re.compile(rf"^progress: {_NUM} s, {_NUM} tps, lat {_NUM} ms(?: stddev {_NUM})?"
                               r"(?:.*?, (\d+) failed)?")
_PGBENCH_TXNS = re.compile(r"^number of transactions actually processed: (\d+)")
_PGBENCH_TPS = re.compile(rf"^tps = {_NUM} \((?:without|excluding)")
_PGBENCH_LAT = re.compile(rf"^latency average = {_NUM} ms")
_SYSBENCH_PROGRESS = re.compile(rf"^\[ *{_NUM}s *\] thds: (\d+) tps: {_NUM} qps: {_NUM}"
                                rf".*?lat \(ms,(\d+)%\): {_NUM}(?: err/s:? {_NUM})?")
_SYSBENCH_TXNS = re.compile(rf"^\s*transactions:\s+(\d+)\s+\({_NUM} per sec\.\)")
_SYSBENCH_QUERIES = re.compile(rf"^\s*queries:\s+(\d+)\s+\({_NUM} per sec\.\)")
_HAMMER_NEW = re.compile(r"TEST RESULT : System achieved (\d+) NOPM from (\d+) (.+?) TPM\b")
_HAMMER_OLD = re.compile(r"TEST RESULT : System achieved (\d+) (.+?) TPM at (\d+) NOPM\b")
_HAMMER_TC = re.compile(r"^(?:hammerdb>)?(\d+) (.+?) tpm\s*$")


@dataclass(frozen=True)
class ProgressPoint:
    """One interval line: ``t_rel`` seconds since the tool started (None when the line has no time),
    transactions/s, statements/s and latency where the tool prints them."""

    tool: str
    t_rel: float | None
    tps: float
    qps: float | None = None
    latency_ms: float | None = None
    latency_kind: str = ""  # "mean", "p95"...
    errors_per_s: float | None = None
    threads: int | None = None

    def to_record(self) -> dict[str, Any]:
        d: dict[str, Any] = {"tool": self.tool, "tps": self.tps}
        for k in ("t_rel", "qps", "latency_ms", "errors_per_s", "threads"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        if self.latency_kind:
            d["latency_kind"] = self.latency_kind
        return d


@dataclass(frozen=True)
class Summary:
    """A tool's end-of-run figure (one field per line; :func:`merge_summaries` joins them)."""

    tool: str
    values: dict[str, float] = field(default_factory=dict)
    text: str = ""  # e.g. HammerDB's database name in "... PostgreSQL TPM"


def parse_line(line: str) -> ProgressPoint | Summary | None:
    """The figure one output line carries, or None."""
    s = line.strip()
    # HammerDB prefixes its virtual users' lines with "Vuser N:".
    body = s.split(":", 1)[1] if s.startswith("Vuser ") and ":" in s else s
    m = _PGBENCH_PROGRESS.match(s)
    if m:
        return ProgressPoint("pgbench", float(m[1]), float(m[2]), None, float(m[3]), "mean")
    m = _SYSBENCH_PROGRESS.match(s)
    if m:
        return ProgressPoint("sysbench", float(m[1]), float(m[3]), float(m[4]), float(m[6]), f"p{m[5]}",
                             float(m[7]) if m[7] else None, int(m[2]))
    for rx, key in ((_PGBENCH_TXNS, "transactions"), (_PGBENCH_TPS, "tps"), (_PGBENCH_LAT, "latency_ms")):
        m = rx.match(s)
        if m:
            return Summary("pgbench", {key: float(m[1])})
    for rx, key in ((_SYSBENCH_TXNS, "transactions"), (_SYSBENCH_QUERIES, "queries")):
        m = rx.match(s)
        if m:
            rate = "tps" if key == "transactions" else "qps"
            return Summary("sysbench", {key: float(m[1]), rate: float(m[2])})
    m = _HAMMER_NEW.search(body)
    if m:
        return Summary("hammerdb", {"nopm": float(m[1]), "tpm": float(m[2]), "tps": float(m[2]) / 60}, m[3])
    m = _HAMMER_OLD.search(body)
    if m:
        return Summary("hammerdb", {"tpm": float(m[1]), "nopm": float(m[3]), "tps": float(m[1]) / 60}, m[2])
    m = _HAMMER_TC.match(body.strip())
    if m:
        return ProgressPoint("hammerdb", None, float(m[1]) / 60)
    return None


def merge_summaries(items: list[Summary]) -> dict[str, Any]:
    """One summary of a run from its summary lines: ``{"tool": ..., "tps": ..., ...}`` ({} without any).
    A later line of the same figure wins (HammerDB prints one TEST RESULT per run)."""
    out: dict[str, Any] = {}
    for s in items:
        out["tool"] = s.tool
        out.update(s.values)
        if s.text:
            out["database"] = s.text
    return out
