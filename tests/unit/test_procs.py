"""diag.core.procs: children that die with their parent, and the supervisor that cleans up after a killed run.

Real processes only: a throwaway "run" process is SIGKILLed and what it started must go.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

from diag.core.supervisor import start_ticks

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
        from diag.core.procs import Supervisor
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
        from diag.core.procs import Supervisor
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
        from diag.core.procs import Supervisor
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
        from diag.core.procs import guard_child
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


def _ignore_sighup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup starts us


def test_stop_signals_raise_interrupted_once_and_leave_an_ignored_sighup_ignored() -> None:
    p = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os, signal, time
        from diag.core.procs import Interrupted, install_stop_signals, interrupt_reason
        print(install_stop_signals(), flush=True)
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
            print("not interrupted")
        except KeyboardInterrupt as e:
            os.kill(os.getpid(), signal.SIGTERM)  # a second one during the cleanup: noted, not raised
            os.kill(os.getpid(), signal.SIGHUP)   # ignored since the start (nohup)
            time.sleep(0.2)
            print(interrupt_reason(e), isinstance(e, Interrupted), interrupt_reason(KeyboardInterrupt()))
    """)], cwd=ROOT, capture_output=True, text=True, timeout=30, preexec_fn=_ignore_sighup)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["['SIGTERM', 'SIGINT']", "SIGTERM True Ctrl-C"]


def test_guarded_child_dies_of_sigterm_although_the_run_turned_it_into_an_exception() -> None:
    parent = _spawn("""
        import os, time
        from diag.core.procs import guard_child, install_stop_signals
        install_stop_signals()
        me = os.getpid()
        pid = os.fork()
        if pid == 0:
            guard_child(me)
            print(os.getpid(), flush=True)  # guarded now: signal it
            while True:
                try:
                    time.sleep(300)
                except KeyboardInterrupt:  # what the inherited handler would give: survive it
                    pass
        time.sleep(300)
    """)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        os.kill(child, signal.SIGTERM)
        assert _gone(child, 3.0), "the child kept the run's SIGTERM handler"
    finally:
        parent.kill()
        parent.wait()


def test_forked_child_drops_the_supervisor_pipe() -> None:
    p = _spawn("""
        import os
        from diag.core.procs import Supervisor, guard_child
        sup = Supervisor.start()
        fd, me = sup.proc.stdin.fileno(), os.getpid()
        pid = os.fork()
        if pid == 0:
            guard_child(me)
            print(os.readlink(f"/proc/self/fd/{fd}"), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        sup.close()
        print(sup.proc.returncode, flush=True)
    """)
    out, _ = p.communicate(timeout=30)
    assert out.split() == ["/dev/null", "0"]


