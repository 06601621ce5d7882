"""``dbdiag compare RUN_A [RUN_B]``: why is one target slower than another, in sentences and per transaction.

Prints, per pair of steps with the same workload and client count, whether the
gap is significant or within noise (:mod:`reports.significance`), the
sentences that explain it (durability first when it differs), then the
table behind them; writes the same to an HTML page (``--html``, by default
``compare.html`` in RUN_A, or ``compare-<RUN_B>.html`` there for two runs) and
prints its path last. ``dbdiag compare BASE... --vs NEW...`` compares a baseline
set of runs with a contender set instead (:mod:`reports.compare_sets`: the change
per step with its interval; text or ``--json``, no page). The bundles themselves
are only read.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from diag.bundle import load_bundle
from diag.errors import UsageError
from reports.compare import compare, format_comparison
from reports.compare_report import render_comparison, write_page
from reports.compare_sets import compare_sets, format_sets
from reports.watch_view import as_one_step


def add_parsers(sub: Any) -> None:
    c = sub.add_parser("compare", help="compare two run bundles (or the targets within one) per transaction, "
                                       "or a baseline set of runs with a contender set (--vs)")
    c.add_argument("runs", type=Path, nargs="+", metavar="RUN",
                   help="one run (its targets compared), two runs, or the baseline set when --vs is given")
    c.add_argument("--vs", type=Path, nargs="+", default=None, metavar="RUN",
                   help="the contender set: each step's change against the baseline runs, with its interval")
    c.add_argument("--json", action="store_true", help="print the comparison as JSON (no page is written)")
    c.add_argument("--html", type=Path, default=None, metavar="FILE",
                   help="where to write the comparison page (default: compare.html, or compare-<RUN_B>.html "
                        "for two runs, in RUN_A)")


def default_page(run_a: Path, run_b: Path | None) -> Path:
    """Where the page goes without ``--html``: beside RUN_A's own report."""
    if run_b is None:
        return run_a / "compare.html"
    return run_a / f"compare-{Path(run_b).resolve().name}.html"


def dispatch(a: argparse.Namespace) -> int | None:
    if a.command != "compare":
        return None
    if a.vs:
        if a.html:
            raise UsageError("--html writes the page of a pair comparison; with --vs the sets' comparison is "
                             "printed (text, or --json)")
        return _sets(a)
    if len(a.runs) > 2:
        raise UsageError("dbdiag compare takes one or two runs; for more, name the contender set after --vs: "
                         "dbdiag compare BASE... --vs NEW...")
    a.run_a, a.run_b = a.runs[0], (a.runs[1] if len(a.runs) > 1 else None)
    # a watch compares as one step per target (its windows with load): see reports.watch_view.as_one_step
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
    def load_set(paths: list[Path]) -> list:
        unique = list(dict.fromkeys(p.resolve() for p in paths))  # a run named twice counts once
        return [load_bundle(p) for p in unique]

    items = compare_sets(load_set(a.runs), load_set(a.vs))
    if a.json:
        print(json.dumps({"steps": items}, indent=1, default=str))
    else:
        print(format_sets(items))
    return 0 if items else 1
