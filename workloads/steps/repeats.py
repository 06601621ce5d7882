"""One result row from a step's repeats (``--repeat N``), and the interval every row carries.

A step run N times (interleaved across targets by :func:`workloads.driver.run_interleaved`)
gives N rows; the run keeps one row per (target, workload, clients), built here:

* ``tps`` is the **median** of the repeats' throughput (for an even N the lower
  of the middle two, so that it is one repeat's own figure); the row's window
  (``t_start``/``t_end``), latency, counts and profile are those of that
  *representative* repeat, so everything read over the window (accounting,
  per-transaction rates = counters / window / tps) describes one real measured
  stretch at the rate it ran;
* ``repeats`` keeps every repeat (its throughput, window, p95, per-interval
  throughput), so nothing is lost and the report can show the spread;
* ``tps_ci`` is the interval of the median (:func:`tps_interval`).

The interval (``tps_ci``): with at least :data:`MIN_REPEATS_FOR_CI` repeats it is the
exact order-statistic interval of the median over the repeats' throughputs (basis
``repeats``); with fewer it is the same interval over the per-interval
throughputs of every repeat pooled (basis ``intervals``: the repeats are spread
over the run, so the pooled intervals see its drift; intervals next to each other
are correlated, which this basis does not model, and the report says which basis
it used). ``level`` is the coverage the interval really has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from diag.core.schema import ResultRow
from diag.core.stats import median_ci

MIN_REPEATS_FOR_CI = 6  # the fewest values whose order-statistic interval of the median reaches 95% (96.9%)
LEVEL = 0.95
REPEAT_KEYS = ("repeat", "tps", "qps", "transactions", "t_start", "t_end", "measured_s", "complete",
               "interval_tps")


def tps_interval(repeat_tps: list[float], interval_tps: list[float]) -> dict[str, Any] | None:
    """The ``tps_ci`` record: median and interval, level, how many values, which basis, the method."""
    if len(repeat_tps) >= MIN_REPEATS_FOR_CI:
        values, basis = repeat_tps, "repeats"
    elif interval_tps:
        values, basis = interval_tps, "intervals"
    else:
        return None
    ci = median_ci(values, LEVEL)
    return {"median": round(ci.estimate, 2), "low": round(ci.low, 2), "high": round(ci.high, 2),
            "level": ci.level, "n": ci.n, "basis": basis, "method": ci.method}


def _repeat_summary(row: ResultRow) -> dict[str, Any]:
    d = row.to_dict()
    out = {k: d[k] for k in REPEAT_KEYS if k in d}
    p95 = row.latency_ms.get("p95")
    if p95 is not None:
        out["p95_ms"] = p95
    return out


def with_interval(row: ResultRow) -> ResultRow:
    """A step run once: its row with ``tps_ci`` from its own intervals (unchanged when it has none)."""
    ci = tps_interval([], list(row.interval_tps))
    return replace(row, tps_ci=ci) if ci else row


def _ran_whole(row: ResultRow) -> bool:
    return row.complete is not False  # a row that does not say ran whole


def combine(rows: Sequence[ResultRow]) -> ResultRow:
    """One row from the repeats of one step (in the order they ran); see the module docstring.

    Repeats cut short (Ctrl-C, a lost server) are kept in ``repeats`` but the median and interval use
    the complete ones when there are any."""
    if not rows:
        raise ValueError("no repeats to combine")
    full = [r for r in rows if _ran_whole(r)] or list(rows)
    tps = [float(r.tps or 0.0) for r in full]
    mid = sorted(tps)[(len(tps) - 1) // 2]  # the (lower) median: one repeat's own throughput
    rep = next(r for r in full if float(r.tps or 0.0) == mid)
    pooled = [float(x) for r in full for x in r.interval_tps]
    out = replace(rep, repeat=None, tps=round(mid, 2), repeat_count=len(rows), representative_repeat=rep.repeat,
                  repeats=tuple(_repeat_summary(r) for r in rows), interval_tps=tuple(pooled),
                  complete=all(_ran_whole(r) for r in rows))
    # what cut a repeat short is the step's news
    lost = next((r.server_lost for r in rows if r.server_lost), None)
    aborted = next((r.aborted for r in rows if r.aborted), None)
    out = replace(out, server_lost=lost or out.server_lost, aborted=aborted or out.aborted,
                  interrupted=any(r.interrupted for r in rows) or out.interrupted)
    # one file per step, written by the last repeat profiled
    profile = next((r.profile for r in reversed(rows) if r.profile), None)
    client = next((r.extra["client_profile"] for r in reversed(rows) if r.extra.get("client_profile")), None)
    out = replace(out, profile=profile or out.profile,
                  extra={**out.extra, "client_profile": client} if client is not None else out.extra)
    ci = tps_interval(tps, pooled)
    return replace(out, tps_ci=ci) if ci else out


def add_result(results: list[ResultRow], repeats: dict[tuple[str, str, int | None], list[ResultRow]],
               row: ResultRow) -> None:
    """Put a finished step's row into the run's ``results`` (in place).

    A step run once is appended with its interval. A repeat's row joins its step's
    repeats in ``repeats`` and the step's one row in ``results`` is built again from
    all of them (:func:`combine`), so results.json is whole after every repeat."""
    if not row.repeat:
        results.append(with_interval(row))
        return
    got = repeats.setdefault(row.key, [])
    got.append(row)
    combined = combine(got)
    for i, r in enumerate(results):
        if r.key == row.key:
            results[i] = combined
            return
    results.append(combined)
