"""A commit that never returns, planted on a real PostgreSQL: the run names the wait and ends by itself, and
Ctrl-C and SIGTERM end every phase within a few seconds (issue 25; SIGHUP, handled as SIGTERM is, mid-step in
test_no_orphans).

The plant: one throwaway PostgreSQL for the module, the insert dataset loaded, then
``synchronous_standby_names = 'nobody'`` (ALTER SYSTEM + reload; started with it, the server's own
start-up statements would already wait): every commit that writes waits for a standby that does not
exist (wait event IPC/SyncRep) and never returns. The fixture checks the plant on the server before any
test relies on it. Each run is ``python -m diag run`` as a subprocess, with the flush capability given
(no fsync test) and profiles off, so a run costs a few seconds.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from diag.core import servers
from diag.core.db import Session
from diag.core.targets import parse_target
from tests.integration.test_no_orphans import _all_gone
from reports.views.render import render_bundle
from workloads.insert import insert_dataset
from workloads.load import ensure_schema, load
from workloads.steps.stuck import AFTER_END_S
from tests.retry import twice

REPO = Path(__file__).resolve().parents[2]
SIGNAL_TO_EXIT_S = 5.0   # "within a few seconds" of the signal, on a loaded 2-vCPU machine
LINE_TIMEOUT_S = 90.0    # until the line that marks the phase appears (start-up of a busy machine included)
EXIT_SLACK_S = 8.0       # after the stuck bound: clients stopped, sources stopped, report rendered
FAST = ["--warmup", "0", "--no-profile", "--flush-capability", "100"]
BARE = [*FAST, "--no-collect"]  # where the sources are not what is tested: a second or two less per run


def _sync_rep_waiters(dsn: str) -> list[dict[str, object]]:
    with Session(parse_target(dsn)) as s:
        return s.query("SELECT pid, application_name, query FROM pg_stat_activity WHERE wait_event = 'SyncRep'")


@pytest.fixture(scope="module")
def stuck_pg() -> Iterator[str]:
    """The planted server's DSN: the insert dataset is there; every writing commit waits forever."""
    srv = servers.start_postgres()
    try:
        dsn = srv.dsn()
        with Session(srv.target(), statement_timeout_ms=0) as s:
            ensure_schema(s)
            load(s, insert_dataset(1), None)
            s.execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
            s.execute("ALTER SYSTEM SET synchronous_commit = 'on'")
            s.query("SELECT pg_reload_conf()")
        _check_plant(srv)
        yield dsn
    finally:
        srv.stop()


def _check_plant(srv: servers.ThrowawayServer) -> None:
    """A commit on the planted server must wait in IPC/SyncRep and not return; the waiter is ended after."""
    err: list[BaseException] = []

    def commit() -> None:
        try:
            with Session(srv.target(), statement_timeout_ms=0, application_name="plant-check") as s:
                s.execute("INSERT INTO dbdiag.insert_data (val, txt) VALUES (1, 'plant')")
        except BaseException as e:  # ended by the check below: expected
            err.append(e)

    th = threading.Thread(target=commit, daemon=True)
    th.start()
    seen: list[dict[str, object]] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not seen:
        time.sleep(0.2)
        with Session(srv.target()) as s:
            seen = s.query("SELECT pid FROM pg_stat_activity WHERE application_name = 'plant-check' "
                           "AND wait_event_type = 'IPC' AND wait_event = 'SyncRep'")
    assert th.is_alive(), f"the planted commit returned: the plant does not hold on this server ({err})"
    assert seen, "the planted commit does not wait in IPC/SyncRep: synchronous_standby_names was not applied"
    with Session(srv.target()) as s:
        s.query(f"SELECT pg_terminate_backend({int(seen[0]['pid'])})")  # type: ignore[call-overload]
    th.join(10)


