"""Why is A slower than B: pair steps that ran the same workload and client count, compare per transaction.

Pure functions of bundles. A pair is (target A step, target B step) with the
same workload and client count, from one run (different targets) or from two
runs. For each pair:

* sentences (:mod:`reports.model.sentences`): which side is faster and by how much,
  a durability difference whenever there is one, each statement whose plans
  read a table differently on the two sides (a full scan against an index
  lookup, where both steps recorded plans: :mod:`reports.model.plans`), then
  the components of the time accounting (:mod:`reports.model.accounting`) that
  explain the gap, largest first, in µs per transaction and share of the gap;
* the table behind them: one row per accounting component (client CPU, round
  trips, server CPU, waits by the class both engines share, unaccounted), so
  the rows line up across engines, ranked by their share of the gap; then the
  per-transaction counters (context switches, flushes, log bytes, page reads),
  which are evidence rather than time, ranked by their ratio.

A step without accounting (no CPU or wait samples in its window) falls back to
the CPU rows of :func:`reports.model.resources.step_resources`, with the gap taken
from the two sides' rates (1 s x clients / tps).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from diag.core.bundle import Bundle
from diag.core.schema import ResultRow, safe_name
from reports.model.accounting import StepAccounting, account_step
from reports.model.durability_tail import tail_flush_rates, window_tps
from reports.model.durability_view import target_info, target_settings_verdict, window_rate
from reports.model.resources import step_resources
from reports.model.steps import engine_of, steps
from reports.model.sentences import Side, contributions, pair_sentences, side_names
from reports.model.plans import plan_differences
from reports.model.series import series_times
from reports.model.significance import Verdict, compare_rows

# Per-transaction time from the host series, compared only when a side has no time accounting.
TIME_ROWS = (
    ("server_cpu_us_per_txn", "µs", "server CPU per transaction"),
    ("server_user_us_per_txn", "µs", "server user CPU per transaction"),
    ("server_sys_us_per_txn", "µs", "server system CPU per transaction"),
    ("client_cpu_us_per_txn", "µs", "client (driver) CPU per transaction"),
)
# Per-transaction counts: evidence behind the time rows; larger is worse for all of them.
COUNT_ROWS = (
    ("server_ctx_per_txn", "switches", "server context switches per transaction"),
    ("flush_calls_per_txn", "calls", "flush system calls per transaction"),
    ("device_flushes_per_txn", "flushes", "device flushes per transaction (whole device)"),
    ("log_bytes_per_txn", "bytes", "WAL / redo bytes per transaction"),
    ("block_reads_per_txn", "pages", "buffer page reads per transaction (hits and misses)"),
    ("disk_reads_per_txn", "pages", "pages read from outside the buffer pool per transaction"),
)
# Flush tracing counters behind flush_calls_per_txn (series ``flush``, any engine), the first recorded wins.
# The engine counters behind the other rows are the engine's (Engine.per_txn_counters).
FLUSH_COUNTERS = (("flush_calls_per_txn", ("fs.sync_file",)),
                  ("flush_calls_per_txn", ("syscalls.fsync", "syscalls.fdatasync")))


def engine_per_txn(b: Bundle, row: ResultRow) -> dict[str, float]:
    """Per-transaction engine and flush counters over one step's window."""
    out: dict[str, float] = {}
    label = safe_name(row.target)
    engine = engine_of(b, row.target, row)
    t0, t1, tps = row.t_start, row.t_end, row.tps
    if not (t0 and t1 and tps):
        return out
    counters = [(engine.stats_series, metric, keys) for metric, keys in engine.per_txn_counters]
    for series, metric, keys in counters + [("flush", metric, keys) for metric, keys in FLUSH_COUNTERS]:
        if metric in out:
            continue
        name = f"{series}--{label}"
        rate = window_rate(b.series.get(name, []), keys, t0, t1, series_times(b, name))
        if rate is not None:
            out[metric] = rate / tps
    if "flush_calls_per_txn" not in out:  # counted in the step's tail (collectors.flush_tail): per tail txn
        got = tail_calls_per_txn(b, row)
        if got is not None:
            out["flush_calls_per_txn"] = got
    dev = b.series.get(f"flush--{label}", [])
    dev_times = series_times(b, f"flush--{label}")
    dkeys = sorted({k for r in dev[:3] for k in r if k.startswith("device.") and k.endswith(".flushes")})
    if dkeys:
        rate = window_rate(dev, dkeys, t0, t1, dev_times)
        if rate is not None:
            out["device_flushes_per_txn"] = rate / tps
    return out


