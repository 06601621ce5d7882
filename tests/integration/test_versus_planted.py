"""Planted cause, real servers: durable PostgreSQL against PostgreSQL at synchronous_commit=off, single-row inserts
at 1 client. The comparison must say first that the two are not at the same durability level, name the setting,
and find the relaxed side faster; `dbdiag compare` of two runs must print the same sentences, naming each side by
its run when both targets carry the same label, and write them to its page.

Two runs of 2 s steps: "relaxed" (the relaxed server as ``pg``) and "durable" (the durable server as ``pg`` and the
relaxed one again as ``relaxed``), so the same data also gives the other direction: two relaxed sides say nothing
of durability, and the durable run's own report compares its two targets in the same words.
"""

from __future__ import annotations

import html
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diag.core import servers
from diag.run import Run, RunOptions
from workloads.driver import DriverOptions

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def relaxed_pg() -> Iterator[servers.ThrowawayServer]:
    srv = servers.start_postgres({"synchronous_commit": "off"})
    yield srv
    srv.stop()


def _run(targets: list[str], out: Path) -> None:
    """``dbdiag run TARGETS -w insert -c 1 -T 2 --warmup 0.5 --no-profile --flush-capability 100000``, in this
    process (the runs are this test's input; `dbdiag compare` is the command under test). F is given: the
    sentences compared here come from the settings and the time accounting, never from F, and the fsync test
    cost each run about 2 s."""
    drv = DriverOptions(clients=(1,), duration_s=2.0, warmup_s=0.5)
    log = io.StringIO()
    Run(RunOptions(targets=targets, workloads=["insert"], driver=drv, out=out, argv=["dbdiag", "run"], profile=False,
                   flush_capability=100000.0), out=log).execute()
    assert json.loads((out / "run.json").read_text())["status"] == "complete", log.getvalue()[-2000:]


def _compare(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diag", "compare", *args], capture_output=True, text=True,
                          timeout=120, cwd=str(REPO))


def _pair(items: list[dict[str, Any]], a: str, b: str) -> dict[str, Any]:
    """The pair whose sides are named ``a`` and ``b`` (either order)."""
    (e,) = [e for e in items if {e["fast_name"], e["slow_name"]} == {a, b}]
    return e


def _assert_durability_first(e: dict[str, Any], durable: str, relaxed: str) -> None:
    assert (e["fast_name"], e["slow_name"]) == (relaxed, durable), e["sentences"]
    assert e["tps_ratio"] > 1.0
    first, second = e["sentences"][:2]
    assert first.startswith(f"{relaxed} is ") and "faster than" in first
    assert "does not flush at commit (synchronous_commit=off)" in second, e["sentences"]
    assert second.endswith("the two are not at the same durability level.")
    # The durable side's commit wait is given when the sampler caught it, else its promise is stated.
    assert second.startswith((f"{durable} waits ", f"{durable} flushes its WAL at every commit")), second


def test_durable_against_relaxed_says_durability_first(tmp_path: Path, pg_server, relaxed_pg) -> None:
    relaxed, durable = tmp_path / "relaxed", tmp_path / "durable"
    _run([f"pg={relaxed_pg.dsn()}"], relaxed)
    _run([f"pg={pg_server.dsn()}", f"relaxed={relaxed_pg.dsn()}"], durable)

    p = _compare(str(relaxed), str(durable))
    assert p.returncode == 0, p.stderr
    j = _compare("--json", str(relaxed), str(durable))
    items = json.loads(j.stdout)["comparisons"]
    # Same label "pg" on both sides: named by their runs.
    e = _pair(items, "relaxed", "durable")
    _assert_durability_first(e, durable="durable", relaxed="relaxed")
    for s in e["sentences"]:
        assert s in p.stdout  # the terminal says what the JSON says
    page = relaxed / "compare-durable.html"
    assert f"comparison page: {page}" in p.stdout
    text = html.unescape(page.read_text(encoding="utf-8"))
    assert all(s in text for s in e["sentences"])
    # The other direction on the same data: two relaxed servers are at the same durability level.
    same = _pair(items, "pg", "relaxed")
    assert not any("durability" in s for s in same["sentences"]), same["sentences"]

    # The durable run's own report compares its two targets in the same words.
    report = html.unescape((durable / "report.html").read_text(encoding="utf-8"))
    (inner,) = json.loads(_compare("--json", str(durable)).stdout)["comparisons"]
    _assert_durability_first(inner, durable="pg", relaxed="relaxed")
    assert all(s in report for s in inner["sentences"])
