"""``dbdiag compare RUN_A [RUN_B]``: why is one target slower than another, in sentences and per transaction.

Prints, per pair of steps with the same workload and client count, whether the
gap is significant or within noise (:mod:`reports.model.significance`), the
sentences that explain it (durability first when it differs), then the
table behind them; writes the same to an HTML page (``--html``, by default
``compare.html`` in RUN_A, or ``compare-<RUN_B>.html`` there for two runs) and
prints its path last. ``dbdiag compare BASE... --vs NEW...`` compares a baseline
set of runs with a contender set instead (:mod:`reports.model.compare_sets`: the change
per step with its interval; text or ``--json``, no page). The bundles themselves
are only read.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from diag.core.bundle import Bundle, load_bundle
from diag.core.errors import UsageError
from reports.model.compare import compare, format_comparison
from reports.views.compare_report import render_comparison, render_sets, write_page
from reports.model.compare_sets import compare_sets, format_sets
from reports.model.watch_view import as_one_step


def default_page(run_a: Path, run_b: Path | None) -> Path:
    """Where the page goes without ``--html``: beside RUN_A's own report."""
    if run_b is None:
        return run_a / "compare.html"
    return run_a / f"compare-{Path(run_b).resolve().name}.html"


def main(a: argparse.Namespace, argv: list[str]) -> int:
    """``dbdiag compare``: the exit code is 1 when no pair of steps could be compared."""
    if a.vs:
        return _sets(a)
    if len(a.runs) > 2:
        raise UsageError("dbdiag compare takes one or two runs; for more, name the contender set after --vs: "
                         "dbdiag compare BASE... --vs NEW...")
    a.run_a, a.run_b = a.runs[0], (a.runs[1] if len(a.runs) > 1 else None)
    # a watch compares as one step per target (its windows with load): see reports.model.watch_view.as_one_step
    bundles = [as_one_step(load_bundle(a.run_a))] + ([as_one_step(load_bundle(a.run_b))] if a.run_b else [])
    items = compare(*bundles)
    if a.json:
        print(json.dumps({"comparisons": items}, indent=1, default=str))
        return 0 if items else 1
    print(format_comparison(items))
    page = write_page(a.html or default_page(a.run_a, a.run_b), render_comparison(bundles, items))
    print(f"comparison page: {page}")
    return 0 if items else 1


def _sets(a: argparse.Namespace) -> int:
    """A baseline set against a contender set: one line per step, or JSON."""
    def load_set(paths: list[Path]) -> list[Bundle]:
        unique = list(dict.fromkeys(p.resolve() for p in paths))  # a run named twice counts once
        return [load_bundle(p) for p in unique]

    baseline, contender = load_set(a.runs), load_set(a.vs)
    items = compare_sets(baseline, contender)
    if a.json:
        print(json.dumps({"steps": items}, indent=1, default=str))
        return 0 if items else 1
    print(format_sets(items))
    page = write_page(a.html or a.runs[0] / f"compare-vs-{Path(a.vs[0]).resolve().name}.html",
                      render_sets(baseline, contender, items))
    print(f"comparison page: {page}")
    return 0 if items else 1
