"""Child processes that die with their parent, and a supervisor that cleans up after a killed run.

A run starts clients, collectors, perf, py-spy and throwaway servers. When the
run itself dies without cleaning up (SIGKILL, the OOM killer), none of them may
keep polling a server or hold a port. Three mechanisms, because none covers
every case alone:

- :func:`die_with_parent`: ``prctl(PR_SET_PDEATHSIG)``, so the kernel signals a
  child the moment its parent dies. Linux clears it when credentials change
  (a server that drops to its own user) and it follows the parent *thread*,
  so it suits Python children forked from the main thread, and perf.
- :func:`watch_parent`: a daemon thread in Python children that notices the
  parent is gone (``getppid()`` changes on re-parenting) within
  :data:`WATCH_INTERVAL_S` and ends the process; a second guard for children
  forked from other threads.
- :class:`Supervisor`: a small separate process (``python -m diag.core.supervisor``)
  holding the throwaway servers' PIDs and directories. It reads a pipe from the
  run; when the pipe closes without a goodbye, the run is gone, and it stops
  the servers (their own stop signal, then SIGKILL) and removes their
  directories.
- :func:`default_supervisor`: one such supervisor per process, started on first
  use, for throwaway servers started without one (library callers: bench
  scripts, the tests' fixtures). A forked child never talks to its parent's
  (its copy of the pipe goes to /dev/null at the fork), and at a normal exit it
  is told to stop what is still adopted and to exit.

And :func:`install_stop_signals`: SIGTERM and SIGHUP raise :class:`Interrupted`
(a KeyboardInterrupt) in the main thread, so a run stopped by a service
manager, ``kill`` or a closed terminal ends like Ctrl-C.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
WATCH_INTERVAL_S = 0.5
SUPERVISOR_START_TIMEOUT_S = 10.0
# How long a normal exit waits for the default supervisor to stop a server its caller left running
# (the server's grace, then SIGKILL and up to 5 s for it to go; see diag.core.supervisor.clean_up).
END_TIMEOUT_S = 20.0

_libc: ctypes.CDLL | None = None
# Our end of each supervisor's pipe (fd numbers), for guard_child to drop in forked children.
_supervisor_fds: set[int] = set()


def _load_libc() -> ctypes.CDLL | None:
    """libc, loaded once. Call it in the parent: find_library may run ldconfig, never do that after a fork."""
    global _libc
    if _libc is None:
        name = ctypes.util.find_library("c")
        if name:
            _libc = ctypes.CDLL(name, use_errno=True)
    return _libc


def _prctl(option: int, arg: int) -> bool:
    """prctl(2) through libc; False where it does not exist (not Linux)."""
    libc = _load_libc()
    if libc is None:
        return False
    try:
        return int(libc.prctl(option, arg, 0, 0, 0)) == 0
    except AttributeError:
        return False


def die_with_parent(expected_ppid: int | None = None, sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies.

    Call it first thing in a child. ``expected_ppid`` closes the race where the
    parent died before the call: then the signal is raised at once. Returns
    whether prctl succeeded. Safe as a subprocess ``preexec_fn`` (no locks taken).
    """
    ok = _prctl(PR_SET_PDEATHSIG, int(sig))
    if expected_ppid is not None and os.getppid() != expected_ppid:
        os.kill(os.getpid(), sig)
    return ok


