"""The sweep's progress bar on real sweeps against the machine's PostgreSQL service.

Each test sweeps point-select in a scratch database ``dbdiag_test_progress_<pid>``
(1,000 sbtest rows, dropped at the end), two steps of 1 s, no warmup: about
3 s each. A terminal is an ``io.StringIO`` whose ``isatty()`` is true; what it
would show is worked out by ``tests.terminal.screen`` (carriage return = back to column 0).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from diag.core.bundle import BundleWriter
from diag.core.db import Session
from diag.run import Run, RunOptions
from diag.core.targets import Target
from tests.conftest import PG_SERVICE
from tests.terminal import FakeTTY, screen
from workloads.driver import DriverOptions, run_sweep
from tests.sweep import sweep_rows

DB = f"dbdiag_test_progress_{os.getpid()}"
OPTS = DriverOptions(clients=(1, 2), duration_s=1.0, warmup_s=0.0, scale=0.01)
BAR = re.compile(r"\[[#-]+\] +(\d+)% (\S+)/(\S+) ETA (\S+)  step (\d+)/(\d+)")



@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")  # the bar's width follows $COLUMNS; a narrow one would cut the line


@pytest.fixture(scope="module")
def scratch(pg_service: Target) -> Iterator[Target]:
    """The service, pointed at a scratch database (the service's own databases stay untouched)."""
    with Session(pg_service) as s:
        s.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        s.execute(f"CREATE DATABASE {DB}")
    try:
        yield replace(pg_service, database=DB, label="pg", label_given=True)
    finally:
        with Session(pg_service) as s:
            s.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")


def _check_terminal(text: str, total: str) -> list[str]:
    """Bar drawn in place, moving forward to 100%; erased before every other line. Returns the screen."""
    assert "\r" in text
    draws = [(int(m.group(1)), m.group(3), int(m.group(5))) for m in BAR.finditer(text)]
    pcts = [p for p, _, _ in draws]
    assert pcts == sorted(pcts), pcts
    assert pcts[-1] == 100
    assert any(0 < p < 50 for p in pcts), pcts  # it moved during the first step, not only between steps
    assert {t for _, t, _ in draws} == {total}  # the plan covers every step from the start
    assert [s for p, _, s in draws if p == 100] and all(s == 2 for p, _, s in draws if p == 100)
    shown = screen(text)
    assert shown[-1] == ""  # the final bar ends its own line
    assert [ln for ln in shown if "ETA" in ln] == [shown[-2]]  # no bar left on any other line
    assert BAR.search(shown[-2]).group(1) == "100"  # type: ignore[union-attr]
    intervals = [ln for ln in shown if re.match(r"  \[ *\d+\.\d+s\] point-select c=\d: tps ", ln)]
    assert len(intervals) == 2, shown  # one per 1-s step, each on a clean line of its own
    return shown


def test_bar_on_a_terminal(scratch: Target, tmp_path: Path) -> None:
    out = FakeTTY()
    rows = sweep_rows(scratch, ["point-select"], OPTS, BundleWriter(tmp_path / "run"), progress=out)
    assert [r["clients"] for r in rows] == [1, 2] and all(r["transactions"] > 0 for r in rows)
    shown = _check_terminal(out.getvalue(), "3s")  # 2 steps x (0 s warmup + 1 s + 0.5 s start-up)
    headers = [ln for ln in shown if ln.startswith("[step ")]
    assert [h.split(" | ")[0] for h in headers] == ["[step 1/2", "[step 2/2"]
    assert "sweep 0% done" in headers[0] and "sweep 50% done" in headers[1]


def test_log_has_no_redraws(scratch: Target, tmp_path: Path) -> None:
    out = io.StringIO()
    run_sweep(scratch, ["point-select"], OPTS, BundleWriter(tmp_path / "run"), progress=out)
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    headers = [ln for ln in lines if ln.startswith("[step ")]
    assert len(headers) == 2
    assert headers[0].startswith("[step 1/2 | sweep 0% done, 0s of 3s, about 3s left] pg: point-select, 1 client,")
    assert headers[1].startswith("[step 2/2 | sweep 50% done, 1s of 3s, about 2s left] pg: point-select, 2 clients,")
    assert lines[-1].startswith("[sweep 100% done: 2 of 2 steps in ")
    assert not BAR.search(text)


def test_one_bar_for_a_whole_run_of_two_targets(scratch: Target, tmp_path: Path) -> None:
    """``dbdiag run`` with two targets: one bar, steps numbered across targets, 100% only at the very end."""
    dsn = urlunsplit(urlsplit(PG_SERVICE)._replace(path="/" + DB))
    out = FakeTTY()
    opts = RunOptions(targets=[f"a={dsn}", f"b={dsn}"], workloads=["point-select"],
                      driver=replace(OPTS, clients=(1,)), out=tmp_path / "run", collect=False, profile=False,
                      render=False)
    Run(opts, out=out).execute()
    shown = _check_terminal(out.getvalue(), "3s")  # 2 targets x 1 step x 1.5 s
    headers = [ln for ln in shown if ln.startswith("[step ")]
    assert len(headers) == 2
    assert headers[0].startswith("[step 1/2 | sweep 0% done") and "] a: point-select" in headers[0]
    assert headers[1].startswith("[step 2/2 | sweep 50% done") and "] b: point-select" in headers[1]
