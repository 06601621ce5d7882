"""Numbers you can trust: ``noisy_measurement`` (repeats or intervals spread widely) and ``unsteady_window``.

``noisy_measurement``: the step's throughput spread is large: (max - min) /
median of its repeats' throughput (``--repeat`` N >= 2), else the interquartile
range / median of its per-interval throughput (so one odd second does not count).
The evidence is what the run saw in each window at the time: the other
processes' CPU and the hypervisor's steal time (host series), and the checkpoints
the server ran (the engine's background events, :func:`background_events`).

``unsteady_window``: a measured window (each repeat's, under ``--repeat``) that is
not steady, and how much that moves its figure:

* a trend across its intervals (Mann-Kendall p < :data:`TREND_P` and a Theil-Sen
  change of at least :data:`TREND_CHANGE` of the median over the window): the
  figure against the rate the window ended at;
* a cold start (the first interval under :data:`COLD_SHARE` of the rest's
  median): the figure against the one without that interval;
* a checkpoint or a vacuum inside the window (the engine's counters): the
  figure against the one from the intervals it did not touch.
"""

from __future__ import annotations

import bisect
from dataclasses import replace
from typing import Any

from collectors.rates import counter_delta
from diag.core.bundle import Bundle, safe_name
from diag.core.stats import mann_kendall, median, relative_spread
from reports.model.cpu import cpu_use
from reports.model.series import series_keys, series_times
from reports.model.steps import Finding, Step, num, steps
from reports.rules.base import series
from reports.rules.cpu import CONDITION_WEIGHT

NOISY_SPREAD = 0.20  # HammerDB users report 20%+ between identical trials as the point where numbers mislead
TREND_P = 0.05
TREND_CHANGE = 0.10  # a drift of 10% of the figure over the window
COLD_SHARE = 0.8  # a first interval at under 80% of the rest is the window still warming up
MOVE_WARN = 0.05  # an event that moves the figure 5% or more is a warning, less is info
MIN_INTERVALS = 3
EVENT_GAP_S = 2.5  # a counter's growth over a longer span between two records is not placed in time

Interval = tuple[float, float, float]  # start, end (Unix s), transactions/s


def _intervals(b: Bundle, step: Step, t0: float, t1: float) -> list[Interval]:
    """The workload series' full intervals of one window (start, end, tps), in time order."""
    recs = series(b, "workload", step.target)
    got = [r for r in recs if r.get("workload") == step.workload and r.get("clients") == step.clients
           and isinstance(r.get("t"), (int, float)) and t0 < r["t"] <= t1 + 1e-3 and r.get("interval_s")]
    if not got:
        return []
    full = 0.9 * max(r["interval_s"] for r in got)
    return sorted((r["t"] - r["interval_s"], r["t"], r["transactions"] / r["interval_s"]) for r in got
                  if r["interval_s"] >= full)


def windows(step: Step) -> list[tuple[str, float, float]]:
    """The measured windows of a step: each complete repeat's, or the step's own."""
    reps = [(f"repeat {r.repeat}", float(r.t_start), float(r.t_end)) for r in step.row.repeat_summaries
            if r.t_start is not None and r.t_end is not None]
    return reps or [("window", step.t0, step.t1)]


# --------------------------------------------------------------------------- background events


def _counter_steps(recs: list[dict[str, Any]], keys: tuple[str, ...], t0: float, t1: float,
                   gap: float) -> list[tuple[float, float]]:
    """Spans (previous record, record) around [t0, t1] over which one of ``keys`` grew, back-to-back spans
    joined (one long checkpoint, or checkpoints one after another, is one event); spans longer than
    ``gap`` s are not placed (the counter is sampled too rarely to say when)."""
    have = sorted((r for r in recs if isinstance(r.get("t"), (int, float)) and any(k in r for k in keys)),
                  key=lambda r: r["t"])
    out: list[tuple[float, float]] = []
    for a, z in zip(have, have[1:]):
        if z["t"] <= t0 or a["t"] >= t1 or z["t"] - a["t"] > gap:
            continue
        if any((counter_delta(a.get(k), z.get(k)) or 0) > 0 for k in keys if k in a and k in z):
            if out and out[-1][1] == a["t"]:
                out[-1] = (out[-1][0], z["t"])
            else:
                out.append((a["t"], z["t"]))
    return out


