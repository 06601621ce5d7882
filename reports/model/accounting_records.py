"""The records of the time accounting (re-exported by :mod:`reports.model.accounting`, where they are documented).

Kept apart so that :mod:`reports.model.limits` (which reads a :class:`StepAccounting`)
and :mod:`reports.model.accounting` (which builds one and exports ``limit_of``) need
no import of each other both ways.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from diag.core.engines import WAIT_CLASSES

__all__ = ["WAIT_CLASSES", "Component", "Limit", "StepAccounting"]


@dataclass(frozen=True)
class Component:
    """One part of the mean transaction's wall time.

    ``key``: ``client_cpu`` | ``connect`` (--connect-per-transaction) | ``round_trips`` | ``server_cpu_user`` |
    ``server_cpu_system`` | ``wait:<class>`` (a class of :data:`WAIT_CLASSES`) | ``unaccounted``. ``us_per_txn``: µs per mean transaction. ``share``: of
    the transaction's wall time (the shares of one step add to 1.0, unaccounted included). ``detail``: raw
    event / state names (or sub-parts) -> µs per transaction.
    """

    key: str
    label: str
    us_per_txn: float
    share: float
    detail: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class StepAccounting:
    """Where one step's mean transaction spent its wall time (clients x window / transactions, µs)."""

    target: str
    workload: str
    clients: int
    wall_us_per_txn: float
    components: tuple[Component, ...]
    evidence: Mapping[str, Any]  # what it was computed from (sample counts, CPU seconds, window)

    def get(self, key: str) -> Component | None:
        """The component ``key`` ("wait:commit_flush", "client_cpu"...), None when the step has none."""
        return next((c for c in self.components if c.key == key), None)

    def us(self, key: str) -> float:
        """µs per transaction of component ``key`` (0.0 when absent)."""
        c = self.get(key)
        return c.us_per_txn if c is not None else 0.0

    def share(self, key: str) -> float:
        """Share of the wall time of component ``key`` (0.0 when absent)."""
        c = self.get(key)
        return c.share if c is not None else 0.0


@dataclass(frozen=True)
class Limit:
    """The saturated resource of a step (the USE method), with the queueing seen elsewhere as symptoms.

    ``kind``: ``host_cpu`` | ``neighbours`` | ``server_cpu`` | ``client_cpu`` | ``round_trips`` | ``commit_flush`` |
    ``lock`` | ``latch`` | ``io`` | ``connect`` (opening a connection per transaction) | ``unobserved`` (the
    sources that could name one were off: nothing is claimed). ``utilisation``: of the saturated resource
    (0..1) when it has one. ``symptoms``:
    queueing seen that is not the limit ("commit waits 76% of backend time: queueing behind group commit").
    ``impact``: the share of the transaction's time the limit explains (0..1): its own parts, plus, for a
    saturated resource, the waits queueing behind it. ``saturated``: the limit is a resource at capacity
    (host or server CPU, the clients, the log device), so other waits queue behind it; False for the largest
    part of a serial chain where nothing is saturated (round trips, a lone committer's flush).
    ``unobserved``: the evidence that was missing to rule a saturated resource out ("host CPU", "server
    waits"...); when it is not empty, saturation was not observed rather than observed absent.
    """

    kind: str
    title: str
    utilisation: float | None
    evidence: Mapping[str, Any]
    advice: str
    symptoms: tuple[str, ...] = ()
    impact: float = 0.0
    saturated: bool = False
    unobserved: tuple[str, ...] = ()
