"""Why is A slower than B: pair steps that ran the same workload and client count, compare per transaction.

Pure functions of bundles. A pair is (target A step, target B step) with the
same workload and client count, from one run (different targets) or from two
runs. For each pair: the TPS and p95 ratios, then per-transaction resources
(server CPU µs, client CPU µs, context switches, and whatever
``per_txn_metrics`` finds in the bundle), ranked by how much of the gap each
difference could explain.
"""

from __future__ import annotations

from typing import Any

from diag.bundle import Bundle, safe_name
from reports.durability_view import window_rate
from reports.resources import step_resources
from reports.rules.base import engine_of

# Per-transaction quantities compared between sides, with their unit; larger is worse for all of them.
COMPARED = (
    ("server_cpu_us_per_txn", "µs", "server CPU per transaction"),
    ("server_user_us_per_txn", "µs", "server user CPU per transaction"),
    ("server_sys_us_per_txn", "µs", "server system CPU per transaction"),
    ("client_cpu_us_per_txn", "µs", "client (driver) CPU per transaction"),
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


def engine_per_txn(b: Bundle, row: dict[str, Any]) -> dict[str, float]:
    """Per-transaction engine counters and wait time by class over one step's window."""
    out: dict[str, float] = {}
    label = safe_name(str(row.get("target")))
    engine = engine_of(b, str(row.get("target")), row)
    t0, t1, tps = row.get("t_start"), row.get("t_end"), row.get("tps")
    if not (t0 and t1 and tps):
        return out
    counters = [(engine.stats_series, metric, keys) for metric, keys in engine.per_txn_counters]
    for series, metric, keys in counters + [("flush", metric, keys) for metric, keys in FLUSH_COUNTERS]:
        if metric in out:
            continue
        rate = window_rate(b.series.get(f"{series}--{label}", []), keys, t0, t1)
        if rate is not None:
            out[metric] = rate / tps
    dev = b.series.get(f"flush--{label}", [])
    dkeys = sorted({k for r in dev[:3] for k in r if k.startswith("device.") and k.endswith(".flushes")})
    if dkeys:
        rate = window_rate(dev, dkeys, t0, t1)
        if rate is not None:
            out["device_flushes_per_txn"] = rate / tps
    # Wait time per transaction by class: each ASH sample stands for (tick length x one backend), so
    # class share x clients x 1 s / tps is that class's backend-seconds per transaction.
    counts: dict[str, int] = {}
    samples = ticks = 0
    for r in b.series.get(f"{engine.waits_series}--{label}", []):
        if t0 < r.get("t", 0) <= t1 + 0.5:
            ticks += int(r.get("ticks") or 0)
            samples += int(r.get("samples") or 0)
            for k, v in (r.get("waits") or {}).items():
                cls = k.split(":", 1)[0] if ":" in k else k
                counts[cls] = counts.get(cls, 0) + int(v)
    if samples and ticks:
        backends_per_tick = samples / ticks
        for cls, n in counts.items():
            out[f"wait_us_per_txn.{cls}"] = 1e6 * (n / samples) * backends_per_tick / tps
    return out


def _steps(b: Bundle) -> list[dict[str, Any]]:
    """Result rows joined with their per-transaction resources."""
    res = step_resources(b)
    out = []
    for r, extra in zip(b.results, res):
        out.append({**r, **{k: v for k, v in extra.items() if k not in r}, **engine_per_txn(b, r)})
    return out


def pair_steps(a: Bundle, b: Bundle | None = None) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Pairs (A, B) of steps with the same workload and clients; A is the faster side."""
    left = _steps(a)
    right = _steps(b) if b is not None else left
    pairs = []
    seen = set()
    for x in left:
        for y in right:
            if x is y or x.get("workload") != y.get("workload") or x.get("clients") != y.get("clients"):
                continue
            if b is None and x.get("target") == y.get("target"):
                continue
            key = (x.get("workload"), x.get("clients"), *sorted([str(x.get("target")), str(y.get("target"))]))
            if b is None and key in seen:
                continue
            seen.add(key)
            fast, slow = (x, y) if (x.get("tps") or 0) >= (y.get("tps") or 0) else (y, x)
            pairs.append((fast, slow))
    return pairs


def explain_pair(fast: dict[str, Any], slow: dict[str, Any]) -> dict[str, Any]:
    """Ratios and ranked per-transaction differences for one pair."""
    tps_ratio = (fast.get("tps") or 0) / slow["tps"] if slow.get("tps") else None
    p95f = (fast.get("latency_ms") or {}).get("p95")
    p95s = (slow.get("latency_ms") or {}).get("p95")
    diffs = []
    wait_keys = sorted({k for k in (*fast, *slow) if k.startswith("wait_us_per_txn.")})
    compared = list(COMPARED) + [(k, "µs", f"time waiting on {k.split('.', 1)[1]} per transaction")
                                 for k in wait_keys]
    for key, unit, what in compared:
        vf, vs = fast.get(key), slow.get(key)
        if key.startswith("wait_us_per_txn."):
            vf, vs = vf or 0.0, vs or 0.0  # a class never sampled on one side waited ~0 there
        if vf is None or vs is None:
            continue
        diffs.append({"metric": key, "what": what, "unit": unit, "fast": vf, "slow": vs, "difference": vs - vf,
                      "ratio": (vs / vf) if vf else None})
    # Rank CPU differences by the share of the slow side's time per transaction they explain:
    # at saturation, time per transaction ~ 1/tps per client slot.
    slow_us = 1e6 * (slow.get("clients") or 1) / slow["tps"] if slow.get("tps") else None
    for d in diffs:
        d["share_of_slow_txn_time"] = (d["difference"] / slow_us) if (slow_us and d["unit"] == "µs") else None
    diffs.sort(key=lambda d: -(d["share_of_slow_txn_time"] if d["share_of_slow_txn_time"] is not None
                               else (d["ratio"] or 0) / 100))
    return {
        "workload": fast.get("workload"), "clients": fast.get("clients"),
        "fast": fast.get("target"), "slow": slow.get("target"),
        "fast_tps": fast.get("tps"), "slow_tps": slow.get("tps"), "tps_ratio": tps_ratio,
        "fast_p95_ms": p95f, "slow_p95_ms": p95s,
        "p95_ratio": (p95s / p95f) if (p95f and p95s) else None,
        "differences": diffs,
    }


def compare(a: Bundle, b: Bundle | None = None) -> list[dict[str, Any]]:
    """All explained pairs, ordered by workload then client count."""
    out = [explain_pair(f, s) for f, s in pair_steps(a, b)]
    out.sort(key=lambda e: (str(e["workload"]), e["clients"] or 0, str(e["fast"])))
    return out


def format_comparison(items: list[dict[str, Any]]) -> str:
    """Plain-text tables for the terminal."""
    if not items:
        return "no comparable steps: the runs share no workload and client count on different targets"
    lines = []
    for e in items:
        ratio = f"{e['tps_ratio']:.2f}x" if e["tps_ratio"] else "n/a"
        lines.append(f"{e['workload']} at {e['clients']} clients: {e['fast']} {e['fast_tps']:,.0f} tps vs "
                     f"{e['slow']} {e['slow_tps']:,.0f} tps ({ratio} faster)")
        if e["fast_p95_ms"] is not None and e["slow_p95_ms"] is not None:
            lines.append(f"  p95 latency: {e['fast_p95_ms']:.3f} ms vs {e['slow_p95_ms']:.3f} ms")
        for d in e["differences"]:
            share = d["share_of_slow_txn_time"]
            share_s = f", {100 * share:.0f}% of the slower side's time per transaction" if share is not None else ""
            lines.append(f"  {d['what']}: {d['fast']:,.1f} vs {d['slow']:,.1f} {d['unit']} "
                         f"(difference {d['difference']:+,.1f}{share_s})")
        if not e["differences"]:
            lines.append("  no per-transaction resource data (host collector off or remote servers)")
    return "\n".join(lines)
