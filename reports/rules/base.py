"""What every findings rule shares: the impact scale, counters and gauges over a step's window.

Impact, the number findings are ranked by (0..1, higher first):

* wait findings: the share of sampled backend time spent in that class of wait
  during the step (what the time went to, measured);
* CPU findings: the share of the server's CPU samples or of its CPU time they cover;
* durability findings: 1.0 when critical (a result that is not durable or not
  possible outranks any speed finding);
* condition findings that measure no time share (checkpoint pressure, context
  switch storm, a busy host): a stated proxy, kept at or below 0.5 so that a
  measured dominant wait ranks above them.

Everything here is a pure function of a :class:`diag.core.bundle.Bundle`.

The Step record, the steps of a bundle, the Finding record and the records inside a step's window are in
:mod:`reports.model.steps` (the model's accounting reads them too); the counters over a step's window are here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collectors.rates import counter_delta
from diag.core.bundle import Bundle, safe_name
from reports.model.durability_view import _window_records, window_rate
from reports.model.series import declarations, series_times
from reports.model.steps import Step

SEVERITIES = ("critical", "warning", "info")

# Workloads known to send no writes: settings that only risk committed writes
# cannot change what such a step measured.
READ_ONLY_WORKLOADS = frozenset({"point-select", "read-only"})


def series(b: Bundle, collector: str, label: str) -> list[dict[str, Any]]:
    """Records of ``<collector>--<label>`` ([] when that collector did not run)."""
    return b.series.get(safe_name(f"{collector}--{label}"), [])


def counter_in_step(b: Bundle, step: Step, collector: str, key: str) -> float | None:
    """Increase of counter ``key`` of ``<collector>--<target>`` over the step's window.

    Read at t_start and t_end by linear interpolation between the records
    around them (reset-safe); None when the counter is not recorded, the
    records cover less than half of the step, or the bundle declares ``key`` a
    gauge (run.json ``metrics``: a gauge has no increase to take).
    """
    if declarations(b).kind(safe_name(f"{collector}--{step.target}"), key) == "gauge":
        return None
    name = safe_name(f"{collector}--{step.target}")
    rate = window_rate(b.series.get(name, []), [key], step.t0, step.t1, series_times(b, name))
    return None if rate is None else rate * step.duration


def counter_around(b: Bundle, step: Step, collector: str, key: str) -> float | None:
    """Increase of a counter of discrete events from the last record at or before t_start to the first at or
    after t_end (reset-safe): whole events, never a fraction; the step plus under one interval each side."""
    name = safe_name(f"{collector}--{step.target}")
    times = series_times(b, name)
    # In time order the records this reads are those of the step's window and the nearest with the counter
    # each side (what window_rate reads); otherwise every record is sorted.
    near = _window_records(b.series.get(name, []), [key], step.t0, step.t1, times) if times is not None \
        else b.series.get(name, [])
    recs = sorted((r for r in near if isinstance(r.get("t"), (int, float)) and isinstance(r.get(key), (int, float))),
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
