"""Derived time series from raw bundle records (pure functions; rates via collectors.rates).

Whether a field is a counter (turned into a per-second rate) or a gauge (shown as
it is) comes from the metric declarations: run.json ``metrics`` (format 2), and
for series a bundle does not declare (every series of a format-1 bundle) the
declarations of the collector class that writes that series today
(:func:`migrate_metrics`, the reports-layer step of the format-1 migration: core
cannot import collectors).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from collectors.base import Collector
from collectors.flush import FlushCollector
from collectors.host import HostCollector
from collectors.mysql import MYSQL_COLLECTORS
from collectors.pg import PG_COLLECTORS
from collectors.rates import counter_delta, counter_rate
from diag.core.bundle import Bundle
from diag.core.schema import BundleFormatError, MetricDecl, MetricDeclarations

# Every collector that writes a series, by its name (the part of a series name before "--").
# In-process engine sources (the statement digests) write into results.json rows, not series.
SERIES_COLLECTORS: tuple[type[Collector], ...] = (HostCollector, FlushCollector,
                                                  *(c for c in (*PG_COLLECTORS, *MYSQL_COLLECTORS) if c.sampled))

# A window read from a series must cover at least this share of a step (0..1), or the figure it would
# give (S, D, host CPU) is not given: a sliver is not the step.
MIN_COVERAGE = 0.5

# The columns of one process row in the host series' ``procs.*`` maps (collectors.host.PROC_FIELDS order):
# everything is a counter except the resident set size; create_time only tells a reused PID apart.
PROC_COLUMNS: tuple[MetricDecl, ...] = (
    MetricDecl("user_s", "s", "counter", "user CPU time"),
    MetricDecl("system_s", "s", "counter", "system CPU time"),
    MetricDecl("ctx_voluntary", "count", "counter", "voluntary context switches"),
    MetricDecl("ctx_involuntary", "count", "counter", "involuntary context switches"),
    MetricDecl("rss_bytes", "bytes", "gauge", "resident set size"),
    MetricDecl("read_bytes", "bytes", "counter", "bytes read from storage"),
    MetricDecl("write_bytes", "bytes", "counter", "bytes written to storage"),
)
_START = len(PROC_COLUMNS)  # index of create_time (Unix s) in a process row
_COUNTERS = tuple(i for i, c in enumerate(PROC_COLUMNS) if c.kind == "counter")
_GAUGES = tuple(i for i, c in enumerate(PROC_COLUMNS) if c.kind == "gauge")
_ZERO = (0.0,) * _START  # the baseline of a process born in the interval
# After create_time (rows written since 2026-12): CPU seconds of the children the process reaped (user, system;
# /proc stat's cutime/cstime) and its parent PID. Older rows end at create_time.
_REAPED_U, _REAPED_S, _PPID = _START + 1, _START + 2, _START + 3
# Then (rows written since 2026-12-02) the seconds its threads waited on a run queue (-1: no schedstats).
_RUN_DELAY = _START + 4


# --------------------------------------------------------------------------- declarations


def _collector_of(series: str) -> type[Collector] | None:
    """The collector class that writes series ``series`` (None for the workload driver's own series)."""
    name = series.split("--", 1)[0]
    return next((c for c in SERIES_COLLECTORS if c.name == name), None)


def collector_declarations(series_names: Iterable[str]) -> MetricDeclarations:
    """Declarations of the named series from the collector classes that write them (unknown names skipped)."""
    out: dict[str, tuple[MetricDecl, ...]] = {}
    for name in series_names:
        cls = _collector_of(name)
        if cls is not None:
            out[name] = tuple(MetricDecl.from_dict(m, f"{cls.__name__}.metrics") for m in cls.declared())
    return MetricDeclarations(out)


def migrate_metrics(b: Bundle) -> Bundle:
    """Fill the declarations of series the bundle does not declare (format 1: all of them) from the collectors.

    In memory only, once per bundle; the stored declarations win where both exist.
    """
    stored = b.metrics or MetricDeclarations()
    missing = [s for s in b.series if not stored.for_series(s)]
    b.metrics = stored.merged(collector_declarations(missing)) if missing else stored
    return b


def declarations(b: Bundle) -> MetricDeclarations:
    """The metric declarations of every series of ``b`` (migrating a format-1 bundle's on first use)."""
    if b.metrics is None or any(not b.metrics.for_series(s) and _collector_of(s) for s in b.series):
        migrate_metrics(b)
    assert b.metrics is not None
    return b.metrics


def metric_series(b: Bundle, series: str, key: str) -> list[tuple[float, float | None]]:
    """Field ``key`` of series ``series`` over time: per-second rate of a counter, value of a gauge.

    Raises BundleFormatError when the field is not declared (nothing would say how to read it).
    """
    kind = declarations(b).kind(series, key)
    recs = b.series.get(series, [])
    if kind is None:
        raise BundleFormatError(f"series {series}: {key} is not a declared metric")
    if kind == "counter":
        return counter_series(recs, key)
    return [(r["t"], float(v) if isinstance(v := r.get(key), (int, float)) else None) for r in recs]


def metric_unit(b: Bundle, series: str, key: str) -> str:
    """The unit of ``metric_series(b, series, key)``: the declared unit, per second for a counter."""
    m = declarations(b).find(series, key)
    if m is None:
        return ""
    return f"{m.unit}/s" if m.kind == "counter" else m.unit


# --------------------------------------------------------------------------- derived series


CPU_BUSY = ("user", "nice", "system", "irq", "softirq", "steal")
CPU_ALL = CPU_BUSY + ("idle", "iowait")


def host_cpu_pct(records: Sequence[dict[str, Any]]) -> list[tuple[float, float | None]]:
    """Whole-machine busy CPU in percent of all CPUs, per sample interval."""
    out: list[tuple[float, float | None]] = []
    prev: dict[str, Any] | None = None
    for r in records:
        if prev is not None:
            busy = [counter_delta(prev.get(f"cpu.all.{f}"), r.get(f"cpu.all.{f}")) for f in CPU_BUSY]
            total = [counter_delta(prev.get(f"cpu.all.{f}"), r.get(f"cpu.all.{f}")) for f in CPU_ALL]
            b = sum(x for x in busy if x is not None)
            tot = sum(x for x in total if x is not None)
            out.append((r["t"], 100.0 * b / tot if tot > 0 else None))
        prev = r
    return out


def counter_series(records: Sequence[dict[str, Any]], key: str) -> list[tuple[float, float | None]]:
    """Per-second rate of a counter field over consecutive records."""
    out: list[tuple[float, float | None]] = []
    prev: dict[str, Any] | None = None
    for r in records:
        if prev is not None:
            out.append((r["t"], counter_rate(prev.get(key), r.get(key), r["t"] - prev["t"])))
        prev = r
    return out


def _share_in(a: float, z: float, window: tuple[float, float] | None) -> float:
    """The share (0..1) of the span [a, z] (Unix s) that lies inside ``window``; 1.0 without a window."""
    if window is None:
        return 1.0
    if z <= a:
        return 1.0 if window[0] <= z <= window[1] else 0.0
    return max(0.0, min(z, window[1]) - max(a, window[0])) / (z - a)


def group_deltas(prev: dict[str, list[float]], cur: dict[str, list[float]], prev_t: float,
                 cur_t: float | None = None, window: tuple[float, float] | None = None) -> list[float]:
    """Per :data:`PROC_COLUMNS`, summed over PIDs: a counter's increase, a gauge's value now.

    A PID new since ``prev_t`` counts from zero (it was born in the interval);
    a PID seen before counts its increase. A PID that vanished was reaped: where
    its parent is in the group, the parent's reaped CPU grew by the child's whole
    life, of which all but the last interval was counted already, so the group's
    CPU gains that increase less the child's last-seen total (:func:`_reaped_cpu`).
    A vanished PID whose parent is outside the group (or a row without the reaped
    columns) loses its last interval. A PID whose create_time changed is a new
    process that reused the number.

    With ``window`` (t0, t1 in Unix s, and ``cur_t`` the record's time) each
    value counts by the share of its own span inside the window, counters
    growing evenly: [prev_t, cur_t] for a PID seen before, [create_time, cur_t]
    for one born in the interval (a client started just before a step brings
    its start-up CPU into the interval that straddles the step's start; most of
    that CPU was spent before the step), a gauge by the interval's share.
    """
    if window is None and prev.keys() == cur.keys():
        steady = _steady_deltas(prev, cur)
        if steady is not None:
            return steady
    n = _START
    tot = [0.0] * n
    end = prev_t if cur_t is None else cur_t
    w_int = _share_in(prev_t, end, window)
    # counter_delta inlined (a reset counts the new value, a missing value nothing): this loop runs for
    # every PID of every host record, several times per report (cProfile: 0.8 s of a 51-minute bundle's).
    for pid, row in cur.items():
        old = prev.get(pid)
        w = w_int
        if old is None or (len(row) > n and len(old) > n and old[n] != row[n]):
            if len(row) > n and row[n] < prev_t - 1.0:
                continue  # existed before but unseen: cannot split its history
            base: Sequence[float] = _ZERO
            if window is not None and len(row) > n:
                w = _share_in(max(prev_t, row[n]), end, window)
        else:
            base = old
        for i in _COUNTERS:
            a, z = base[i], row[i]
            if a is not None and z is not None:
                tot[i] += w * (float(z) if z < a else float(z) - float(a))
    for i in _GAUGES:
        tot[i] = w_int * float(sum(row[i] for row in cur.values()))
    reaped_user, reaped_system = _reaped_cpu(prev, cur, prev_t)
    tot[0] += w_int * reaped_user
    tot[1] += w_int * reaped_system
    return tot


# The columns _steady_deltas spells out, in PROC_COLUMNS' order: user, system, voluntary, involuntary, rss, read,
# write (a new column must be added there too: this fails at import until it is).
assert _COUNTERS == (0, 1, 2, 3, 5, 6) and _GAUGES == (4,) and _START == 7


def _steady_deltas(prev: dict[str, list[float]], cur: dict[str, list[float]]) -> list[float] | None:
    """:func:`group_deltas` without a window for two records of the same processes (same PIDs and create times,
    rows with the reaped columns): nothing born, nothing reaped, each weight 1, so the same sums in the same order
    and the same floats, without the general path's per-column loop and second pass (an hour's host series: 3,600
    intervals of ~18 server processes, half of a one-hour report's time in the rules). None otherwise."""
    user = system = vol = invol = read = write = rss = reaped_u = reaped_s = 0.0
    try:
        for pid, row in cur.items():
            old = prev[pid]
            if len(row) <= _PPID or len(old) <= _PPID or old[_START] != row[_START]:
                return None
            a, z = old[0], row[0]
            user += z if z < a else z - a
            a, z = old[1], row[1]
            system += z if z < a else z - a
            a, z = old[2], row[2]
            vol += z if z < a else z - a
            a, z = old[3], row[3]
            invol += z if z < a else z - a
            a, z = old[5], row[5]
            read += z if z < a else z - a
            a, z = old[6], row[6]
            write += z if z < a else z - a
            rss += row[4]
            reaped_u += max(0.0, row[_REAPED_U] - old[_REAPED_U])
            reaped_s += max(0.0, row[_REAPED_S] - old[_REAPED_S])
    except TypeError:  # a column the host source could not read (None): the general path skips it
        return None
    return [user + reaped_u, system + reaped_s, vol, invol, rss, read, write]


def run_delay_delta(prev: dict[str, list[float]], cur: dict[str, list[float]], prev_t: float, cur_t: float,
                    window: tuple[float, float] | None = None) -> float | None:
    """Seconds the group's processes waited on a run queue between two records, summed over PIDs seen in both
    (same create_time) and weighted by the interval's share inside ``window``; a PID born in the interval
    counts from zero. None when no row carries the column (older bundles, a kernel without schedstats)."""
    total, seen = 0.0, False
    w = _share_in(prev_t, cur_t, window)
    for pid, row in cur.items():
        if len(row) <= _RUN_DELAY or row[_RUN_DELAY] < 0:
            continue
        old = prev.get(pid)
        if old is not None and len(old) > _RUN_DELAY and old[_START] == row[_START] and old[_RUN_DELAY] >= 0:
            base = old[_RUN_DELAY]
        elif row[_START] >= prev_t - 1.0:
            base = 0.0  # born in the interval
        else:
            continue  # existed before but unseen: cannot split its history
        seen = True
        total += w * max(0.0, float(row[_RUN_DELAY]) - float(base))
    return total if seen else None


def _reaped_cpu(prev: dict[str, list[float]], cur: dict[str, list[float]], prev_t: float) -> tuple[float, float]:
    """(user, system) CPU seconds of children that exited in the interval and were not counted yet: per parent
    in ``cur``, the increase of its reaped seconds less the last-seen totals (own + reaped) of its children
    that vanished since ``prev``. A child born and gone inside the interval counts whole."""
    n = _START
    gone: dict[int, list[float]] = {}
    for pid, old in prev.items():
        row = cur.get(pid)
        if len(old) > _PPID and (row is None or (len(row) > n and row[n] != old[n])):
            g = gone.setdefault(int(old[_PPID]), [0.0, 0.0])
            g[0] += old[0] + old[_REAPED_U]
            g[1] += old[1] + old[_REAPED_S]
    user = system = 0.0
    for pid, row in cur.items():
        if len(row) <= _PPID:
            continue
        last = prev.get(pid)
        if last is None or last[n] != row[n]:
            if row[n] < prev_t - 1.0:
                continue  # existed before but unseen (see group_deltas)
            base_u = base_s = 0.0
        elif len(last) > _PPID:
            base_u, base_s = last[_REAPED_U], last[_REAPED_S]
        else:
            continue  # an older row beside a new one: no baseline
        g = gone.get(int(pid), [0.0, 0.0])
        user += max(0.0, row[_REAPED_U] - base_u - g[0])
        system += max(0.0, row[_REAPED_S] - base_s - g[1])
    return user, system


def process_group_series(records: Sequence[dict[str, Any]], group: str, label: str | None = None
                         ) -> list[tuple[float, list[float]]]:
    """Per interval: the :data:`PROC_COLUMNS` of a group (see :func:`group_deltas`).

    ``group`` is "server" (with ``label``), "client" or "collector".
    """
    out: list[tuple[float, list[float]]] = []
    prev: dict[str, Any] | None = None
    for r in records:
        procs = r.get(f"procs.{group}") or {}
        cur = procs.get(label, {}) if group == "server" else procs
        if prev is not None:
            pprocs = prev.get(f"procs.{group}") or {}
            pcur = pprocs.get(label, {}) if group == "server" else pprocs
            out.append((r["t"], group_deltas(pcur, cur, prev["t"])))
        prev = r
    return out


def group_series(b: Bundle, group: str, label: str | None = None) -> list[tuple[float, list[float]]]:
    """:func:`process_group_series` of ``b``'s host series, derived once per bundle (the report's charts, its
    resource table and the comparison each ask for the same groups). The list is shared: do not edit it."""
    host = b.series.get("host", [])
    return b.memo(("group_series", group, label, len(host)), lambda: process_group_series(host, group, label))


def _times_in_order(records: Sequence[dict[str, Any]]) -> list[float] | None:
    """Each record's ``t`` when every one is a number and none goes back in time (as a series is written);
    None otherwise."""
    out: list[float] = []
    prev = None
    for r in records:
        t = r.get("t")
        if not isinstance(t, (int, float)) or t != t or (prev is not None and t < prev):
            return None
        out.append(t)
        prev = t
    return out


def series_times(b: Bundle, name: str) -> list[float] | None:
    """The ``t`` of each record of series ``name`` (Unix s) when they are numbers in time order, else None;
    derived once per bundle, so a step's records are found by bisection instead of a scan of the whole series
    for each of the ~100 windows an hour's report reads. The list is shared: do not edit it."""
    recs = b.series.get(name, [])
    return b.memo(("series_times", name, len(recs)), lambda: _times_in_order(recs))


def series_keys(b: Bundle, name: str) -> frozenset[str]:
    """Every field name any record of series ``name`` has, derived once per bundle."""
    recs = b.series.get(name, [])
    return b.memo(("series_keys", name, len(recs)), lambda: frozenset(k for r in recs for k in r))


def window_sum(series: Sequence[tuple[float, list[float]]], t0: float, t1: float) -> list[float] | None:
    """Sum of per-interval vectors whose interval end lies in (t0, t1]; None when none do."""
    rows = [v for t, v in series if t0 < t <= t1 + 0.5]
    if not rows:
        return None
    return [sum(col) for col in zip(*rows)]


# --------------------------------------------------------------------------- a source that stopped mid-run


@dataclass(frozen=True)
class Stopped:
    """A sampled source whose series ends before the run did (its ``collector_off`` event with
    ``stopped_at``: :class:`diag.core.errors.SourceStopped`): the last record's time (Unix s, None: no record)
    and why in a few words."""

    t: float | None
    reason: str

    def text(self, run_started: Any = None) -> str:
        """"14:50:03 UTC (12.3 s into the run; connection refused)" for the report."""
        if self.t is None:
            return f"before its first record ({self.reason})"
        into = (f"{self.t - run_started:.1f} s into the run; " if isinstance(run_started, (int, float))
                and not isinstance(run_started, bool) else "")
        return f"{time.strftime('%H:%M:%S UTC', time.gmtime(self.t))} ({into}{self.reason})"


def source_stopped(b: Bundle, key: str) -> Stopped | None:
    """Where series ``key`` (``host--db1``) stopped before the run's end, and why; None when it did not."""
    for e in b.events:
        if e.get("kind") == "collector_off" and e.get("collector") == key and "stopped_at" in e:
            t = e.get("stopped_at")
            return Stopped(float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None,
                           str(e.get("reason") or "reason not recorded"))
    return None
