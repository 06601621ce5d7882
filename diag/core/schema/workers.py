"""results.json rows of a step run on Dask workers (``--workers``): each worker's share and the lost ones.

Written by :mod:`workloads.remote.dask_steps` into the step's row beside its merged totals:

* ``workers``: one entry per worker that answered: ``worker`` (its address), ``host`` (hostname),
  ``clients``, ``transactions``, ``tps``, ``latency_ms`` (its own summary), ``host_cpu_busy_pct``
  (its host's CPU busy share over the step, 0..100), ``client_cpu_pct``, ``saturated`` (busy >= 90% on a host other than the orchestrator's),
  ``this_host`` (it ran on the run's own host: same kernel boot and process; its process tree is in the
  host series as clients, ``procs.client``),
  ``histogram`` (its HDR histogram under artifacts/, relative to the bundle);
* ``workers_lost``: ``worker``, ``clients``, ``reason`` (and ``share``, its index in the step);
* ``lost_clients``: clients of the lost workers; ``lost_transactions``: what those streamed before.

A row without ``workers`` is a local step: :meth:`StepWorkers.from_row` gives None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from diag.core.schema.base import NUM, BundleFormatError, as_object, get_field


@dataclass(frozen=True)
class WorkerShare:
    """One worker's part of a step (see the module docstring)."""

    worker: str
    clients: int
    transactions: int
    tps: float
    host: str = ""
    host_cpu_busy_pct: float | None = None
    client_cpu_pct: float | None = None
    saturated: bool = False
    this_host: bool = False
    histogram: str = ""
    latency_ms: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Any, where: str = "worker") -> WorkerShare:
        d = as_object(d, where)
        busy = get_field(d, "host_cpu_busy_pct", NUM, where)
        if busy is not None and not 0 <= busy <= 100:
            raise BundleFormatError(f"{where}: host_cpu_busy_pct should be 0..100, not {busy!r}")
        return cls(worker=get_field(d, "worker", (str,), where, required=True),
                   clients=get_field(d, "clients", (int,), where, required=True),
                   transactions=get_field(d, "transactions", (int,), where, required=True),
                   tps=get_field(d, "tps", NUM, where, required=True), host=get_field(d, "host", (str,), where, ""),
                   host_cpu_busy_pct=busy, client_cpu_pct=get_field(d, "client_cpu_pct", NUM, where),
                   saturated=get_field(d, "saturated", (bool,), where, False),
                   this_host=get_field(d, "this_host", (bool,), where, False),
                   histogram=get_field(d, "histogram", (str,), where, ""),
                   latency_ms=get_field(d, "latency_ms", (dict,), where, {}))


@dataclass(frozen=True)
class LostWorker:
    """A worker whose share did not come back: how many clients it had and why."""

    worker: str
    clients: int
    reason: str

    @classmethod
    def from_dict(cls, d: Any, where: str = "lost worker") -> LostWorker:
        d = as_object(d, where)
        return cls(worker=get_field(d, "worker", (str,), where, required=True),
                   clients=get_field(d, "clients", (int,), where, required=True),
                   reason=get_field(d, "reason", (str,), where, ""))


@dataclass(frozen=True)
class StepWorkers:
    """The Dask part of one step's row (see the module docstring)."""

    shares: tuple[WorkerShare, ...]
    lost: tuple[LostWorker, ...] = ()
    lost_clients: int = 0
    lost_transactions: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any], where: str = "row") -> StepWorkers | None:
        """The row's worker fields as a record; None for a local step (no ``workers``)."""
        shares = get_field(row, "workers", (list,), where)
        if shares is None:
            return None
        lost = get_field(row, "workers_lost", (list,), where, [])
        out = cls(tuple(WorkerShare.from_dict(s, f"{where}: workers[{i}]") for i, s in enumerate(shares)),
                  tuple(LostWorker.from_dict(w, f"{where}: workers_lost[{i}]") for i, w in enumerate(lost)),
                  get_field(row, "lost_clients", (int,), where, 0), get_field(row, "lost_transactions", (int,), where, 0))
        if out.lost_clients != sum(w.clients for w in out.lost):
            raise BundleFormatError(f"{where}: lost_clients {out.lost_clients} is not the lost workers' "
                                    f"{sum(w.clients for w in out.lost)} clients")
        return out