def background_events(b: Bundle, step: Step, t0: float, t1: float) -> list[tuple[str, float, float]]:
    """The server's background work that can land inside a window: checkpoints (the engine's
    ``checkpoint_counters``: pg_stat_checkpointer / pg_stat_bgwriter counts) and autovacuum I/O (its
    ``autovacuum_io_prefix``: pg_stat_io of the autovacuum workers, in every 10th pg_stats record, placed only when
    two such records are close). InnoDB checkpoints continuously and purges in the background: it has neither,
    and nothing is placed (redo pressure is checkpoint_pressure's)."""
    engine = step.engine
    alternatives = engine.checkpoint_counters
    if not alternatives and not engine.autovacuum_io_prefix:
        return []
    name = safe_name(f"{engine.stats_series}--{step.target}")
    recs = b.series.get(name, [])
    done = next((keys for keys in alternatives[:-1] if any(keys[0] in r for r in recs[:3])),
                alternatives[-1] if alternatives else ())
    times = series_times(b, name)
    if times is not None:  # a span longer than the gap is not placed: records further out than it add nothing
        recs = recs[bisect.bisect_left(times, t0 - EVENT_GAP_S - 1.0):bisect.bisect_right(times, t1 + EVENT_GAP_S + 1.0)]
    out = [("checkpoint", a, z) for a, z in _counter_steps(recs, done, t0, t1, EVENT_GAP_S)] if done else []
    prefix = engine.autovacuum_io_prefix
    vac = tuple(sorted(k for k in series_keys(b, name) if prefix and k.startswith(prefix)
                       and k.rsplit(".", 1)[-1] in ("reads", "writes", "hits")))
    if vac:
        out += [("autovacuum", a, z) for a, z in _counter_steps(recs, vac, t0, t1, EVENT_GAP_S)]
    return out


# --------------------------------------------------------------------------- noisy_measurement


def _what_it_saw(b: Bundle, step: Step) -> list[dict[str, Any]]:
    """Per window: throughput, other processes' CPU, steal time, background events."""
    out = []
    tps_of: dict[str, float | None] = {f"repeat {r.repeat}": r.tps for r in step.row.repeat_summaries}
    for name, t0, t1 in windows(step):
        w: dict[str, Any] = {"window": name, "tps": tps_of.get(name, step.row.tps)}
        u = cpu_use(b, replace(step, t0=t0, t1=t1))
        if u is not None:
            w["other_processes_cpus"] = num(u.others_cores, 2)
            w["host_busy_pct"] = num(100 * u.host_busy)
        steal = _steal_pct(b, t0, t1)
        if steal is not None:
            w["steal_pct"] = num(steal, 2)
        w.update(_host_rates(b, t0, t1))
        events = background_events(b, step, t0, t1)
        if events:
            w["background"] = sorted({e[0] for e in events})
        out.append(w)
    return out


