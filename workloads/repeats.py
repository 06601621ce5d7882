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

from typing import Any

from diag.stats import median_ci

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


def _repeat_summary(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: row[k] for k in REPEAT_KEYS if k in row}
    p95 = (row.get("latency_ms") or {}).get("p95")
    if p95 is not None:
        out["p95_ms"] = p95
    return out


def with_interval(row: dict[str, Any]) -> dict[str, Any]:
    """A step run once: its row with ``tps_ci`` from its own intervals (unchanged when it has none)."""
    ci = tps_interval([], list(row.get("interval_tps") or []))
    return {**row, "tps_ci": ci} if ci else row


def combine(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from the repeats of one step (in the order they ran); see the module docstring.

    Repeats cut short (Ctrl-C, a lost server) are kept in ``repeats`` but the median and interval use
    the complete ones when there are any."""
    if not rows:
        raise ValueError("no repeats to combine")
    full = [r for r in rows if r.get("complete", True)] or rows
    tps = [float(r.get("tps") or 0.0) for r in full]
    mid = sorted(tps)[(len(tps) - 1) // 2]  # the (lower) median: one repeat's own throughput
    rep = next(r for r in full if float(r.get("tps") or 0.0) == mid)
    pooled = [float(x) for r in full for x in (r.get("interval_tps") or [])]
    out = {k: v for k, v in rep.items() if k != "repeat"}
    out.update(tps=round(mid, 2), repeat_count=len(rows), representative_repeat=rep.get("repeat"),
               repeats=[_repeat_summary(r) for r in rows], interval_tps=pooled,
               complete=all(r.get("complete", True) for r in rows))
    for key in ("server_lost", "aborted", "interrupted"):  # what cut a repeat short is the step's news
        cut = next((r[key] for r in rows if r.get(key)), None)
        if cut is not None:
            out[key] = cut
    for key in ("profile", "client_profile"):  # one file per step, written by the last repeat profiled
        last = next((r[key] for r in reversed(rows) if r.get(key)), None)
        if last is not None:
            out[key] = last
    ci = tps_interval(tps, pooled)
    if ci:
        out["tps_ci"] = ci
    return out


def add_result(results: list[dict[str, Any]], repeats: dict[tuple[Any, ...], list[dict[str, Any]]],
               row: dict[str, Any]) -> None:
    """Put a finished step's row into the run's ``results`` (in place).

    A step run once is appended with its interval. A repeat's row joins its step's
    repeats in ``repeats`` and the step's one row in ``results`` is built again from
    all of them (:func:`combine`), so results.json is whole after every repeat."""
    if not row.get("repeat"):
        results.append(with_interval(row))
        return
    key = (row.get("target"), row.get("workload"), row.get("clients"))
    got = repeats.setdefault(key, [])
    got.append(row)
    combined = combine(got)
    for i, r in enumerate(results):
        if (r.get("target"), r.get("workload"), r.get("clients")) == key:
            results[i] = combined
            return
    results.append(combined)