def test_supervisor_kills_what_ignores_the_stop_signal_with_its_descendants_and_lone_directories(
        tmp_path: Path) -> None:
    early, late = tmp_path / "made-before-the-server", tmp_path / "server-dir"
    run = _spawn(f"""
        import signal, subprocess, sys, time
        from pathlib import Path
        from diag.core.procs import Supervisor
        sup = Supervisor.start()
        Path({str(early)!r}).mkdir()
        sup.adopt(None, directory={str(early)!r})
        Path({str(late)!r}).mkdir()
        code = ("import signal, subprocess, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "c = subprocess.Popen(['sleep', '300']); print(c.pid, flush=True); time.sleep(300)")
        srv = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
        grandchild = int(srv.stdout.readline())
        sup.adopt(srv.pid, signal.SIGTERM, {str(late)!r}, grace_s=0.5)
        print(srv.pid, grandchild, flush=True)
        time.sleep(300)
    """)
    assert run.stdout is not None
    srv_pid, grandchild = map(int, run.stdout.readline().split())
    run.kill()
    run.wait()
    assert _gone(srv_pid, 5.0) and _gone(grandchild, 5.0), "SIGTERM ignored: not SIGKILLed after the grace"
    deadline = time.monotonic() + 5.0
    while (early.exists() or late.exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not early.exists() and not late.exists()


def test_supervisor_notices_the_run_is_gone_while_its_pipe_is_still_open() -> None:
    # A child forked without guard_child keeps the write end of the pipe open: the supervisor must still
    # see that the run (its parent) died.
    run = _spawn("""
        import os, subprocess, time
        from diag.core.procs import Supervisor
        sup = Supervisor.start()
        srv = subprocess.Popen(["sleep", "300"], start_new_session=True)
        sup.adopt(srv.pid, grace_s=1)
        pid = os.fork()
        if pid == 0:
            time.sleep(300)
            os._exit(0)
        print(srv.pid, pid, flush=True)
        time.sleep(300)
    """)
    assert run.stdout is not None
    srv_pid, holder = map(int, run.stdout.readline().split())
    run.kill()
    run.wait()
    try:
        assert _gone(srv_pid, 5.0)
        assert start_ticks(holder) is not None, "the pipe holder died: the test proved nothing"
    finally:
        os.kill(holder, signal.SIGKILL)


def test_default_supervisor_is_started_once_and_cleans_up_after_a_killed_caller(tmp_path: Path) -> None:
    # A library caller (a bench script) never made a supervisor: the first default_supervisor() does, the
    # next one is the same process, and a SIGKILL of the caller still stops and removes what it adopted.
    d = tmp_path / "server-dir"
    run = _spawn(f"""
        import subprocess, time
        from pathlib import Path
        from diag.core.procs import default_supervisor
        sup = default_supervisor()
        assert default_supervisor() is sup and sup.proc.poll() is None
        Path({str(d)!r}).mkdir()
        srv = subprocess.Popen(["sleep", "300"], start_new_session=True)
        sup.adopt(srv.pid, directory={str(d)!r}, grace_s=1)
        print(srv.pid, sup.proc.pid, flush=True)
        time.sleep(300)
    """)
    assert run.stdout is not None
    srv_pid, sup_pid = map(int, run.stdout.readline().split())
    assert d.is_dir() and start_ticks(srv_pid) is not None
    run.kill()
    run.wait()
    assert _gone(srv_pid, 5.0), "the adopted process outlived the killed caller"
    assert _gone(sup_pid, 5.0) and not d.exists()


def _supervisors_of(pid: int) -> list[int]:
    """PIDs of the ``python -m diag.core.supervisor PID`` processes started for ``pid``, alive or not yet reaped."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                argv = (p / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"diag.core.supervisor" in argv and str(pid).encode() in argv:
                out.append(int(p.name))
    return out


def _read_lines(proc: subprocess.Popen[str], n: int, timeout_s: float) -> list[list[str]]:
    """The next ``n`` lines of ``proc``'s stdout, split; fewer if they do not come within ``timeout_s``."""
    out: list[list[str]] = []

    def _read() -> None:
        assert proc.stdout is not None
        for _ in range(n):
            out.append(proc.stdout.readline().split())

    th = threading.Thread(target=_read, daemon=True)
    th.start()
    th.join(timeout_s)
    return out


def test_forked_child_neither_ends_nor_uses_its_parents_default_supervisor(tmp_path: Path) -> None:
    # A child forked by a library caller (the driver's clients, a test's os.fork) that releases the
    # parent's server, says goodbye and exits normally (atexit runs) must leave the parent's supervisor
    # guarding it; the child starts no supervisor unless it asks for one, and then gets its own.
    d = tmp_path / "server-dir"
    run = _spawn(f"""
        import os, subprocess, sys, time
        from pathlib import Path
        from diag.core import procs
        sup = procs.default_supervisor()
        Path({str(d)!r}).mkdir()
        srv = subprocess.Popen(["sleep", "120"], start_new_session=True)
        sup.adopt(srv.pid, directory={str(d)!r}, grace_s=1)
        fd = sup.proc.stdin.fileno()
        pid = os.fork()
        if pid == 0:
            sup.release(srv.pid, {str(d)!r})  # the parent's handle: must reach nobody
            sup.close()
            print("child-fd", os.readlink(f"/proc/self/fd/{{fd}}"), os.getpid(), flush=True)
            sys.exit(0)  # a normal exit: the inherited atexit handler runs here
        os.waitpid(pid, 0)
        pid = os.fork()
        if pid == 0:
            own = procs.default_supervisor()
            print("own", own is not sup and own.owned() and own.proc.poll() is None, own.proc.pid, flush=True)
            sys.exit(0)
        os.waitpid(pid, 0)
        print("parent", sup.proc.poll(), srv.pid, sup.proc.pid, flush=True)
        time.sleep(120)
    """)
    try:
        lines = _read_lines(run, 3, 30.0)
        assert len(lines) == 3 and lines[0][:2] == ["child-fd", "/dev/null"], lines
        assert lines[1][:2] == ["own", "True"], lines
        assert lines[2][:2] == ["parent", "None"], lines  # the parent's supervisor still runs
        own_sup, srv_pid, sup_pid = int(lines[1][2]), int(lines[2][2]), int(lines[2][3])
        assert _gone(own_sup, 5.0), "the second child's own supervisor outlived its normal exit"
        assert _supervisors_of(int(lines[0][2])) == [], "a forked child started a supervisor it never asked for"
        assert _supervisors_of(run.pid) == [sup_pid]
        assert start_ticks(srv_pid) is not None and d.is_dir()
    finally:
        run.kill()
        run.wait()
    assert _gone(srv_pid, 5.0), "the child's release or goodbye reached the parent's supervisor"
    assert _gone(sup_pid, 5.0) and not d.exists()


def test_default_supervisor_ends_with_a_normal_exit_and_stops_what_was_left(tmp_path: Path) -> None:
    # Released: the supervisor exits with the caller, silently. Left running (a caller that forgot
    # stop()): it is stopped and its directory removed before the caller's exit completes, said on stderr.
    kept, left = tmp_path / "released", tmp_path / "left"
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess
        from pathlib import Path
        from diag.core.procs import default_supervisor
        sup = default_supervisor()
        for d in ({str(kept)!r}, {str(left)!r}):
            Path(d).mkdir()
            srv = subprocess.Popen(["sleep", "300"], start_new_session=True)
            sup.adopt(srv.pid, directory=d, grace_s=1)
            print(srv.pid, flush=True)
            if d == {str(kept)!r}:
                srv.kill(); srv.wait()
                sup.release(srv.pid, d)
        print(sup.proc.pid, flush=True)
    """)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    released_pid, left_pid, sup_pid = map(int, p.stdout.split())
    assert _gone(left_pid, 0.1) and _gone(sup_pid, 0.1), "still there when the caller had exited"
    assert kept.is_dir() and not left.exists()
    said = [ln for ln in p.stderr.splitlines() if ln.startswith("dbdiag:")]
    assert said == [f"dbdiag: the run ended without cleaning up; supervisor stopped pid {left_pid}",
                    f"dbdiag: the run ended without cleaning up; supervisor removed {left}"], p.stderr