def tail_calls_per_txn(b: Bundle, row: ResultRow) -> float | None:
    """Flush calls per transaction in the step's tail (the row's ``flush_tail`` over the load's rate while they
    were counted), the larger of file syncs and fsync + fdatasync calls as the durability view takes it;
    None without one."""
    got = tail_flush_rates(row, row.tps or 0.0, window_tps(b, row)) if row.tps else None
    return got[1] / row.tps if got is not None and row.tps else None


def run_name(b: Bundle) -> str:
    """A run's name for people: its ``--name`` (run.json ``name``) when it was given, else its bundle
    folder's name."""
    name = b.run.get("name")
    return name if isinstance(name, str) and name else Path(b.path).resolve().name


def _steps(b: Bundle) -> list[dict[str, Any]]:
    """Result rows joined with their per-transaction resources, time accounting and durability verdict.

    Keys: ``row`` (the :class:`ResultRow`, read for the step's own figures), the per-transaction figures
    (:func:`step_resources`, :func:`engine_per_txn`; a name the row has itself is left out, as the row's own
    figure it would shadow), ``accounting`` (StepAccounting or None), ``durability`` (SettingsVerdict),
    ``engine_obj``, ``run`` (the bundle's name) and ``bundle``."""
    accounted = {s.key: account_step(b, s) for s in steps(b)}
    res = step_resources(b)
    out = []
    for row, extra in zip(b.rows, res):
        label = row.target
        key = (label, row.workload, row.clients or 1)
        own = row.to_dict().keys()
        per_txn = {k: v for k, v in {**extra, **engine_per_txn(b, row)}.items() if k not in own}
        out.append({**per_txn, "row": row,
                    "accounting": accounted.get(key), "engine_obj": engine_of(b, label, row),
                    "durability": target_settings_verdict(target_info(b.run, label)), "run": run_name(b),
                    "bundle": b})
    return out


def step_workload(b: Bundle, name: str) -> str:
    """A step's workload (``name``) as comparisons pair it: its name, and "tpcc --tpcc-mode sp" for TPC-C run as
    stored procedures (run.json ``options.tpcc_mode``; bundles from before it was recorded ran the client mode):
    one CALL a transaction against ~27 statements from the client is not the same workload."""
    mode = str((b.run.get("options") or {}).get("tpcc_mode") or "client")
    return f"{name} --tpcc-mode {mode}" if name == "tpcc" and mode != "client" else name


def _row_of(item: Mapping[str, Any]) -> ResultRow:
    """The result row of an item of :func:`_steps`."""
    row: ResultRow = item["row"]
    return row


def _whole_watch(item: dict[str, Any]) -> bool:
    """A watch compared as one step (:func:`reports.model.watch_view.as_one_step`); ``item``: from :func:`_steps`."""
    row = _row_of(item)
    return row.source == "server" and row.workload == "watch"


