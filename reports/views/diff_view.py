"""Differential CPU flame graphs of compared steps: B against A, per transaction (FlameGraph's difffolded).

Each side's folded CPU profile is normalised to CPU µs per transaction of its own step
(``samples / freq_hz`` CPU seconds over ``tps x window`` transactions), so two runs at different
rates, sampling rates (frame pointers at 499 Hz, DWARF at 249 Hz) or window lengths compare.
Used by the report's comparison section and by ``dbdiag compare``'s page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collectors.profile.parse import load_folded
from diag.core.bundle import Bundle
from diag.core.schema import ResultRow
from reports.model.compare import run_name
from reports.views.flamegraph import diff_flamegraph_svg
from reports.model.observer import profiled_tps

DIFF_W = 1060  # px: the page's width
MIN_SHARED = 0.5  # of the slower side's CPU in programs the faster side runs too: else the graph is all red


def _programs(per_tx: dict[str, float]) -> dict[str, float]:
    """CPU per program (the folded stack's second frame: ``postgres``, ``mariadbd``)."""
    out: dict[str, float] = {}
    for stack, v in per_tx.items():
        parts = stack.split(";")
        prog = parts[1] if len(parts) > 1 else parts[0]
        out[prog] = out.get(prog, 0.0) + v
    return out


def shared_share(a: dict[str, float], b: dict[str, float]) -> float:
    """Share of B's CPU in programs A also ran (0..1); two engines share almost nothing."""
    pa, pb = _programs(a), _programs(b)
    total = sum(pb.values())
    return sum(v for p, v in pb.items() if p in pa) / total if total else 0.0


def cpu_per_tx(b: Bundle, row: ResultRow) -> dict[str, float] | None:
    """Folded CPU profile of one step as CPU µs per transaction per stack; None when not profiled."""
    prof = row.profile or {}
    rel, freq, window, tps = prof.get("folded"), prof.get("freq_hz"), prof.get("window"), profiled_tps(row)
    if not rel or not freq or not window or len(window) != 2 or not tps or tps <= 0:
        return None
    seconds = float(window[1]) - float(window[0])
    path = Path(b.path) / rel
    if seconds <= 0 or not path.exists():
        return None
    k = 1e6 / float(freq) / (float(tps) * seconds)
    return {stack: n * k for stack, n in load_folded(path).items()}


def _step(bundles: list[Bundle], run: str | None, target: str, workload: str,
          clients: int) -> tuple[Bundle, ResultRow] | None:
    for b in bundles:
        if run is not None and len(bundles) > 1 and run_name(b) != run:
            continue
        for row in b.rows:
            if row.key == (target, workload, clients):
                return b, row
    return None


def _main_program(per_tx: dict[str, float]) -> str:
    """The program with the most CPU per transaction in a folded profile."""
    progs = _programs(per_tx)
    return max(progs, key=lambda p: progs[p])


def with_diff_flames(bundles: list[Bundle], items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Comparison items with ``diff_flame``: the slower side's CPU per transaction against the faster's ("" if
    either was not profiled)."""
    out = []
    for e in items:
        sides = [_step(bundles, e.get(f"{s}_run"), e[s], e["workload"], e["clients"]) for s in ("fast", "slow")]
        per_tx = [cpu_per_tx(*s) if s else None for s in sides]
        fast_tx, slow_tx = per_tx
        svg = note = ""
        if fast_tx and slow_tx:
            names = (str(e.get("fast_name")), str(e.get("slow_name")))
            if shared_share(fast_tx, slow_tx) < MIN_SHARED:
                progs = " and ".join(sorted({_main_program(p) for p in (fast_tx, slow_tx)}))
                note = (f"No differential flame graph: the two sides run different programs ({progs}), so every "
                        "frame would be new; each side's own flame graph is in the profile section of its report.")
            else:
                svg = diff_flamegraph_svg(fast_tx, slow_tx, f"CPU per transaction: {names[1]} against {names[0]}",
                                          names, unit="CPU µs/tx", width=DIFF_W)
        out.append({**e, "diff_flame": svg, "diff_note": note})
    return out
