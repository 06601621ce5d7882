"""What every findings rule shares: the Finding record, the steps of a bundle, windows over series.

Impact, the number findings are ranked by (0..1, higher first):

* wait findings: the share of sampled backend time spent in that class of wait
  during the step (what the time went to, measured);
* CPU findings: the share of the server's CPU samples or of its CPU time they cover;
* durability findings: 1.0 when critical (a result that is not durable or not
  possible outranks any speed finding);
* condition findings that measure no time share (checkpoint pressure, context
  switch storm, a busy host): a stated proxy, kept at or below 0.5 so that a
  measured dominant wait ranks above them.

Everything here is a pure function of a :class:`diag.bundle.Bundle`.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from collectors.rates import counter_delta
from diag.bundle import Bundle, safe_name
from diag.engines import POSTGRES, Engine, engine_for
from diag.errors import UsageError
from reports.durability_view import window_rate
from reports.series import declarations

SEVERITIES = ("critical", "warning", "info")

# A series record is stamped at the end of the interval it covers (collectors
# emit once a second). Records stamped in (t_start, t_end + WINDOW_SLACK_S]
# belong to a step: the first one inside covers at most a second of warmup,
# and the slack takes the record that closes the step's last second (the same
# rule as reports.series.window_sum, so numbers agree with the report's tables).
WINDOW_SLACK_S = 0.5

# Workloads known to send no writes: settings that only risk committed writes
# cannot change what such a step measured.
READ_ONLY_WORKLOADS = frozenset({"point-select", "read-only"})


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
    row: dict[str, Any]

    @property
    def duration(self) -> float:
        return self.t1 - self.t0

    @property
    def transactions(self) -> int:
        return int(self.row.get("transactions") or 0)

    @property
    def statements(self) -> int:
        """Statements sent in the window (qps x duration); the transactions when qps is missing."""
        qps = self.row.get("qps")
        if isinstance(qps, (int, float)) and qps > 0:
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


def engine_of(b: Bundle, label: str, row: dict[str, Any] | None = None) -> Engine:
    """The engine of a target: run.json's entry first, then the result row's product ("mariadb"...).

    A target that names no engine (or one this version does not know) is read as
    PostgreSQL, as the report always did, so such bundles keep their findings.
    """
    name = str(target_info(b, label).get("engine") or (row or {}).get("engine") or "")
    try:
        return engine_for(name)
    except UsageError:
        return POSTGRES


def steps(b: Bundle) -> Iterator[Step]:
    """Every result row that has a measured window and a target, except a step cut short by a lost server
    or ``--on-error abort`` or a stuck statement: its evidence is of a server going away or of a failure (the
    ``server_lost``, ``step_aborted`` and ``statement_stuck`` rules speak for it), not of what limits the workload. A step cut by Ctrl-C is kept, as it always was."""
    for row in b.results:
        if row.get("server_lost") or row.get("aborted") or row.get("stuck"):
            continue
        label = row.get("target")
        t0, t1 = row.get("t_start"), row.get("t_end")
        if not label or not isinstance(t0, (int, float)) or not isinstance(t1, (int, float)) or t1 <= t0:
            continue
        yield Step(target=str(label), engine=engine_of(b, str(label), row), workload=str(row.get("workload") or ""),
                   clients=int(row.get("clients") or 1), t0=float(t0), t1=float(t1), row=row)


def series(b: Bundle, collector: str, label: str) -> list[dict[str, Any]]:
    """Records of ``<collector>--<label>`` ([] when that collector did not run)."""
    return b.series.get(safe_name(f"{collector}--{label}"), [])


def in_window(records: Sequence[dict[str, Any]], step: Step) -> list[dict[str, Any]]:
    """Records stamped inside the step (see :data:`WINDOW_SLACK_S`)."""
    return [r for r in records if isinstance(r.get("t"), (int, float))
            and step.t0 < r["t"] <= step.t1 + WINDOW_SLACK_S]


def counter_in_step(b: Bundle, step: Step, collector: str, key: str) -> float | None:
    """Increase of counter ``key`` of ``<collector>--<target>`` over the step's window.

    Read at t_start and t_end by linear interpolation between the records
    around them (reset-safe); None when the counter is not recorded, the
    records cover less than half of the step, or the bundle declares ``key`` a
    gauge (run.json ``metrics``: a gauge has no increase to take).
    """
    if declarations(b).kind(safe_name(f"{collector}--{step.target}"), key) == "gauge":
        return None
    rate = window_rate(series(b, collector, step.target), [key], step.t0, step.t1)
    return None if rate is None else rate * step.duration


def counter_around(b: Bundle, step: Step, collector: str, key: str) -> float | None:
    """Increase of a counter of discrete events from the last record at or before t_start to the first at or
    after t_end (reset-safe): whole events, never a fraction; the step plus under one interval each side."""
    recs = sorted((r for r in series(b, collector, step.target)
                   if isinstance(r.get("t"), (int, float)) and isinstance(r.get(key), (int, float))),
                  key=lambda r: r["t"])
    if len(recs) < 2:
        return None
    first = max((i for i, r in enumerate(recs) if r["t"] <= step.t0), default=0)
    last = min((i for i, r in enumerate(recs) if r["t"] >= step.t1), default=len(recs) - 1)
    if last <= first:
        return None
    return sum(counter_delta(a[key], z[key]) or 0.0 for a, z in zip(recs[first:last], recs[first + 1:last + 1]))


def gauge_mean(records: Sequence[dict[str, Any]], key: str) -> float | None:
    """Mean of a gauge over records (None when absent)."""
    vals = [float(r[key]) for r in records if isinstance(r.get(key), (int, float))]
    return sum(vals) / len(vals) if vals else None


def pct(share: float) -> str:
    """0.4567 -> '45.7%'."""
    return f"{100.0 * share:.1f}%"


def num(x: float, digits: int = 1) -> float:
    """Rounded for evidence: sensible digits, no float noise."""
    if abs(x) >= 100:
        return float(round(x))
    return round(x, digits if abs(x) >= 1 else max(digits, 3))
