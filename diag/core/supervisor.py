"""The cleanup supervisor: ``python -m diag.core.supervisor PARENT_PID`` (started by :class:`diag.core.procs.Supervisor`).

It reads JSON lines on stdin (``adopt`` a PID with its stop signal and
directory, or a directory alone; ``release`` one; ``bye``; ``end``). When stdin
closes without ``bye``, or the run's PID is no longer our parent (the run died,
however), or on ``end`` (the normal exit of a process that may have left a
server running: :func:`diag.core.procs.default_supervisor`), it stops every adopted
process that is still the same process (checked by its start time, so a reused PID is never signalled), SIGKILLs it and
the descendants it had (a postmaster's backends) when they do not stop within
the grace time, and removes the adopted directories.
SIGINT, SIGTERM and SIGHUP are ignored: the run handles those itself and its
pipe tells us when it is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.05
PARENT_CHECK_S = 0.5  # how often we look whether the run is still our parent, without a message


@dataclass
class Adopted:
    """A process to stop (None: a directory alone), and a directory to remove, if the run dies."""

    pid: int | None
    start_ticks: int | None
    stop_signal: int
    directory: str | None
    grace_s: float


def start_ticks(pid: int, proc_root: Path = Path("/proc")) -> int | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks), None when the process is gone."""
    try:
        text = (proc_root / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[19]) if len(fields) > 19 else None


def _state(pid: int) -> str | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[0]


def _alive(a: Adopted) -> bool:
    if a.pid is None:
        return False
    return _state(a.pid) not in (None, "Z", "X") and start_ticks(a.pid) == a.start_ticks


def descendants(pid: int, proc_root: Path = Path("/proc")) -> list[Adopted]:
    """Every process below ``pid`` now, with its start time (to be signalled later only if still the same)."""
    parent_of: dict[int, int] = {}
    for d in proc_root.iterdir():
        if not d.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            parent_of[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        for child, ppid in parent_of.items():
            if ppid == p:
                found.append(Adopted(child, start_ticks(child, proc_root), signal.SIGKILL, None, 0.0))
                todo.append(child)
    return found


def _kill(a: Adopted, sig: int) -> None:
    if a.pid is not None and _alive(a):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(a.pid, sig)


def _wait_gone(items: list[Adopted], deadline: float) -> None:
    while any(_alive(a) for a in items) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def clean_up(items: list[Adopted]) -> list[str]:
    """Stop every adopted process (signal, grace, SIGKILL for it and its descendants), remove the
    directories; one line per thing done."""
    done: list[str] = []
    below = {a.pid: descendants(a.pid) for a in items if a.pid is not None and _alive(a)}
    for a in items:
        if a.pid in below:
            _kill(a, a.stop_signal)
            done.append(f"stopped pid {a.pid}")
    for a in items:
        if a.pid not in below:
            continue
        _wait_gone([a], time.monotonic() + a.grace_s)
        rest = [a, *below[a.pid]]
        for b in rest:
            _kill(b, signal.SIGKILL)
        _wait_gone(rest, time.monotonic() + 5.0)
    for a in items:
        if a.directory and os.path.lexists(a.directory):
            shutil.rmtree(a.directory, ignore_errors=True)
            done.append(f"removed {a.directory}")
    return done


def _key(msg: dict[str, object]) -> str:
    return f"pid:{msg['pid']}" if msg.get("pid") is not None else f"dir:{msg.get('dir')}"


def _handle(msg: dict[str, object], adopted: dict[str, Adopted]) -> str | None:
    """Apply one message; its op for ``bye`` and ``end`` (the last message), else None."""
    op = msg.get("op")
    if op == "adopt":
        pid = int(msg["pid"]) if msg.get("pid") is not None else None  # type: ignore[call-overload]
        d = msg.get("dir")
        adopted[_key(msg)] = Adopted(pid, start_ticks(pid) if pid is not None else None,
                                     int(msg.get("signal", signal.SIGTERM)),  # type: ignore[call-overload]
                                     str(d) if d else None, float(msg.get("grace_s", 10.0)))  # type: ignore[arg-type]
    elif op == "release":
        adopted.pop(_key(msg), None)
        if msg.get("pid") is not None and msg.get("dir"):
            adopted.pop(f"dir:{msg['dir']}", None)
    elif op in ("bye", "end"):
        return str(op)
    return None


def _lines(fd: int, parent: int | None) -> Iterator[bytes]:
    """The lines arriving on ``fd`` until EOF, or until ``parent`` is no longer our parent."""
    buf = b""
    while True:
        if parent is not None and os.getppid() != parent:
            return
        ready, _, _ = select.select([fd], [], [], PARENT_CHECK_S)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            yield line


def serve(stdin: "object", stdout: "object", parent: int | None = None) -> int:
    """Read messages until ``bye`` (return 0, touch nothing), ``end`` (clean up, return 0) or the run is gone
    (clean up, return 1). Each thing cleaned up is one line on stderr; nothing adopted, nothing said."""
    adopted: dict[str, Adopted] = {}
    last = None
    print("ready", file=stdout, flush=True)  # type: ignore[call-overload]  # stdout: a text stream, typed object
    for line in _lines(stdin.fileno(), parent):  # type: ignore[attr-defined]
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        last = _handle(msg, adopted) if isinstance(msg, dict) else None
        if last == "bye":
            return 0
        if last == "end":
            break
    for what in clean_up(list(adopted.values())):
        # The run's terminal may be gone (SIGHUP): saying so is a courtesy, not a need.
        with contextlib.suppress(OSError):
            print(f"dbdiag: the run ended without cleaning up; supervisor {what}", file=sys.stderr, flush=True)
    return 0 if last == "end" else 1


def main() -> int:
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    # Our own session: a terminal hang-up or the run's process group being signalled must not stop us
    # before we cleaned up.
    try:
        os.setsid()
    except OSError:
        pass
    parent = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else None
    return serve(sys.stdin, sys.stdout, parent)


if __name__ == "__main__":
    sys.exit(main())