def pair_steps(a: Bundle, b: Bundle | None = None) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pairs (A, B) of steps with the same workload (:func:`step_workload`) and clients (two whole watches: any
    clients); A is the faster side."""
    left = [{**x, "given": 0} for x in _steps(a)]
    right = [{**x, "given": 1} for x in _steps(b)] if b is not None else left
    pairs = []
    seen = set()
    for x in left:
        for y in right:
            rx, ry = _row_of(x), _row_of(y)
            if x is y or rx.workload != ry.workload:
                continue
            # two watches pair whatever their session counts (the same traffic before and after a change may
            # hold more connections); steps dbdiag drove pair only at the same client count
            if rx.clients != ry.clients and not (_whole_watch(x) and _whole_watch(y)):
                continue
            if step_workload(x["bundle"], rx.workload) != step_workload(y["bundle"], ry.workload):
                continue
            if b is None and rx.target == ry.target:
                continue
            key = (rx.workload, *sorted([(rx.target, str(rx.clients)), (ry.target, str(ry.clients))]))
            if b is None and key in seen:
                continue
            seen.add(key)
            fast, slow = (x, y) if (rx.tps or 0) >= (ry.tps or 0) else (y, x)
            pairs.append((fast, slow))
    return pairs


def _row(key: str, what: str, unit: str, vf: float, vs: float, gap: float | None) -> dict[str, Any]:
    return {"metric": key, "what": what, "unit": unit, "fast": vf, "slow": vs, "difference": vs - vf,
            "ratio": (vs / vf) if vf else None,
            "share_of_gap": (vs - vf) / gap if (gap and gap > 0 and unit == "µs") else None}


def _rate_gap(fast: dict[str, Any], slow: dict[str, Any]) -> float | None:
    """The gap in mean transaction time from the rates alone: each client slot takes clients / tps s."""
    c = _row_of(slow).clients or 1
    ftps, stps = _row_of(fast).tps, _row_of(slow).tps
    if not (ftps and stps):
        return None
    return float(1e6 * c / stps - 1e6 * c / ftps)


def differences(fast: dict[str, Any], slow: dict[str, Any]) -> list[dict[str, Any]]:
    """The table of one pair: time rows by share of the gap (largest first), then count rows by ratio."""
    fa: StepAccounting | None = fast.get("accounting")
    sa: StepAccounting | None = slow.get("accounting")
    rows = []
    gap: float | None
    if fa is not None and sa is not None:
        gap = sa.wall_us_per_txn - fa.wall_us_per_txn
        rows = [_row(c.key, c.label, "µs", c.fast_us, c.slow_us, gap) for c in contributions(fa, sa)]
    else:
        gap = _rate_gap(fast, slow)
        rows = [_row(k, what, unit, fast[k], slow[k], gap) for k, unit, what in TIME_ROWS
                if fast.get(k) is not None and slow.get(k) is not None]
        rows.sort(key=lambda d: -d["difference"])
    counts = [_row(k, what, unit, fast[k], slow[k], None) for k, unit, what in COUNT_ROWS
              if fast.get(k) is not None and slow.get(k) is not None]
    counts.sort(key=lambda d: -(d["ratio"] if d["ratio"] is not None else (1.0 if d["difference"] <= 0 else 1e9)))
    return rows + counts


def _side(row: dict[str, Any], name: str) -> Side:
    return Side(name=name, tps=float(_row_of(row).tps or 0.0), engine=row["engine_obj"],
                accounting=row.get("accounting"), durability=row.get("durability"))


def noise_sentence(v: Verdict | None, names: tuple[str, str]) -> list[str]:
    """The sentence that leads a comparison whose gap the measurements cannot tell from noise."""
    if v is None or v.verdict != "within noise":
        return []
    return [f"{names[0]} and {names[1]} are within noise of each other: {v.change_text()} ({v.how()}); the parts "
            "below describe the two measured windows, not a difference the run can show."]


def explain_pair(fast: dict[str, Any], slow: dict[str, Any]) -> dict[str, Any]:
    """Sentences, ratios and ranked per-transaction differences for one pair (steps from :func:`pair_steps`)."""
    rf, rs = _row_of(fast), _row_of(slow)
    tps_ratio = (rf.tps or 0) / rs.tps if rs.tps else None
    p95f = rf.latency_ms.get("p95")
    p95s = rs.latency_ms.get("p95")
    names = side_names((rf.target, rs.target),
                       (str(fast.get("run") or ""), str(slow.get("run") or "")),
                       first=int(fast.get("given") or 0) <= int(slow.get("given") or 0))
    fa, sa = fast.get("accounting"), slow.get("accounting")
    fv, sv = fast.get("durability"), slow.get("durability")
    # The faster side against the slower (the reference): is the gap more than the noise of the two?
    v: Verdict | None = compare_rows([(slow.get("bundle"), rs)], [(fast.get("bundle"), rf)])
    return {
        "significance": v.to_dict() if v else None, "fast_ci": rf.tps_ci, "slow_ci": rs.tps_ci,
        "workload": rf.workload, "clients": rf.clients, "fast": rf.target, "slow": rs.target,
        "fast_name": names[0], "slow_name": names[1], "fast_run": fast.get("run"), "slow_run": slow.get("run"),
        "fast_tps": rf.tps, "slow_tps": rs.tps, "tps_ratio": tps_ratio,
        "fast_p95_ms": p95f, "slow_p95_ms": p95s,
        "p95_ratio": (p95s / p95f) if (p95f and p95s) else None,
        "fast_wall_us": fa.wall_us_per_txn if fa else None, "slow_wall_us": sa.wall_us_per_txn if sa else None,
        "fast_durability": fv.status if fv else "unknown", "slow_durability": sv.status if sv else "unknown",
        "sentences": noise_sentence(v, names) + pair_sentences(
            _side(fast, names[0]), _side(slow, names[1]),
            plans=[f"{s}." for s in plan_differences(rf, names[0], rs, names[1])]),
        "differences": differences(fast, slow),
    }


def compare(a: Bundle, b: Bundle | None = None) -> list[dict[str, Any]]:
    """All explained pairs, ordered by workload then client count."""
    out = [explain_pair(f, s) for f, s in pair_steps(a, b)]
    out.sort(key=lambda e: (str(e["workload"]), e["clients"] or 0, str(e["fast"])))
    return out


def format_comparison(items: list[dict[str, Any]]) -> str:
    """Plain text for the terminal: per pair its heading, its sentences, then the table behind them."""
    if not items:
        return "no comparable steps: the runs share no workload and client count on different targets"
    lines = []
    for e in items:
        ratio = f"{e['tps_ratio']:.2f}x" if e["tps_ratio"] else "n/a"
        clients = f"{e['clients']} client{'s' if e['clients'] != 1 else ''}"
        sig = e.get("significance")
        lines.append(f"{e['workload']} at {clients}: {e['fast_name']} {e['fast_tps']:,.0f} tps vs "
                     f"{e['slow_name']} {e['slow_tps']:,.0f} tps "
                     + ("(within noise)" if sig and sig["verdict"] == "within noise" else f"({ratio} faster)"))
        if sig:
            lines.append(f"  {e['fast_name']} against {e['slow_name']}: {sig['text']}")
        lines.extend(f"  {s}" for s in e["sentences"])
        if e.get("fast_ci") and e.get("slow_ci"):
            f, s = e["fast_ci"], e["slow_ci"]
            lines.append(f"  throughput median [interval]: {f['median']:,.0f} [{f['low']:,.0f} .. {f['high']:,.0f}] vs "
                         f"{s['median']:,.0f} [{s['low']:,.0f} .. {s['high']:,.0f}] tps ({f['method']}, "
                         f"{100 * f['level']:.0f}% / {100 * s['level']:.0f}%)")
        if e["fast_p95_ms"] is not None and e["slow_p95_ms"] is not None:
            lines.append(f"  p95 latency: {e['fast_p95_ms']:.3f} ms vs {e['slow_p95_ms']:.3f} ms")
        for d in e["differences"]:
            share = d["share_of_gap"]
            share_s = f", {100 * share:.0f}% of the gap" if share is not None else ""
            lines.append(f"    {d['what']}: {d['fast']:,.1f} vs {d['slow']:,.1f} {d['unit']} "
                         f"(difference {d['difference']:+,.1f}{share_s})")
        if not e["differences"]:
            lines.append("  no per-transaction resource data (host collector off or remote servers)")
    return "\n".join(lines)
