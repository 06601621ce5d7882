"""``dbdiag compare RUN_A [RUN_B]``: why is one target slower than another, in sentences and per transaction.

Prints, per pair of steps with the same workload and client count, the
sentences that explain the gap (durability first when it differs), then the
table behind them; writes the same to an HTML page (``--html``, by default
``compare.html`` in RUN_A, or ``compare-<RUN_B>.html`` there for two runs) and
prints its path last. The bundles themselves are only read.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from diag.bundle import load_bundle
from reports.compare import compare, format_comparison
from reports.compare_report import render_comparison, write_page


def add_parsers(sub: Any) -> None:
    c = sub.add_parser("compare", help="compare two run bundles (or the targets within one) per transaction")
    c.add_argument("run_a", type=Path)
    c.add_argument("run_b", type=Path, nargs="?", default=None)
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
    bundles = [load_bundle(a.run_a)] + ([load_bundle(a.run_b)] if a.run_b else [])
    items = compare(*bundles)
    if a.json:
        print(json.dumps({"comparisons": items}, indent=1, default=str))
        return 0 if items else 1
    print(format_comparison(items))
    page = write_page(a.html or default_page(a.run_a, a.run_b), render_comparison(bundles, items))
    print(f"comparison page: {page}")
    return 0 if items else 1
