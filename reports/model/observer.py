"""The cost of looking, per step: what dbdiag's own sources took from the load they measured.

Two figures per step, from the bundle only:

* the profiles' cost: a step with profiles runs on after its measured part (``profile_tail`` in its row,
  :mod:`workloads.steps.steptail`); perf starts, records and stops there, so the step's figures are the unprofiled
  load's, and the tail's throughput against the measured part's is what profiling cost in this run. A row
  without a tail (Dask workers, bundles of older versions) was profiled inside its measured part, and its
  figures include that cost: said, not measured.
* the collectors' own CPU over the measured part, in % of one core (host series, ``procs.collector``).

Flush calls are counted in the same tail (the row's ``flush_tail``, :mod:`collectors.flush_tail`), so a step with
flush tracing and no profile has a tail too, and its ratio is flush counting's cost.

A profile's per-transaction figures divide by the transactions of its own window: :func:`profiled_tps`.
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle
from diag.core.schema import ResultRow
from reports.model.cpu import cpu_use
from reports.model.steps import num, steps


def in_tail(row: ResultRow) -> bool:
    """The step's profile window lies in its tail (a profile over ssh, or on Dask workers, records inside the
    measured part)."""
    tail = row.profile_tail or {}
    window = (row.profile or {}).get("window")
    return (tail.get("tps") is not None and isinstance(window, list) and len(window) == 2
            and float(window[0]) >= float(tail.get("t_start", 0.0)) - 0.5)


def profiled_tps(row: ResultRow) -> float | None:
    """Transactions/s of the load while the step's profile recorded: its tail's when the profile recorded in the
    tail, else the step's own (profiled inside its measured part); None when unknown."""
    tps = (row.profile_tail or {}).get("tps") if in_tail(row) else row.tps
    return float(tps) if isinstance(tps, (int, float)) and tps > 0 else None


def observer_rows(b: Bundle) -> list[dict[str, Any]]:
    """One row per step: measured tps, the profile tail's tps and ratio, the collectors' CPU (% of a core)."""
    out = []
    for step in steps(b):
        row = step.row
        tail = row.profile_tail or {}
        prof = row.profile or {}
        u = cpu_use(b, step)
        coll = u.collector_cores if u is not None else None
        if in_tail(row):
            where = "after the measured part"
        elif prof.get("window"):
            where = "inside the measured part: its figures include the profile's cost"
        else:
            where = ""
        if (row.flush_tail or {}).get("seconds"):  # collectors.flush_tail
            where = (f"{where}; " if where else "no profile; ") + "flush calls counted after the measured part"
        out.append({"target": step.target, "workload": step.workload, "clients": step.clients,
                    "tps": row.tps, "tail_tps": tail.get("tps"), "tail_s": tail.get("seconds"),
                    "tail_ratio": tail.get("tps_ratio"), "profiled": where,
                    "collectors_pct": num(100 * coll, 2) if coll is not None else None})
    return out
