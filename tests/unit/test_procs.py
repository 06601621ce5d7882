"""diag.procs: children that die with their parent, and the supervisor that cleans up after a killed run.

Real processes only: a throwaway "run" process is SIGKILLed and what it started must go.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from diag.supervisor import start_ticks

ROOT = Path(__file__).resolve().parents[2]


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        st = start_ticks(pid)
        if st is None:
            return True
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def _spawn(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)


def test_supervisor_stops_adopted_process_and_removes_its_directory_when_the_run_is_killed(tmp_path: Path) -> None:
    d = tmp_path / "server-dir"
    run = _spawn(f"""
        import subprocess, time
        from pathlib import Path
        from diag.procs import Supervisor
        sup = Supervisor.start()
        Path({str(d)!r}).mkdir()
        srv = subprocess.Popen(["sleep", "300"], start_new_session=True)
        sup.adopt(srv.pid, directory={str(d)!r}, grace_s=2)
        print(srv.pid, sup.proc.pid, flush=True)
        time.sleep(300)
    """)
    assert run.stdout is not None
    srv_pid, sup_pid = map(int, run.stdout.readline().split())
    assert d.is_dir() and start_ticks(srv_pid) is not None
    run.kill()
    run.wait()
    assert _gone(srv_pid, 5.0), "the adopted process outlived the killed run"
    assert _gone(sup_pid, 5.0), "the supervisor did not exit after cleaning up"
    assert not d.exists()


def test_supervisor_touches_nothing_after_a_normal_goodbye(tmp_path: Path) -> None:
    d = tmp_path / "kept"
    run = _spawn(f"""
        import subprocess
        from pathlib import Path
        from diag.procs import Supervisor
        sup = Supervisor.start()
        Path({str(d)!r}).mkdir()
        srv = subprocess.Popen(["sleep", "300"], start_new_session=True)
        sup.adopt(srv.pid, directory={str(d)!r})
        sup.close()
        print(srv.pid, sup.proc.returncode, flush=True)
    """)
    assert run.stdout is not None
    srv_pid, code = map(int, run.stdout.readline().split())
    run.wait()
    try:
        assert code == 0 and d.is_dir() and start_ticks(srv_pid) is not None
    finally:
        os.kill(srv_pid, signal.SIGKILL)


def test_supervisor_never_signals_a_reused_pid(tmp_path: Path) -> None:
    # A process that ended and was released by nothing: its PID's start time no longer matches.
    run = _spawn("""
        import subprocess, time
        from diag.procs import Supervisor
        sup = Supervisor.start()
        p = subprocess.Popen(["true"]); p.wait()
        sup.adopt(p.pid, grace_s=0.2)   # already gone: adopt records no start time
        print(sup.proc.pid, flush=True)
        time.sleep(300)
    """)
    assert run.stdout is not None
    sup_pid = int(run.stdout.readline())
    run.kill()
    run.wait()
    assert _gone(sup_pid, 5.0)


def test_die_with_parent_and_parent_watch() -> None:
    # parent -> child (guard_child) ; SIGKILL the parent, the child must end.
    parent = _spawn("""
        import os, sys, time
        from diag.procs import guard_child
        me = os.getpid()
        pid = os.fork()
        if pid == 0:
            guard_child(me)
            time.sleep(300)
            os._exit(0)
        print(pid, flush=True)
        time.sleep(300)
    """)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    assert _gone(child, 3.0)
