"""Profiles that explain, on the embedded PostgreSQL 18 (built without frame pointers): one short run.

The run's profile starts with a frame-pointer check, finds the stacks unusable and unwinds with DWARF; most
backend samples then reach PostgresMain at least 5 named frames deep (counted here in the folded file).
Needs perf with cpu-clock allowed (root here): a missing or forbidden perf fails with the reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from collectors.profile.analyse import usable_stack
from collectors.profile.parse import load_folded

REPO = Path(__file__).resolve().parents[2]


def run_job(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The default job, cut to one 3 s point-select step at 2 clients on the embedded PostgreSQL."""
    return subprocess.run([sys.executable, "-m", "diag", "run", "embedded:postgres", "-w", "point-select",
                           "-c", "2", "-T", "3", "--warmup", "0", "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=300, cwd=str(REPO))


@pytest.fixture(scope="module")
def pg_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    out = tmp_path_factory.mktemp("stacks") / "bundle"
    p = run_job(out)
    assert p.returncode == 0, p.stderr[-3000:]
    row = json.loads((out / "results.json").read_text())["results"][0]
    return out, row, p.stdout + p.stderr


def test_pg18_stacks_are_deep_through_postgres_main(pg_run: tuple[Path, dict[str, Any], str]) -> None:
    out, row, _ = pg_run
    prof = row["profile"]
    assert "error" not in prof, prof
    assert prof["unwinder"] == "dwarf" and prof["stack_bytes"] == 8192, prof
    assert "frame pointers gave" in prof["unwinder_reason"]
    folded = load_folded(out / prof["folded"])
    backend = {s: n for s, n in folded.items() if s.startswith("backend;")}
    total = sum(backend.values())
    assert total >= 30, f"too few backend samples to judge: {total}"
    deep = sum(n for s, n in backend.items() if "PostgresMain" in s.split(";")[2:] and len(s.split(";")) - 2 >= 5)
    assert deep > 0.5 * total, f"{deep} of {total} backend samples reach PostgresMain 5+ frames deep"
    assert sum(n for s, n in backend.items() if usable_stack(s)) > 0.5 * total
    assert prof["usable_share"] > 0.5


def test_report_says_which_unwinder_ran(pg_run: tuple[Path, dict[str, Any], str]) -> None:
    out, row, _ = pg_run
    html = (out / "report.html").read_text()
    assert "Stacks: DWARF (frame pointers gave" in html
    assert f"{100 * row['profile']['usable_share']:.0f}% of samples have a usable stack" in html
