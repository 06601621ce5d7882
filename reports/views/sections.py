"""Report sections computed from the bundle: wait profiles, symbol profiles, settings diff."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from collectors.profile.analyse import MIN_USABLE_FRAMES, top_symbols, unresolved_share, usable_share, usable_stack
from collectors.profile.parse import load_folded
from diag.core.bundle import Bundle, safe_name
from diag.core.engines import ENGINES
from diag.core.schema import ResultRow
from reports.views.flamegraph import INLINE_MIN_FRACTION, flamegraph_svg
from reports.views.flamegraph_page import write_page
from reports.views.offcpu_view import step_offcpu

# Every engine's wait series: a target has only its own engine's, so reading all of them needs no engine lookup.
WAIT_SERIES = tuple(e.waits_series for e in ENGINES)
TOP_WAITS = 12
TOP_SYMBOLS = 15
FLAME_W = 760  # px: the flame graph sits beside the symbol tables in a 1100 px page


def step_waits(b: Bundle, row: ResultRow) -> dict[str, Any] | None:
    """Share of sampled backend time per wait state during one step (ASH-like samples)."""
    label = safe_name(row.target)
    t0, t1 = row.t_start, row.t_end
    if not t0 or not t1:
        return None
    counts: Counter[str] = Counter()
    samples = 0
    for name in WAIT_SERIES:
        for r in b.series.get(f"{name}--{label}", []):
            if t0 < r.get("t", 0) <= t1 + 0.5:
                samples += int(r.get("samples") or 0)
                counts.update({k: int(v) for k, v in (r.get("waits") or {}).items()})
    if samples <= 0:
        return None
    rows = [{"state": k, "samples": v, "share": v / samples} for k, v in counts.most_common(TOP_WAITS)]
    return {"target": row.target, "workload": row.workload, "clients": row.clients, "samples": samples, "rows": rows}


def wait_profiles(b: Bundle) -> list[dict[str, Any]]:
    return [w for w in (step_waits(b, r) for r in b.rows) if w]


def step_profile(b: Bundle, row: ResultRow, with_flame: bool = True) -> dict[str, Any] | None:
    """Top self symbols per process kind and a flame graph for one step's perf window."""
    prof = row.profile or {}
    rel = prof.get("folded")
    if not rel:
        return {"target": row.target, "workload": row.workload, "clients": row.clients,
                "error": prof["error"]} if prof.get("error") else None
    path = Path(b.path) / rel
    if not path.exists():
        return None
    folded = load_folded(path)
    kinds: dict[str, list[Any]] = {}
    for s in top_symbols(folded, by_kind=True, n=TOP_SYMBOLS):
        kinds.setdefault(s.kind, []).append(s)
    kind_samples: Counter[str] = Counter()
    for stack, n in folded.items():
        kind_samples[stack.split(";", 1)[0]] += n
    flame = interactive = ""
    if with_flame and folded:
        title = f"{row.target} {row.workload} {row.clients} clients"
        flame = flamegraph_svg(folded, title=title, width=FLAME_W, min_fraction=INLINE_MIN_FRACTION)
        interactive = write_page(Path(b.path), rel, folded, title)
    return {"target": row.target, "workload": row.workload, "clients": row.clients,
            "samples": sum(folded.values()), "freq_hz": prof.get("freq_hz"), "window": prof.get("window"),
            "unresolved_share": unresolved_share(folded) if folded else 0.0, "hint": prof.get("symbol_hint", ""),
            "kinds": [{"kind": k, "samples": kind_samples[k], "rows": v} for k, v in kinds.items()],
            "flame": flame, "interactive": interactive, "file": rel, "unwinder": prof.get("unwinder") or "fp",
            "unwinder_reason": prof.get("unwinder_reason") or "", "scope": prof.get("scope") or "",
            "usable_share": usable_share(folded), "usable_frames": MIN_USABLE_FRAMES,
            "usable_samples": sum(n for s, n in folded.items() if usable_stack(s)),
            "offcpu": step_offcpu(b, row, step_waits(b, row), with_flame) if with_flame else None}


def profiles(b: Bundle) -> list[dict[str, Any]]:
    return [p for p in (step_profile(b, r) for r in b.rows) if p]


def settings_diff(b: Bundle) -> list[dict[str, Any]]:
    """Key settings side by side for targets of the same engine, differing rows first."""
    targets = b.run.get("targets", [])
    out = []
    for engine in ENGINES:
        ts = [t for t in targets if engine.knows(str(t.get("engine") or "")) and t.get("settings")]
        if len(ts) < 2:
            continue
        names = sorted({k for t in ts for k in t["settings"]})
        rows = [{"name": n, "values": [t["settings"].get(n, "-") for t in ts]} for n in names]
        rows.sort(key=lambda r: (len(set(r["values"])) == 1, r["name"]))
        out.append({"engine": engine.name, "labels": [t.get("label") for t in ts], "rows": rows})
    return out
