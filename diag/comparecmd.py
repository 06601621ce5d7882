"""``dbdiag compare RUN_A [RUN_B]``: why is one target slower than another, per transaction."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from diag.bundle import load_bundle
from reports.compare import compare, format_comparison


def add_parsers(sub: Any) -> None:
    c = sub.add_parser("compare", help="compare two run bundles (or the targets within one) per transaction")
    c.add_argument("run_a", type=Path)
    c.add_argument("run_b", type=Path, nargs="?", default=None)
    c.add_argument("--json", action="store_true", help="print the comparison as JSON")


def dispatch(a: argparse.Namespace) -> int | None:
    if a.command != "compare":
        return None
    items = compare(load_bundle(a.run_a), load_bundle(a.run_b) if a.run_b else None)
    print(json.dumps({"comparisons": items}, indent=1, default=str) if a.json else format_comparison(items))
    return 0 if items else 1
