"""Nothing a run starts outlives it: SIGKILL, SIGTERM and SIGHUP of `dbdiag run` mid-step, real processes.

Each case starts `dbdiag run embedded:postgres` (point-select, 2 clients) as a subprocess, waits until the
step is measuring (the workload series has a record), takes every descendant of the run with psutil (clients,
collectors, the cleanup supervisor, the postmaster and its backends), signals the run, and then requires
every one of them gone within a few seconds, the throwaway server's directory removed and the bundle
readable by `dbdiag report`, marked partial.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from reports.views.render import render_bundle

REPO = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 5.0  # the bound after a SIGKILL
START_DEADLINE_S = 150.0  # server start, data load and warmup on a busy 2-vCPU machine
# From SIGTERM/SIGHUP to exit, the throwaway server stopped: "within a few seconds" on a loaded machine (the
# stuck-commit case, no server to stop, has 5 s: test_stuck_statement).
STOP_WITHIN_S = 10.0


class Runs:
    """The runs a test started and every process seen under them, all killed at teardown whatever happened
    (an orphan that holds a pipe would also hang a read: output goes to files)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[psutil.Process] = []
        self.dirs: list[Path] = []  # throwaway servers' directories, removed at teardown if still there

    def start(self, out: Path, preexec: Callable[[], None] | None = None) -> subprocess.Popen[str]:
        argv = [sys.executable, "-m", "diag", "run", "embedded:postgres", "-w", "point-select", "-c", "2",
                "-T", "8", "--warmup", "0", "--no-profile", "--out", str(out)]
        with open(self.tmp / "stderr.txt", "w") as err:
            p = subprocess.Popen(argv, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=err, text=True,
                                 preexec_fn=preexec)
        self.procs.append(psutil.Process(p.pid))
        return p

    def stderr(self) -> str:
        return (self.tmp / "stderr.txt").read_text(errors="replace")


@pytest.fixture
def runs(tmp_path: Path) -> Iterator[Runs]:
    r = Runs(tmp_path)
    yield r
    for c in list(r.procs):  # a run that failed before the snapshot: what is under it now
        try:
            r.procs += c.children(recursive=True)
        except psutil.NoSuchProcess:
            pass
    for c in r.procs:
        try:
            r.dirs.append(_pg_base([c]))
        except (AssertionError, psutil.NoSuchProcess):
            pass
    _all_gone(r.procs, 0.0)
    for d in r.dirs:
        shutil.rmtree(d, ignore_errors=True)


def _measuring(runs: Runs, p: subprocess.Popen[str], out: Path) -> list[psutil.Process]:
    """Wait until the step records intervals; then the run's descendants (asserted to be the expected kinds)."""
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        assert p.poll() is None, f"dbdiag run ended early ({p.returncode}): {runs.stderr()[-2000:]}"
        if any(f.stat().st_size > 0 for f in (out / "series").glob("workload--*.jsonl")):
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the step did not start within the deadline")
    procs = psutil.Process(p.pid).children(recursive=True)
    runs.procs += procs
    runs.dirs.append(_pg_base(procs))
    cmds = [" ".join(c.cmdline()) for c in procs]
    pg = [c for c in cmds if "postgres" in c.split(" ")[0]]
    supervisor = [c for c in cmds if "diag.core.supervisor" in c]
    forked = [c for c in procs if c.ppid() == p.pid and "diag.core.supervisor" not in " ".join(c.cmdline())
              and c.name().startswith("python")]
    # postmaster + its background processes + one backend per client and collector
    assert len(pg) >= 4 and len(supervisor) == 1, cmds
    assert len(forked) >= 3, cmds  # 2 clients + at least one collector, forked from the run
    return procs


def _pg_base(procs: list[psutil.Process]) -> Path:
    for c in procs:
        cmd = c.cmdline()
        if "-D" in cmd:
            return Path(cmd[cmd.index("-D") + 1]).parent  # the data dir is <base>/data
    raise AssertionError("no postmaster among the run's processes")


def _alive(procs: list[psutil.Process]) -> list[str]:
    out = []
    for c in procs:
        try:
            if c.is_running() and c.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{c.pid} {' '.join(c.cmdline())[:100]}")
        except psutil.NoSuchProcess:
            pass
    return out


def _all_gone(procs: list[psutil.Process], within_s: float) -> list[str]:
    deadline = time.monotonic() + within_s
    while _alive(procs) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _alive(procs)
    for c in procs:  # never leave them to the next test
        try:
            if c.is_running():
                c.kill()
        except psutil.NoSuchProcess:
            pass
    return left