class Run:
    """One ``python -m diag run`` with its stderr read line by line (time-stamped) in a thread."""

    def __init__(self, args: list[str], out: Path, preexec: Callable[[], None] | None = None) -> None:
        self.out = out
        self.lines: list[tuple[float, str]] = []
        self.t0 = time.monotonic()
        self.p = subprocess.Popen([sys.executable, "-m", "diag", "run", *args, "--out", str(out)], cwd=str(REPO),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=preexec)
        self.procs = [psutil.Process(self.p.pid)]
        self.ended_at: float | None = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.p.stderr is not None
        for line in self.p.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def text(self) -> str:
        return "\n".join(x for _, x in self.lines)

    def wait_line(self, needle: str) -> float:
        """When a stderr line containing ``needle`` came (monotonic s); fails if the run ends first."""
        deadline = time.monotonic() + LINE_TIMEOUT_S
        while time.monotonic() < deadline:
            for t, x in list(self.lines):
                if needle in x:
                    return t
            assert self.p.poll() is None, f"the run ended ({self.p.returncode}) before {needle!r}:\n{self.text()}"
            time.sleep(0.05)
        raise AssertionError(f"no line with {needle!r} within {LINE_TIMEOUT_S:g} s:\n{self.text()}")

    def signal(self, sig: int) -> float:
        """Send ``sig`` after noting every descendant of the run (to check none outlives it); when sent."""
        try:
            self.procs += psutil.Process(self.p.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            pass
        t = time.monotonic()
        self.p.send_signal(sig)
        return t

    def wait(self, timeout_s: float) -> int:
        try:
            rc = self.p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the run did not end within {timeout_s:g} s:\n{self.text()}") from None
        self.ended_at = time.monotonic()
        self._reader.join(5)
        return rc

    def kill_all(self) -> None:
        _all_gone(self.procs, 0.0)


@pytest.fixture
def runs() -> Iterator[list[Run]]:
    made: list[Run] = []
    yield made
    for r in made:
        r.kill_all()


def _start(runs: list[Run], args: list[str], out: Path, preexec: Callable[[], None] | None = None) -> Run:
    r = Run(args, out, preexec)
    runs.append(r)
    return r


def _bundle_kept(out: Path) -> dict[str, object]:
    """run.json, results.json and events are there and the bundle renders as `dbdiag report` renders it (in
    this process: a second interpreter per test would cost seconds); run.json."""
    run = json.loads((out / "run.json").read_text())
    json.loads((out / "results.json").read_text())
    assert (out / "events.jsonl").exists()
    (out / "report.html").unlink(missing_ok=True)
    assert render_bundle(out).exists()
    return run


def _no_waiter_left(dsn: str) -> None:
    left = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = _sync_rep_waiters(dsn)
        if not left:
            return
        time.sleep(0.2)
    raise AssertionError(f"sessions still waiting for the standby on the server after the run: {left}")


# ------------------------------------------------------------------------- stuck statements end by themselves


def test_a_stuck_commit_is_named_and_the_run_goes_on(stuck_pg: str, tmp_path: Path, runs: list[Run]) -> None:
    out = tmp_path / "b"
    r = _start(runs, [stuck_pg, "-w", "insert", "-c", "1,2", "-T", "1", *FAST], out)
    rc = r.wait(2 * (1 + AFTER_END_S + EXIT_SLACK_S) + LINE_TIMEOUT_S)
    err = r.text()
    assert rc == 5, err
    assert "Traceback" not in err, err
    stuck_lines = [x for _, x in r.lines if "still in a statement" in x and "ending the step" in x]
    assert len(stuck_lines) == 2 and all("IPC/SyncRep" in x for x in stuck_lines), err  # one line per step
    rows = json.loads((out / "results.json").read_text())["results"]
    assert [row["clients"] for row in rows] == [1, 2], rows  # --on-error continue: the run went on
    for row in rows:
        assert row["complete"] is False and row["stuck"]["wait_type"] == "IPC", row
        assert row["stuck"]["wait"] == "SyncRep" and "INSERT INTO dbdiag.insert_data" in row["stuck"]["query"]
    # Each step ended by itself: found AFTER_END_S after its end, and the run exited soon after the last.
    last = rows[-1]
    assert last["stuck"]["t"] - last["t_end"] < AFTER_END_S + EXIT_SLACK_S, last
    run = _bundle_kept(out)
    assert run["status"] == "stuck" and "IPC/SyncRep" in str(run["error"]), run
    findings = json.loads((out / "findings.json").read_text())["findings"]
    assert [f["evidence"]["wait"] for f in findings if f["category"] == "statement_stuck"] == ["IPC/SyncRep"] * 2
    _no_waiter_left(stuck_pg)
    assert not _all_gone(r.procs, 2.0)


def test_statement_timeout_cuts_the_step_and_abort_ends_the_target(stuck_pg: str, tmp_path: Path,
                                                                   runs: list[Run]) -> None:
    out = tmp_path / "b"
    r = _start(runs, [stuck_pg, "-w", "insert", "-c", "1,2", "-T", "60", "--statement-timeout", "1",
                      "--on-error", "abort", *BARE], out)
    rc = r.wait(LINE_TIMEOUT_S + 30)
    err = r.text()
    assert rc == 5, err
    rows = json.loads((out / "results.json").read_text())["results"]
    assert len(rows) == 1 and rows[0]["clients"] == 1, rows  # abort: the 2-client step was not run
    row = rows[0]
    assert row["stuck"]["wait"] == "SyncRep" and "for more than 1 s" in row["stuck"]["message"], row
    assert row["measured_s"] < 15, row  # cut at the bound (1 s + one report interval), not after the 60 s
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    skipped = [e for e in events if e["kind"] == "steps_skipped"]
    assert skipped and skipped[0]["steps"] == ["insert c=2"], skipped
    _no_waiter_left(stuck_pg)


def test_a_stuck_load_statement_is_named(stuck_pg: str, tmp_path: Path, runs: list[Run]) -> None:
    # point-select's dataset is not on the server: its CREATE TABLE commits, and waits.
    out = tmp_path / "b"
    r = _start(runs, [stuck_pg, "-w", "point-select", "-c", "1", "-T", "1", "--statement-timeout", "2", *BARE],
               out)
    rc = r.wait(LINE_TIMEOUT_S + 30)
    err = r.text()
    assert rc == 5, err
    last = err.strip().splitlines()[-1]
    assert "loading data: a statement did not return: waiting for IPC/SyncRep" in last, err
    assert _bundle_kept(out)["status"] == "failed"
    _no_waiter_left(stuck_pg)


# ------------------------------------------------------------------------- signals in every phase


def _stopped(r: Run, sent: float, sig_name: str) -> float:
    """The run ended like Ctrl-C within SIGNAL_TO_EXIT_S of the signal, its bundle kept, nothing left; the
    seconds from signal to exit."""
    rc = r.wait(SIGNAL_TO_EXIT_S + 30)  # wait longer, to say by how much it missed
    took = (r.ended_at or time.monotonic()) - sent
    err = r.text()
    assert rc == 130, err
    assert "Traceback" not in err and f"interrupted ({sig_name}); partial bundle in" in err, err
    assert took < SIGNAL_TO_EXIT_S, f"{took:.1f} s from {sig_name} to exit:\n{err}"
    left = _all_gone(r.procs, 2.0)
    assert not left, f"alive after the run ended on {sig_name}: {left}"
    run = _bundle_kept(r.out)
    assert run["status"] == "interrupted", run
    print(f"{sig_name}: {took:.2f} s from signal to exit")
    return took


def test_sigterm_during_start_up(tmp_path: Path, runs: list[Run]) -> None:
    r = _start(runs, ["embedded:postgres", "-w", "insert", "-c", "1", "-T", "1", *FAST], tmp_path / "b")
    r.wait_line("starting a throwaway postgres server")
    time.sleep(0.5)  # initdb is running
    sent = r.signal(signal.SIGTERM)
    _stopped(r, sent, "SIGTERM")
    dirs = [a for p in r.procs for a in _cmdline_dirs(p)]
    assert not any(Path(d).exists() for d in dirs), dirs  # the throwaway server's directory went with it


def _cmdline_dirs(p: psutil.Process) -> list[str]:
    try:
        cmd = p.cmdline()
    except psutil.Error:
        return []
    return [cmd[cmd.index("-D") + 1]] if "-D" in cmd else []


def test_sigterm_during_a_stuck_data_load(stuck_pg: str, tmp_path: Path, runs: list[Run]) -> None:
    r = _start(runs, [stuck_pg, "-w", "point-select", "-c", "1", "-T", "1", *FAST], tmp_path / "b")
    r.wait_line("loading dataset")
    time.sleep(1.0)  # its first commit is waiting
    sent = r.signal(signal.SIGTERM)
    _stopped(r, sent, "SIGTERM")
    _no_waiter_left(stuck_pg)


def test_ctrl_c_during_a_step_with_stuck_commits(stuck_pg: str, tmp_path: Path, runs: list[Run]) -> None:
    """Ctrl-C only: SIGTERM and SIGHUP mid-step are test_no_orphans' (an embedded server, every descendant
    gone), and all three reach the same handler (diag.core.procs.install_stop_signals: SIGTERM and SIGHUP raise
    Interrupted, a KeyboardInterrupt); what is particular here, clients that never return from their commit,
    does not depend on which signal came. SIGTERM's bound is checked in the other phases below."""
    # SIGINT delivered as a terminal's Ctrl-C would be: not ignored, whatever started the tests.
    r = _start(runs, [stuck_pg, "-w", "insert", "-c", "2", "-T", "30", *FAST], tmp_path / "b",
               preexec=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    r.wait_line("[  1.0s] insert c=2")
    sent = r.signal(signal.SIGINT)
    _stopped(r, sent, "Ctrl-C")
    rows = json.loads((r.out / "results.json").read_text())["results"]
    assert rows and rows[-1].get("interrupted") is True, rows  # the cut step's row is kept
    _no_waiter_left(stuck_pg)


def test_sigterm_during_clean_up(stuck_pg: str, tmp_path: Path, runs: list[Run]) -> None:
    # What follows the summary line (servers, run.json, the report's render) lasts about 0.2 s here. A signal
    # that came during the render was once dropped (the run exited 5, its own way: seen in CI and in 1 of 4
    # runs here); the run now looks for a stop after the render too. A signal that lands after the clean-up
    # (the test read the line late) finds the run ended: it exits with its own code, and the plant was not
    # produced; it then runs once more (tests.retry). Such a signal once killed the ended run in Python's
    # shutdown (exit status -15): diag.cli.entry blocks the stop signals before it.

    def attempt(i: int) -> None:
        r = _start(runs, [stuck_pg, "-w", "insert", "-c", "2", "-T", "1", "--warmup", "0", "--flush-capability",
                          "100"], tmp_path / f"b{i}")
        seen = r.wait_line("=> insert c=2")  # the step's summary: what follows is the clean-up (sources, report)
        sent = r.signal(signal.SIGTERM)
        print(f"clean-up: signal sent {sent - seen:.2f} s after the summary line was read")
        _stopped(r, sent, "SIGTERM")
        run = json.loads((r.out / "run.json").read_text())
        # In a held clean-up (sources, servers, run.json) it is "... during the clean-up"; between two holds it
        # is raised like any interrupt: either way the run ended on it, after its step.
        assert str(run["error"]).startswith("interrupted by SIGTERM"), run
        print(f"clean-up: run.json error {run['error']!r}")
        assert json.loads((r.out / "results.json").read_text())["results"][0]["stuck"]["wait"] == "SyncRep"
        _no_waiter_left(stuck_pg)

    twice(attempt)


def test_a_statement_stuck_on_mariadb_is_named_from_the_process_list(my_server: servers.ThrowawayServer,
                                                                       tmp_path: Path, runs: list[Run]) -> None:
    # The plant here: a READ table lock held by another session; every INSERT waits for its metadata lock.
    t = my_server.target()
    with Session(t, statement_timeout_ms=0) as s:
        ensure_schema(s)
        load(s, insert_dataset(1), None)
        s.execute("LOCK TABLES dbdiag.insert_data READ")
        try:
            out = tmp_path / "b"
            r = _start(runs, [my_server.dsn(), "-w", "insert", "-c", "1", "-T", "1", *BARE], out)
            rc = r.wait(1 + AFTER_END_S + EXIT_SLACK_S + LINE_TIMEOUT_S)
        finally:
            s.execute("UNLOCK TABLES")
    err = r.text()
    assert rc == 5, err
    row = json.loads((out / "results.json").read_text())["results"][0]
    assert row["stuck"]["wait"] == "Waiting for table metadata lock", row  # the process list's state
    assert "INSERT INTO dbdiag.insert_data" in row["stuck"]["query"], row
    assert any("still in a statement" in x and "Waiting for table metadata lock" in x for _, x in r.lines), err


# ------------------------------------------------------------- the same with many connections per process


def test_a_stuck_commit_among_clients_sharing_a_process(stuck_pg: str, tmp_path: Path, runs: list[Run],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """4 clients in 2 processes (workloads.steps.mux, forced from 2 clients): every one of them is stuck in its commit;
    the step still ends by itself, names the wait, and nothing is left waiting on the server or running here."""
    monkeypatch.setenv("DBDIAG_MUX", "1")
    monkeypatch.setenv("DBDIAG_MUX_PROCS", "2")
    out = tmp_path / "b"
    r = _start(runs, [stuck_pg, "-w", "insert", "-c", "4", "-T", "1", *BARE], out)
    rc = r.wait(1 + AFTER_END_S + EXIT_SLACK_S + LINE_TIMEOUT_S)
    err = r.text()
    assert rc == 5 and "Traceback" not in err, err
    (row,) = json.loads((out / "results.json").read_text())["results"]
    assert "many connections per process" in row["driver"], row["driver"]
    assert row["complete"] is False and row["stuck"]["wait"] == "SyncRep", row
    assert sorted(row["stuck"]["stuck_clients"]) == [0, 1, 2, 3], row["stuck"]
    assert row["stuck"]["t"] - row["t_end"] < AFTER_END_S + EXIT_SLACK_S, row
    _no_waiter_left(stuck_pg)
    assert not _all_gone(r.procs, 2.0)


def test_statement_timeout_finds_a_silent_client_among_others(stuck_pg: str, tmp_path: Path, runs: list[Run],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """--statement-timeout during the step: a client of a shared process whose statement has not returned is
    found from when that statement started (its process reports it as in a statement since then), as a client
    blocked in its own process would be by its silence, and the step is cut at the bound."""
    monkeypatch.setenv("DBDIAG_MUX", "1")
    monkeypatch.setenv("DBDIAG_MUX_PROCS", "2")
    out = tmp_path / "b"
    r = _start(runs, [stuck_pg, "-w", "insert", "-c", "4", "-T", "60", "--statement-timeout", "1", *BARE], out)
    rc = r.wait(LINE_TIMEOUT_S + 30)
    err = r.text()
    assert rc == 5, err
    (row,) = json.loads((out / "results.json").read_text())["results"]
    assert "many connections per process" in row["driver"], row["driver"]
    assert row["stuck"]["wait"] == "SyncRep" and "for more than 1 s" in row["stuck"]["message"], row
    assert row["measured_s"] < 15, row
    _no_waiter_left(stuck_pg)
    assert not _all_gone(r.procs, 2.0)
