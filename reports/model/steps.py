"""A bundle's steps: the Step record (one result row with a measured window), the Finding its rules make,
the series records inside a step's window, and how evidence numbers are written.

The model's accounting and limits and the findings rules (:mod:`reports.rules`) all read steps through
here; what a finding's ``impact`` measures is set out in :mod:`reports.rules.base`. Everything here is a pure
function of a :class:`diag.core.bundle.Bundle`.
"""

from __future__ import annotations

import bisect
import datetime as _dt
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from diag.core.bundle import Bundle, safe_name
from diag.core.engines import POSTGRES, Engine, engine_for
from diag.core.errors import UsageError
from diag.core.schema import ResultRow
from reports.model.series import series_times

# A series record is stamped at the end of the interval it covers (collectors
# emit once a second). Records stamped in (t_start, t_end + WINDOW_SLACK_S]
# belong to a step: the first one inside covers at most a second of warmup,
# and the slack takes the record that closes the step's last second (the same
# rule as reports.model.series.window_sum, so numbers agree with the report's tables).
WINDOW_SLACK_S = 0.5


@dataclass(frozen=True)
class Finding:
    """One diagnosis: what, how sure, on what numbers, what to do, how much it matters."""

    category: str
    severity: str
    target: str
    title: str
    evidence: dict[str, Any]
    advice: str
    impact: float
    workload: str | None = None
    clients: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Step:
    """One result row with a measured window: who ran what, from when to when (Unix s)."""

    target: str
    engine: Engine
    workload: str
    clients: int
    t0: float
    t1: float
    row: ResultRow

    @property
    def duration(self) -> float:
        """Seconds measured (s): the row's ``measured_s``, its one form (the window's length ``t1 - t0`` for a
        row that has none, as a hand-made one)."""
        return self.row.measured_s if self.row.measured_s else self.t1 - self.t0

    @property
    def key(self) -> tuple[str, str, int]:
        """(target, workload, clients): how findings, limits and the report's sections name the step."""
        return (self.target, self.workload, self.clients)

    @property
    def transactions(self) -> int:
        return self.row.transactions or 0

    @property
    def statements(self) -> int:
        """Statements sent in the window (qps x duration); the transactions when qps is missing."""
        qps = self.row.qps
        if qps is not None and qps > 0:
            return int(round(qps * self.duration))
        return self.transactions

    def window(self) -> str:
        """Where the numbers come from, in words: the step and its measured interval (UTC)."""
        a = _dt.datetime.fromtimestamp(self.t0, _dt.timezone.utc).strftime("%H:%M:%S")
        b = _dt.datetime.fromtimestamp(self.t1, _dt.timezone.utc).strftime("%H:%M:%S")
        return (f"{self.workload}, {self.clients} client{'s' if self.clients != 1 else ''}: "
                f"{a}-{b} UTC ({self.duration:.1f} s measured)")

    def finding(self, category: str, severity: str, title: str, evidence: dict[str, Any], advice: str,
                impact: float, **extra: Any) -> Finding:
        """A Finding about this step; the window goes first in the evidence, numbers that are not known are left
        out."""
        ev = {"window": self.window(), **{k: v for k, v in evidence.items() if v is not None}}
        return Finding(category=category, severity=severity, target=self.target, title=title, evidence=ev,
                       advice=advice, impact=round(max(0.0, min(1.0, impact)), 4), workload=self.workload,
                       clients=self.clients, extra=dict(extra))


def target_info(b: Bundle, label: str) -> dict[str, Any]:
    """run.json's entry for target ``label`` ({} when absent)."""
    for t in b.run.get("targets") or []:
        if isinstance(t, dict) and t.get("label") == label:
            return t
    return {}


def engine_of(b: Bundle, label: str, row: ResultRow | None = None) -> Engine:
    """The engine of a target: run.json's entry first, then the result row's product ("mariadb"...).

    A target that names no engine (or one this version does not know) is read as
    PostgreSQL, as the report always did, so such bundles keep their findings.
    """
    name = str(target_info(b, label).get("engine") or (row.engine if row is not None else ""))
    try:
        return engine_for(name)
    except UsageError:
        return POSTGRES


def steps(b: Bundle) -> Iterator[Step]:
    """Every result row that has a measured window and a target, except a step cut short by a lost server
    or ``--on-error abort`` or a stuck statement: its evidence is of a server going away or of a failure (the
    ``server_lost``, ``step_aborted`` and ``statement_stuck`` rules speak for it), not of what limits the workload. A step cut by Ctrl-C is kept, as it always was."""
    for row in b.rows:
        if row.server_lost or row.aborted or row.stuck:
            continue
        label, t0, t1 = row.target, row.t_start, row.t_end
        if not label or t0 is None or t1 is None or t1 <= t0:
            continue
        yield Step(target=label, engine=engine_of(b, label, row), workload=row.workload, clients=row.clients or 1,
                   t0=float(t0), t1=float(t1), row=row)


def in_window(records: Sequence[dict[str, Any]], step: Step, times: Sequence[float] | None = None
              ) -> list[dict[str, Any]]:
    """Records stamped inside the step (see :data:`WINDOW_SLACK_S`); with ``times`` (each record's ``t`` in
    order, :func:`reports.series.series_times`) found by bisection, the same records."""
    if times is not None:
        return list(records[bisect.bisect_right(times, step.t0):bisect.bisect_right(times, step.t1 + WINDOW_SLACK_S)])
    return [r for r in records if isinstance(r.get("t"), (int, float))
            and step.t0 < r["t"] <= step.t1 + WINDOW_SLACK_S]


def series_in_window(b: Bundle, collector: str, step: Step) -> list[dict[str, Any]]:
    """Records of ``<collector>--<target>`` stamped inside the step ([] when that collector did not run)."""
    name = safe_name(f"{collector}--{step.target}")
    return in_window(b.series.get(name, []), step, series_times(b, name))


def pct(share: float) -> str:
    """0.4567 -> '45.7%'."""
    return f"{100.0 * share:.1f}%"


def num(x: float, digits: int = 1) -> float:
    """Rounded for evidence: sensible digits, no float noise."""
    if abs(x) >= 100:
        return float(round(x))
    return round(x, digits if abs(x) >= 1 else max(digits, 3))
