"""``dbdiag report BUNDLE``: re-render report.html from a run bundle (the bundle is only read)."""

from __future__ import annotations

import argparse

from reports.views.render import render_bundle


def main(a: argparse.Namespace, argv: list[str]) -> int:
    """Prints the page's path; exit code 0."""
    print(f"dbdiag: report: {render_bundle(a.bundle).resolve()}")
    return 0