def pdeathsig_preexec(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that makes the tool die with the calling thread.

    For tools (perf, py-spy, initdb) waited for by the thread that starts them.
    SIGINT is given back its default: we stop perf with SIGINT, and a run
    started in the background has it ignored, which exec would pass on.
    """
    parent = os.getpid()
    _load_libc()  # here, before the fork: the child only calls prctl

    def _pre() -> None:
        # Ignored signals survive exec; ours may be ignored by now (a background job's SIGINT, SIGTERM
        # during the cleanup after a first one), and then the tool could neither be stopped nor die with us.
        for s in {signal.SIGINT, sig}:
            signal.signal(s, signal.SIG_DFL)
        die_with_parent(parent, sig)

    return _pre


def watch_parent(on_gone: Callable[[], None] | None = None, interval_s: float = WATCH_INTERVAL_S,
                 parent: int | None = None) -> threading.Thread:
    """Start a daemon thread that calls ``on_gone`` (default: exit at once) when the parent dies.

    ``parent`` is the PID the caller had before it forked (default: the current
    parent; pass it when the parent may already have died).

    ``os._exit`` is the default because a child of a dead run has nobody to
    report to; what it wrote so far is already flushed (the bundle writes
    append and flush each record).
    """
    parent = os.getppid() if parent is None else parent

    def _watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        if on_gone is not None:
            on_gone()
        else:
            os._exit(3)

    th = threading.Thread(target=_watch, name="dbdiag-parent-watch", daemon=True)
    th.start()
    return th


def guard_child(parent: int | None = None, watch: bool = True) -> None:
    """Both guards for a Python child of the run: PDEATHSIG and the parent watch.

    ``parent``: the parent's PID taken before the fork, so a parent that died
    before this call is noticed (default: the current parent). ``watch``: also
    start the parent-watch thread; a child forked from the run's main thread
    (PDEATHSIG then suffices) whose hot loop holds the GIL passes False.
    """
    parent = os.getppid() if parent is None else parent
    # The run's SIGTERM/SIGHUP handlers (install_stop_signals) came along with the fork; in a child they
    # would raise KeyboardInterrupt wherever it is, or wait for a C loop to return. The run stops its
    # children through flags and pipes; a signal means "end now". SIGTERM is also the parent-death signal,
    # so it is never left ignored; an ignored SIGHUP (nohup) stays ignored.
    with contextlib.suppress(ValueError):  # not the main thread: no Python handler to undo here
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if signal.getsignal(signal.SIGHUP) is _raise_interrupted:
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
        if signal.getsignal(signal.SIGINT) is _raise_interrupted:  # Python's own, as before the run took it
            signal.signal(signal.SIGINT, signal.default_int_handler)
    # The write end of the supervisor's pipe came along too: drop it, or the supervisor would not see
    # the run die until every forked child had.
    for fd in list(_supervisor_fds):
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd)  # not close: the fd number stays taken, nothing else can reuse it
            os.close(devnull)
    _supervisor_fds.clear()
    die_with_parent(parent)
    if watch:
        watch_parent(parent=parent)


class Interrupted(KeyboardInterrupt):
    """A stop request by signal (SIGTERM, SIGHUP): handled wherever Ctrl-C is; ``str()`` names the signal."""


class _StopState:
    """What stop signals came: the first one's name, whether it was raised, and how deep the holds are."""

    first: str | None = None
    count = 0  # stop signals received so far
    raised = False
    holds = 0


def _raise_interrupted(signum: int, _frame: object) -> None:
    # Raised once: the cleanup that follows (clients drained, sources stopped, servers stopped, run.json
    # written) must not be cut by a second SIGTERM (systemd, a supervisor repeating itself, an impatient
    # Ctrl-C). A later signal, or one inside hold_stop_signals(), is only noted: every wait of the
    # cleanup is bounded, and shorter once a stop was asked for (stop_requested()). The handler stays
    # installed (not SIG_IGN): an ignored signal would survive exec into the tools we start.
    name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    _StopState.count += 1
    if _StopState.first is None:
        _StopState.first = name
    if _StopState.raised or _StopState.holds > 0:
        return
    _StopState.raised = True
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Interrupted(name)


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def install_stop_signals() -> list[str]:
    """Make SIGTERM and SIGHUP raise :class:`Interrupted` (SIGINT: KeyboardInterrupt) in the main thread,
    once; the names of those handled.

    A signal ignored when we started stays ignored (``nohup`` ignores SIGHUP on
    purpose; a background job started by a shell has SIGINT ignored, and must
    keep it so). Does nothing outside the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return []
    done = []
    for s in _STOP_SIGNALS:
        if signal.getsignal(s) is signal.SIG_IGN:
            continue
        signal.signal(s, _raise_interrupted)
        done.append(s.name)
    return done


def stop_requested() -> str | None:
    """The first stop signal this process got ("Ctrl-C", "SIGTERM", "SIGHUP"), None if none: cleanup waits
    are cut short once it is set."""
    return _StopState.first


def stop_count() -> int:
    """How many stop signals this process got: a caller that handled one as a normal end (``dbdiag watch``)
    notes the count, and only a later one interrupts its clean-up."""
    return _StopState.count


@contextlib.contextmanager
def hold_stop_signals() -> Iterator[None]:
    """A cleanup that must run to its end: a stop signal inside is noted (:func:`stop_requested`), not
    raised. Every wait inside must be bounded (a few seconds once a stop was requested)."""
    _StopState.holds += 1
    try:
        yield
    finally:
        _StopState.holds -= 1


class StopFlag:
    """A stop flag shared with forked children that no dead or stuck process can leave locked.

    A pipe: :meth:`set` writes one byte without blocking (nobody reads it, so the
    read end stays readable for every child); :meth:`wait` and :meth:`is_set`
    poll the read end. A ``multiprocessing.Event`` deadlocks here: its ``set()``
    waits for every sleeper to wake, and a sleeper killed in ``wait()`` never
    does (issue 25: a run that then ignored SIGTERM until SIGKILL).
    """

    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)

    def set(self) -> None:
        with contextlib.suppress(OSError):  # BlockingIOError: a byte is there already; closed: set already
            os.write(self._w, b"x")

    def wait(self, timeout_s: float) -> bool:
        """Whether the flag is set, waiting up to ``timeout_s`` seconds for it."""
        try:
            ready, _, _ = select.select([self._r], [], [], max(timeout_s, 0.0))
        except (OSError, ValueError):  # closed: the owner is done with it
            return True
        return bool(ready)

    def is_set(self) -> bool:
        return self.wait(0.0)

    def close(self) -> None:
        for fd in (self._r, self._w):
            with contextlib.suppress(OSError):
                os.close(fd)


def interrupt_reason(e: BaseException) -> str:
    """"Ctrl-C" for a plain KeyboardInterrupt, the signal's name (SIGTERM, SIGHUP) for :class:`Interrupted`."""
    return (str(e) or "signal") if isinstance(e, Interrupted) else "Ctrl-C"


class Supervisor:
    """The run's handle on its supervisor process: register what it must clean up if we die.

    Messages are JSON lines on the supervisor's stdin. :meth:`close` says
    goodbye (nothing to clean: the run did it); a pipe that closes without a
    goodbye means the run died, and the supervisor cleans up everything still
    registered.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self._lock = threading.Lock()
        # The process that started it. A forked child has a copy of this object and of the pipe: what it
        # wrote would interleave with its parent's messages, and its close() would say goodbye for it.
        self._owner = os.getpid()

    def owned(self) -> bool:
        """Whether this process started the supervisor (False in a forked child: every message is dropped)."""
        return os.getpid() == self._owner

    @classmethod
    def start(cls) -> "Supervisor":
        """Start ``python -m diag.core.supervisor`` and wait for it to say it is ready."""
        proc = subprocess.Popen([sys.executable, "-m", "diag.core.supervisor", str(os.getpid())],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        assert proc.stdout is not None
        line = _readline_with_timeout(proc.stdout, SUPERVISOR_START_TIMEOUT_S)
        if line.strip() != b"ready":
            with contextlib.suppress(OSError):
                proc.kill()
            raise OSError(f"the cleanup supervisor did not start (said {line[:80]!r})")
        assert proc.stdin is not None
        _supervisor_fds.add(proc.stdin.fileno())
        return cls(proc)

    def _send(self, msg: dict[str, object]) -> None:
        if not self.owned():
            return  # before the lock: a fork may have copied it held by another thread
        with self._lock:
            if self.proc.stdin is None or self.proc.stdin.closed:
                return
            try:
                self.proc.stdin.write((json.dumps(msg) + "\n").encode())
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass  # supervisor gone: nothing more we can register

    def adopt(self, pid: int | None, stop_signal: int = signal.SIGTERM, directory: str | Path | None = None,
              grace_s: float = 10.0) -> None:
        """Stop ``pid`` and its descendants with ``stop_signal`` (SIGKILL after ``grace_s``) and remove
        ``directory`` if we die. ``pid`` None: only the directory (made before its process started)."""
        self._send({"op": "adopt", "pid": pid, "signal": int(stop_signal),
                    "dir": str(directory) if directory else None, "grace_s": grace_s})

    def release(self, pid: int | None = None, directory: str | Path | None = None) -> None:
        """``pid`` (or the directory adopted alone) was stopped and cleaned by the run itself."""
        self._send({"op": "release", "pid": pid, "dir": str(directory) if directory else None})

    def close(self) -> None:
        """A normal end: the run cleaned up; the supervisor exits without touching anything."""
        self._finish("bye", 5.0)

    def end(self, timeout_s: float = END_TIMEOUT_S) -> None:
        """A normal end of a process that may have left something adopted (a library caller that never
        stopped its server): the supervisor stops and removes it, as if we had died, and exits."""
        self._finish("end", timeout_s)

    def _finish(self, op: str, timeout_s: float) -> None:
        if not self.owned():
            return
        self._send({"op": op})
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                _supervisor_fds.discard(self.proc.stdin.fileno())
                self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout_s)


# This process's default supervisor (see default_supervisor), and the PID in which starting one failed.
_default: Supervisor | None = None
_default_failed_in: int | None = None
_default_lock = threading.Lock()
# Default supervisors inherited through fork: kept referenced, so that no garbage collection in the child
# closes (and flushes into) what was the parent's pipe.
_inherited: list[Supervisor] = []


def default_supervisor() -> Supervisor | None:
    """This process's own cleanup supervisor, for throwaway servers started with ``supervisor=None``.

    Started on the first call and reused for the life of the process; started
    again only if it died. Its pipe closes when this process dies, however it
    dies, and then it stops and removes what is still adopted. A forked child gets
    one of its own only if it asks (it starts a server itself). None where it
    cannot start (the server still runs, unguarded); not retried in this process.
    """
    global _default, _default_failed_in
    with _default_lock:
        if _default is not None and _default.owned() and _default.proc.poll() is None:
            return _default
        if _default_failed_in == os.getpid():
            return None
        try:
            _default = Supervisor.start()
        except OSError:
            _default_failed_in = os.getpid()
            return None
        return _default


def _default_after_fork() -> None:
    """In a forked child (driver clients, collectors, any os.fork): forget the parent's default supervisor.

    Its write end goes to /dev/null (an open copy would hide the parent's death
    from the supervisor until this child ended too; the parent's goodbye must not
    come from here either), and the lock is new (a fork may copy it held).
    """
    global _default, _default_lock
    _default_lock = threading.Lock()
    if _default is None:
        return
    inherited, _default = _default, None
    _inherited.append(inherited)
    if inherited.proc.stdin is not None:
        with contextlib.suppress(OSError, ValueError):
            fd = inherited.proc.stdin.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, fd, inheritable=False)  # not close: the file object still names this fd
            os.close(devnull)
            _supervisor_fds.discard(fd)


def _end_default() -> None:
    """At a normal exit: the default supervisor stops what is still adopted (nothing, when every server was
    stopped: then it says nothing) and exits, so no supervisor outlives the process."""
    if _default is not None and _default.owned():
        _default.end()


os.register_at_fork(after_in_child=_default_after_fork)
# Registered at import, so it runs after the atexit handlers registered later (LIFO): those may still stop
# their servers themselves.
atexit.register(_end_default)


@contextlib.contextmanager
def supervised() -> Iterator[Supervisor | None]:
    """A supervisor for a command's throwaway servers, said goodbye to at the end; None where it cannot
    start (the command still works; only a SIGKILL of it would leave its servers behind)."""
    try:
        sup: Supervisor | None = Supervisor.start()
    except OSError:
        sup = None
    try:
        yield sup
    finally:
        if sup is not None:
            sup.close()


def _readline_with_timeout(fh: IO[bytes], timeout_s: float) -> bytes:
    out: list[bytes] = []
    th = threading.Thread(target=lambda: out.append(fh.readline()), daemon=True)
    th.start()
    th.join(timeout_s)
    return out[0] if out else b""
