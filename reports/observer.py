"""The cost of looking, per step: what dbdiag's own sources took from the load they measured.

Two figures per step, from the bundle only:

* the profiles' cost: a step with profiles runs on after its measured part (``profile_tail`` in its row,
  :mod:`workloads.steptail`); perf starts, records and stops there, so the step's figures are the unprofiled
  load's, and the tail's throughput against the measured part's is what profiling cost in this run. A row
  without a tail (Dask workers, bundles of older versions) was profiled inside its measured part, and its
  figures include that cost: said, not measured.
* the collectors' own CPU over the measured part, in % of one core (host series, ``procs.collector``).

A profile's per-transaction figures divide by the transactions of its own window: :func:`profiled_tps`.
"""

from __future__ import annotations

from typing import Any

from diag.bundle import Bundle
from reports.rules.base import num, steps
from reports.rules.cpu import cpu_use


def in_tail(row: dict[str, Any]) -> bool:
    """The step's profile window lies in its tail (a profile over ssh, or on Dask workers, records inside the
    measured part)."""
    tail = row.get("profile_tail") or {}
    window = (row.get("profile") or {}).get("window")
    return (tail.get("tps") is not None and isinstance(window, list) and len(window) == 2
            and float(window[0]) >= float(tail.get("t_start", 0.0)) - 0.5)


def profiled_tps(row: dict[str, Any]) -> float | None:
    """Transactions/s of the load while the step's profile recorded: its tail's when the profile recorded in the
    tail, else the step's own (profiled inside its measured part); None when unknown."""
    tps = (row.get("profile_tail") or {}).get("tps") if in_tail(row) else row.get("tps")
    return float(tps) if isinstance(tps, (int, float)) and tps > 0 else None


def observer_rows(b: Bundle) -> list[dict[str, Any]]:
    """One row per step: measured tps, the profile tail's tps and ratio, the collectors' CPU (% of a core)."""
    out = []
    for step in steps(b):
        row = step.row
        tail = row.get("profile_tail") or {}
        prof = row.get("profile") or {}
        u = cpu_use(b, step)
        coll = u.collector_cores if u is not None else None
        if in_tail(row):
            where = "after the measured part"
        elif prof.get("window"):
            where = "inside the measured part: its figures include the profile's cost"
        else:
            where = ""
        out.append({"target": step.target, "workload": step.workload, "clients": step.clients,
                    "tps": row.get("tps"), "tail_tps": tail.get("tps"), "tail_s": tail.get("seconds"),
                    "tail_ratio": tail.get("tps_ratio"), "profiled": where,
                    "collectors_pct": num(100 * coll, 2) if coll is not None else None})
    return out
