"""A library caller of diag.core.servers (bench scripts, test sessions) leaves no throwaway server behind.

Each case runs a Python child that calls ``servers.start_postgres()`` or ``start_mysql()`` without
``supervisor=`` and prints the server's PID, directory and the default supervisor's PID. SIGKILL of the
child: the server, every process below it (a postmaster's backends, found through /proc before the kill)
and the supervisor are gone within :data:`GONE_WITHIN_S` and the directory is removed. A normal
``stop()`` (twice, as a ``with`` block after an explicit stop does): the child exits 0, says nothing, and no
supervisor outlives it. Asserted through /proc, with start times so a reused PID never counts as alive.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from diag.core.supervisor import descendants, start_ticks

REPO = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 10.0  # the server's 2 s grace after its stop signal, then SIGKILL, on a loaded 2-vCPU VM
START_DEADLINE_S = 120.0  # initdb / mariadb-install-db and the server's start on a busy machine

CHILD = textwrap.dedent("""
    import sys, time
    from diag.core import procs, servers
    srv = servers.start_postgres() if sys.argv[1] == "postgres" else servers.start_mysql()
    sup = procs.default_supervisor()
    print(srv.pid, srv.directory, sup.proc.pid if sup else 0, srv.supervisor is sup, flush=True)
    if sys.argv[2] == "stop":
        srv.stop()
        srv.stop()
    else:
        time.sleep(300)
""")


class Alive:
    """A process as seen once (PID and start time): alive while /proc has it with that start time, not a zombie."""

    def __init__(self, pid: int) -> None:
        self.pid, self.ticks = pid, start_ticks(pid)

    def alive(self) -> bool:
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        return state not in ("Z", "X") and start_ticks(self.pid) == self.ticks


class Caller:
    """The child and what it started; whatever is left is SIGKILLed and removed at teardown."""

    def __init__(self, tmp: Path) -> None:
        self.err = tmp / "stderr.txt"
        self.proc: subprocess.Popen[str] | None = None
        self.seen: list[Alive] = []
        self.dirs: list[Path] = []

    def start(self, engine: str, mode: str) -> tuple[Alive, Path, Alive]:
        """Start the child; (server, its directory, the supervisor) once it printed them."""
        with open(self.err, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-c", CHILD, engine, mode], cwd=str(REPO),
                                         stdout=subprocess.PIPE, stderr=err, text=True)
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()),  # type: ignore[union-attr]
                                  daemon=True)
        reader.start()
        reader.join(START_DEADLINE_S)
        assert line and line[0].strip(), f"the child printed nothing: {self.stderr()[-2000:]}"
        pid, directory, sup, given = line[0].split()
        server, supervisor = Alive(int(pid)), Alive(int(sup))
        self.seen += [server, supervisor]
        self.dirs.append(Path(directory))
        assert given == "True", "the server was not given the process's default supervisor"
        return server, Path(directory), supervisor

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")


@pytest.fixture
def caller(tmp_path: Path) -> Iterator[Caller]:
    c = Caller(tmp_path)
    yield c
    if c.proc is not None and c.proc.poll() is None:
        c.proc.kill()
        c.proc.wait()
    for a in c.seen:  # a failed case must not leave what it is about
        if a.alive():
            with contextlib.suppress(OSError):
                os.kill(a.pid, signal.SIGKILL)
    for d in c.dirs:
        shutil.rmtree(d, ignore_errors=True)


def _wait(cond: Callable[[], bool], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_sigkilled_library_caller_leaves_no_server_and_no_directory(caller: Caller, engine: str) -> None:
    server, directory, supervisor = caller.start(engine, "sleep")
    below = [Alive(a.pid) for a in descendants(server.pid) if a.pid is not None]
    caller.seen += below
    assert server.alive() and supervisor.alive() and directory.is_dir()
    if engine == "postgres":
        assert below, "no backend under the postmaster: the descendants check would prove nothing"
    assert caller.proc is not None
    caller.proc.send_signal(signal.SIGKILL)
    caller.proc.wait()
    gone = _wait(lambda: not any(a.alive() for a in [server, *below]) and not directory.exists(), GONE_WITHIN_S)
    left = [a.pid for a in [server, *below] if a.alive()]
    assert gone, f"{GONE_WITHIN_S:.0f} s after SIGKILL: alive {left}, directory kept: {directory.exists()}"
    assert _wait(lambda: not supervisor.alive(), 5.0), "the supervisor outlived its cleanup"
    assert f"supervisor stopped pid {server.pid}" in caller.stderr(), caller.stderr()[-2000:]


def test_normal_stop_twice_leaves_nothing_and_says_nothing(caller: Caller) -> None:
    server, directory, supervisor = caller.start("postgres", "stop")
    assert caller.proc is not None
    assert caller.proc.wait(60) == 0, caller.stderr()[-2000:]
    # The child waited for its supervisor at exit: nothing to wait for here.
    assert not server.alive() and not supervisor.alive() and not directory.exists()
    said = [ln for ln in caller.stderr().splitlines() if ln.startswith("dbdiag:") or "Traceback" in ln]
    assert said == [], caller.stderr()[-2000:]
