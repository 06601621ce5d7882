"""The tail of a step: the load's run-on after the measured part, where the run's profiles record and its flush
calls are counted (collectors.flush_tail).

perf's start-up (reading every process's maps), its recording (DWARF copies 8 KiB of stack per sample) and
off-CPU tracing slow the load they watch (BENCHMARKS.md, Profiles; issue 25: a default run reported 0.65-0.86x
of the same load unobserved). So a step with profiles runs ``DriverOptions.tail_s`` longer than ``-T``; the
intervals of that tail are written to the series (``"tail": true``) and summed here, apart from the step's
figures, and the row says what the load did while it was watched (``profile_tail``: its throughput against
the measured part's, the cost of looking in this run).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from workloads.steps.merge import Merged, Totals, summary_ms
from workloads.steps.stepresult import WallClock


class TailSum:
    """The tail's intervals, summed (times in ``perf_counter_ns`` until :meth:`summary`)."""

    def __init__(self) -> None:
        self.start_ns: int | None = None
        self.end_ns = 0
        self.seconds = 0.0
        self.transactions = 0
        self.errors = 0
        self.counts: Counter[int] = Counter()

    def add(self, m: Merged) -> None:
        start = m.end_ns - int(m.seconds * 1e9)
        self.start_ns = start if self.start_ns is None else min(self.start_ns, start)
        self.end_ns = max(self.end_ns, m.end_ns)
        self.seconds += m.seconds
        self.transactions += m.transactions
        self.errors += m.errors
        self.counts.update(m.latency_us or {})

    def summary(self, clock: WallClock, measured_tps: float) -> dict[str, Any]:
        """The row's ``profile_tail``: when (Unix s), how long (s), transactions, tps, latency (ms) and the
        tail's tps over the measured part's (``tps_ratio``; None when either is 0)."""
        if self.start_ns is None or self.seconds <= 0:
            return {"seconds": 0.0, "transactions": 0, "tps": None, "tps_ratio": None}
        tps = self.transactions / self.seconds
        return {"t_start": clock.unix(self.start_ns), "t_end": clock.unix(self.end_ns),
                "seconds": round(self.seconds, 3), "transactions": self.transactions, "errors": self.errors,
                "tps": round(tps, 2), "latency_ms": summary_ms(self.counts),
                "tps_ratio": round(tps / measured_tps, 4) if measured_tps > 0 else None}


def measured_cpu(t: Totals, cpu_s: float) -> None:
    """The step's client CPU as the measured intervals counted it (the clients' own totals at their end include
    the tail): ``t.cpu_s`` set, each client's share scaled alike."""
    if t.cpu_s > 0:
        k = cpu_s / t.cpu_s
        t.cpu_by_client = {i: c * k for i, c in t.cpu_by_client.items()}
    t.cpu_s = cpu_s


def tail_line(tail: Mapping[str, Any]) -> str:
    """The console line of a step's tail: what the load did while profiles recorded and flushes were counted."""
    ratio = tail.get("tps_ratio")
    return (f"     while observed (profiles, flush counts), after the measured part: {tail['tps']:.1f} tps for "
            f"{tail['seconds']:g} s"
            + (f" ({ratio:.2f}x of the measured rate: the cost of looking, kept out of the figures above)"
               if ratio is not None else ""))
