"""The HTML page of ``dbdiag compare``: the same sentences and tables as the report's "Why is one slower".

Rendered from the compared bundles alone, with the report's own jinja environment
and the same partial template (``comparison.html.j2``), so the page, the
terminal and each run's report say the same thing.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from diag.core.bundle import Bundle
from diag.core.errors import DiagError
from diag.core.redact import redact_text
from reports.model.compare import run_name
from reports.views.diff_view import with_diff_flames
from reports.views.render import _env as report_env  # one jinja environment (filters, autoescape) for both pages
from reports.views.sections import step_profile
from reports.model.steps import engine_of
from reports.views.statements_view import compare_pair, step_statements
from reports.views.verdict import pair_lines

TOP_SYMBOLS = 8


def _symbols(bundles: list[Bundle], run: str | None, target: str, workload: str, clients: int
             ) -> list[tuple[str, float]]:
    """Top self symbols of the busiest process kind (the backends / connections) of one step, if profiled."""
    for b in bundles:
        if run is not None and run_name(b) != run:
            continue
        for row in b.rows:
            if row.key == (target, workload, clients):
                prof = step_profile(b, row, with_flame=False) or {}
                for k in prof.get("kinds", [])[:1]:
                    return [(s.symbol, s.percent) for s in k["rows"][:TOP_SYMBOLS]]
                return []
    return []


def with_symbols(bundles: list[Bundle], items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The comparison items with ``fast_symbols`` / ``slow_symbols`` from their own bundles' profiles."""
    out = []
    for e in items:
        extra = {f"{side}_symbols": _symbols(bundles, e.get(f"{side}_run"), e[side], e["workload"], e["clients"])
                 for side in ("fast", "slow")}
        out.append({**e, **extra})
    return out


def _bundle_of(bundles: list[Bundle], run: str | None) -> Bundle | None:
    return next((b for b in bundles if run is None or run_name(b) == run), None)


def statements_versus(bundles: list[Bundle], items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per compared pair whose two steps recorded statements: the statements lined up, faster side as A."""
    out = []
    for e in items:
        sides = []
        for side in ("fast", "slow"):
            b = _bundle_of(bundles, e.get(f"{side}_run"))
            found = step_statements(b, str(e[side]), str(e["workload"]), int(e["clients"])) if b else None
            if b is None or found is None:
                break
            sides.append((b, *found))
        if len(sides) < 2:
            continue
        (ba, ra, sa), (bb, rb, sb) = sides
        fw, sw = e.get("fast_wall_us"), e.get("slow_wall_us")
        c = compare_pair(str(e["workload"]), int(e["clients"]), ra, sa, rb, sb,
                         scopes=(engine_of(ba, str(e["fast"]), ra), engine_of(bb, str(e["slow"]), rb)),
                         txn_gap_us=sw - fw if fw is not None and sw is not None else None)
        out.append({**c, "a": e.get("fast_name", c.get("a")), "b": e.get("slow_name", c.get("b"))})
    return out


def render_comparison(bundles: list[Bundle], items: list[dict[str, Any]]) -> str:
    """The page's HTML (same bundles, same bytes): the verdict per pair first, then each step's explanation and
    the statements side by side."""
    runs = [run_name(b) for b in bundles]
    title = "dbdiag compare: " + " vs ".join(runs)
    comparisons = with_diff_flames(bundles, with_symbols(bundles, items))
    return report_env().get_template("compare.html.j2").render(
        title=title, runs=[{"name": n, "path": str(b.path)} for n, b in zip(runs, bundles)],
        comparisons=comparisons, verdict_pairs=pair_lines(comparisons),
        statement_compare=statements_versus(bundles, items))


def render_sets(baseline: list[Bundle], contender: list[Bundle], items: list[dict[str, Any]]) -> str:
    """The page of ``dbdiag compare BASE... --vs NEW...``: per step the contender's change, its interval and
    verdict (the same figures as the text), a verdict line per step first."""
    title = "dbdiag compare: " + ", ".join(run_name(b) for b in baseline) + " vs " + \
        ", ".join(run_name(b) for b in contender)
    return report_env().get_template("sets.html.j2").render(
        title=title, items=items, baseline=[str(b.path) for b in baseline], contender=[str(b.path) for b in contender])


def write_page(path: Path, html: str) -> Path:
    """Write the page atomically (a temporary name renamed over it); an unwritable place is a DiagError."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(redact_text(html), encoding="utf-8")  # bundles written before redaction was complete
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()  # a half-written temporary file would hold the space a retry needs
        raise DiagError(f"cannot write the comparison page {path}: {e.strerror or e}") from None
    return path