def _steal_pct(b: Bundle, t0: float, t1: float) -> float | None:
    """Steal time as a share of all CPU time over [t0, t1] (host series), percent."""
    recs = [r for r in b.series.get("host", []) if isinstance(r.get("t"), (int, float))]
    steal = total = 0.0
    for a, z in zip(recs, recs[1:]):
        if z["t"] <= t0 or a["t"] >= t1:
            continue
        d = [counter_delta(a.get(f"cpu.all.{f}"), z.get(f"cpu.all.{f}")) for f in
             ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")]
        if any(x is None for x in d):
            continue
        steal += d[-1] or 0.0
        total += sum(x or 0.0 for x in d)
    return 100 * steal / total if total > 0 else None


def _host_rates(b: Bundle, t0: float, t1: float) -> dict[str, float]:
    """The machine's interrupts and context switches per second over [t0, t1] (host series): how often the
    host itself interfered, whoever caused it."""
    recs = [r for r in b.series.get("host", []) if isinstance(r.get("t"), (int, float))]
    out = {}
    for key, name in (("interrupts", "host_interrupts_per_s"), ("ctx_switches", "host_context_switches_per_s")):
        total = span = 0.0
        for a, z in zip(recs, recs[1:]):
            overlap = min(z["t"], t1) - max(a["t"], t0)
            d = counter_delta(a.get(key), z.get(key))
            if overlap <= 0 or d is None or z["t"] <= a["t"]:
                continue
            total += d * overlap / (z["t"] - a["t"])
            span += overlap
        if span > 0:
            out[name] = num(total / span)
    return out


def _iqr_spread(xs: list[float]) -> float:
    s = sorted(xs)
    m = median(s)
    q1, q3 = median(s[: len(s) // 2]), median(s[(len(s) + 1) // 2:])
    return (q3 - q1) / m if m else 0.0


def noisy_measurement(b: Bundle) -> list[Finding]:
    """A step whose repeats (or intervals) spread by :data:`NOISY_SPREAD` of the median or more."""
    out: list[Finding] = []
    for step in steps(b):
        reps = [float(r.tps) for r in step.row.repeat_summaries if r.complete]
        if len(reps) >= 2 and median(reps) <= 0 < max(reps):  # most repeats measured nothing: (max - min) /
            # median would be 0 / 0 and call the noisiest step steady; their mean is the honest scale then
            spread = (max(reps) - min(reps)) / (sum(reps) / len(reps))
            basis = f"(max - min) / mean of {len(reps)} repeats' throughput (their median is 0: most measured none)"
        elif len(reps) >= 2:
            spread, basis = relative_spread(reps), f"(max - min) / median of {len(reps)} repeats' throughput"
        else:
            ivs = [x for _, t0, t1 in windows(step) for _, _, x in _intervals(b, step, t0, t1)]
            if len(ivs) < 4:
                continue
            spread, basis = _iqr_spread(ivs), f"interquartile range / median of {len(ivs)} per-interval throughputs"
        if spread < NOISY_SPREAD:
            continue
        ci = step.row.interval
        saw = _what_it_saw(b, step)
        ev: dict[str, Any] = {"spread_pct": num(100 * spread), "spread_is": basis,
                              "repeats_tps": reps or None, "median_tps": step.row.tps,
                              "interval": f"{ci.low:,.1f} .. {ci.high:,.1f} ({100 * ci.level:.0f}%)"
                              if ci is not None else None, "what_each_window_saw": "; ".join(_saw_words(w) for w in saw)}
        out.append(step.finding(
            "noisy_measurement", "warning",
            f"Throughput spread {num(100 * spread)}% between {'repeats' if reps else 'intervals'}: the figure "
            "is uncertain", ev,
            "Identical work ran at very different rates. Compare the windows' evidence: other processes' CPU or "
            "steal time point at the machine (run on an idle host, or more repeats with --repeat so the median "
            "holds), a checkpoint at the server's own background work. Differences smaller than this spread are "
            "not results.",
            CONDITION_WEIGHT * min(1.0, spread), spread=spread, windows=saw))
    return out


def _saw_words(w: dict[str, Any]) -> str:
    """One window's evidence in words (the report shows evidence as text; the numbers are in ``extra``)."""
    parts = [f"{w['window']}: {w['tps']:,.0f} tps" if isinstance(w.get("tps"), (int, float)) else w["window"]]
    if "other_processes_cpus" in w:
        parts.append(f"other processes {w['other_processes_cpus']:g} CPUs, host busy {w['host_busy_pct']:g}%")
    if "steal_pct" in w:
        parts.append(f"steal {w['steal_pct']:g}%")
    if "host_interrupts_per_s" in w:
        parts.append(f"{w['host_interrupts_per_s']:,.0f} interrupts/s")
    if "host_context_switches_per_s" in w:
        parts.append(f"{w['host_context_switches_per_s']:,.0f} context switches/s")
    if w.get("background"):
        parts.append("inside it: " + ", ".join(w["background"]))
    return ", ".join(parts)


# --------------------------------------------------------------------------- unsteady_window


def _figure(ivs: list[Interval]) -> float:
    """A window's throughput from its intervals (their mean: each is a full, equal interval)."""
    return sum(x for _, _, x in ivs) / len(ivs)


def _unsteady(b: Bundle, step: Step, name: str, t0: float, t1: float) -> list[dict[str, Any]]:
    """What is unsteady in one window: each cause with the figure it moves and by how much."""
    ivs = _intervals(b, step, t0, t1)
    if len(ivs) < MIN_INTERVALS:
        return []
    fig = _figure(ivs)
    tps = [x for _, _, x in ivs]
    found = []
    tr = mann_kendall(tps)
    end_rate = median(tps) + tr.slope * (len(tps) - 1) / 2  # the Theil-Sen line at the last interval
    if tr.p < TREND_P and abs(tr.slope) * (len(tps) - 1) >= TREND_CHANGE * median(tps):
        found.append({"window": name, "cause": "trend", "p": num(tr.p, 4),
                      "change_over_window_pct": num(100 * tr.slope * (len(tps) - 1) / median(tps)),
                      "figure_tps": num(fig), "against_tps": num(end_rate), "against": "the rate it ended at",
                      "moves_figure_pct": num(100 * (fig / end_rate - 1)) if end_rate > 0 else None})
    rest = median(tps[1:])
    if tps[0] < COLD_SHARE * rest:
        without = _figure(ivs[1:])
        found.append({"window": name, "cause": "cold start", "first_interval_tps": num(tps[0]),
                      "rest_median_tps": num(rest), "figure_tps": num(fig), "against_tps": num(without),
                      "against": "the window without its first interval",
                      "moves_figure_pct": num(100 * (fig / without - 1))})
    for kind, a, z in background_events(b, step, t0, t1):
        clean = [iv for iv in ivs if iv[1] <= a or iv[0] >= z]
        hit = len(ivs) - len(clean)
        entry: dict[str, Any] = {"window": name, "cause": kind, "between_s": [round(a - t0, 2), round(z - t0, 2)],
                                 "intervals_touched": hit, "figure_tps": num(fig)}
        if clean and hit:
            entry.update(against_tps=num(_figure(clean)), against="the intervals it did not touch",
                         moves_figure_pct=num(100 * (fig / _figure(clean) - 1)))
        found.append(entry)
    return found


def unsteady_window(b: Bundle) -> list[Finding]:
    """One finding per step with unsteady windows: every cause, its window and how much it moves the figure."""
    out: list[Finding] = []
    for step in steps(b):
        causes = [c for name, t0, t1 in windows(step) for c in _unsteady(b, step, name, t0, t1)]
        if not causes:
            continue
        moves = [abs(c["moves_figure_pct"]) / 100 for c in causes if isinstance(c.get("moves_figure_pct"), (int, float))]
        worst = max(moves, default=0.0)
        kinds = ", ".join(sorted({c["cause"] for c in causes}))
        title = (f"Measured window not steady ({kinds}): moves the figure by up to {num(100 * worst)}%" if moves
                 else f"Measured window not steady ({kinds} throughout): no interval was free of it")
        out.append(step.finding(
            "unsteady_window", "warning" if worst >= MOVE_WARN or not moves else "info", title,
            {"causes": "; ".join(_cause_words(c) for c in causes),
             "source": f"per-interval throughput (series/workload--{safe_name(step.target)}) and the server's "
                       "background counters"},
            "The figure mixes more than one state of the server. Warm up longer (--warmup) for a cold start, "
            "measure longer for a trend, and read a checkpoint or vacuum inside the window as part of the cost of "
            "the workload only if it would recur at that rate; --repeat spreads the windows so one event counts "
            "once.",
            CONDITION_WEIGHT * min(1.0, worst), worst=worst, causes=causes))
    return out


def _cause_words(c: dict[str, Any]) -> str:
    """One cause of an unsteady window in words (the numbers are in the finding's ``extra``)."""
    what = {"trend": f"a trend of {c.get('change_over_window_pct')}% over the window (Mann-Kendall p={c.get('p')})",
            "cold start": f"a cold start (first interval {c.get('first_interval_tps')} tps against "
                          f"{c.get('rest_median_tps')} for the rest)"}.get(
        c["cause"], f"{c['cause']} between {c['between_s'][0]} and {c['between_s'][1]} s of the window "
                    f"({c.get('intervals_touched')} interval(s) touched)" if "between_s" in c else c["cause"])
    move = (f": {c['figure_tps']:g} tps against {c['against_tps']:g} for {c['against']} "
            f"({c['moves_figure_pct']:+g}%)" if "moves_figure_pct" in c else "")
    return f"{c['window']}: {what}{move}"