def _report_says_partial(out: Path) -> None:
    """The bundle renders as `dbdiag report` renders it (diag/commands/report.py is render_bundle and a print;
    in this process: a second interpreter per test costs seconds; test_run_e2e runs the command itself) and
    the page says it is partial."""
    (out / "report.html").unlink(missing_ok=True)
    assert render_bundle(out).exists()
    assert 'id="partial-banner"' in (out / "report.html").read_text()


def test_sigkill_mid_step_leaves_nothing_running(tmp_path: Path, runs: Runs) -> None:
    out = tmp_path / "b"
    p = runs.start(out)
    procs = _measuring(runs, p, out)
    base = _pg_base(procs)
    p.kill()
    p.wait(timeout=30)
    left = _all_gone(procs, GONE_WITHIN_S)
    assert not left, f"alive {GONE_WITHIN_S:g} s after SIGKILL of the run: {left}"
    assert not base.exists(), "the throwaway server's directory outlived the run"
    assert json.loads((out / "run.json").read_text())["status"] == "running"  # nobody could write the end
    _report_says_partial(out)


def _interrupted(runs: Runs, p: subprocess.Popen[str], out: Path, procs: list[psutil.Process], sig: str,
                 sent: float) -> None:
    """The run ended like Ctrl-C within STOP_WITHIN_S of the signal (sent at monotonic ``sent``): exit 130, one
    line naming the signal, bundle marked, nothing left."""
    base = _pg_base(procs)
    p.wait(timeout=90)  # longer than the bound, to say by how much it missed
    took = time.monotonic() - sent
    err = runs.stderr()
    assert p.returncode == 130, err[-2000:]
    assert "Traceback" not in err and f"interrupted ({sig}); partial bundle in" in err, err[-2000:]
    assert took < STOP_WITHIN_S, f"{took:.1f} s from {sig} to exit:\n{err[-2000:]}"
    print(f"{sig}: {took:.2f} s from signal to exit")
    left = _all_gone(procs, 2.0)  # the run stopped them itself before it exited
    assert not left, f"alive after the run ended on {sig}: {left}"
    assert not base.exists()
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "interrupted" and run["error"] == f"interrupted by {sig}", run
    rows = json.loads((out / "results.json").read_text())["results"]
    assert rows and rows[-1].get("interrupted") is True, rows  # the cut step's row is kept
    assert any(f.read_text().strip() for f in (out / "series").glob("workload--*.jsonl"))  # and its intervals
    _report_says_partial(out)


def test_sigterm_mid_step_ends_like_ctrl_c(tmp_path: Path, runs: Runs) -> None:
    out = tmp_path / "b"
    p = runs.start(out)
    procs = _measuring(runs, p, out)
    sent = time.monotonic()
    p.send_signal(signal.SIGTERM)
    _interrupted(runs, p, out, procs, "SIGTERM", sent)


def _background_job() -> None:
    # What a shell does for `dbdiag run ... &` without job control: SIGINT (and SIGQUIT) ignored. SIGHUP at its
    # default, as a shell's job has it: a test session started under nohup would pass its ignored SIGHUP on, and
    # dbdiag rightly keeps an ignored SIGHUP ignored (diag.core.procs.install_stop_signals).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def test_sighup_of_a_background_run_ends_like_ctrl_c(tmp_path: Path, runs: Runs) -> None:
    out = tmp_path / "b"
    p = runs.start(out, _background_job)
    procs = _measuring(runs, p, out)
    p.send_signal(signal.SIGINT)  # ignored, as in a background job: the run goes on
    time.sleep(0.5)
    assert p.poll() is None, "SIGINT was not ignored: the run is not set up like a background job"
    sent = time.monotonic()
    p.send_signal(signal.SIGHUP)
    _interrupted(runs, p, out, procs, "SIGHUP", sent)



def test_sigkill_of_server_start_removes_the_server(tmp_path: Path, runs: Runs) -> None:
    with open(tmp_path / "dsn.txt", "w") as out, open(tmp_path / "stderr.txt", "w") as err:
        p = subprocess.Popen([sys.executable, "-m", "diag", "server", "start", "postgres"], cwd=str(REPO),
                             stdout=out, stderr=err, text=True)
    runs.procs.append(psutil.Process(p.pid))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "Ctrl-C stops" not in runs.stderr():
        assert p.poll() is None, runs.stderr()[-2000:]
        time.sleep(0.1)
    procs = psutil.Process(p.pid).children(recursive=True)
    runs.procs += procs
    base = _pg_base(procs)
    assert any("diag.core.supervisor" in " ".join(c.cmdline()) for c in procs), procs
    p.kill()
    p.wait(timeout=30)
    left = _all_gone(procs, GONE_WITHIN_S)
    assert not left and not base.exists(), f"after SIGKILL of dbdiag server start: {left}"
