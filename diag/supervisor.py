"""The cleanup supervisor: ``python -m diag.supervisor PARENT_PID`` (started by :class:`diag.procs.Supervisor`).

It reads JSON lines on stdin (``adopt`` a PID with its stop signal and
directory, ``release`` it, ``bye``). When stdin closes without ``bye`` (the run
died, however), it stops every adopted process that is still the same process
(checked by its start time, so a reused PID is never signalled), SIGKILLs what
does not stop within its grace time, and removes the adopted directories.
SIGINT, SIGTERM and SIGHUP are ignored: the run handles those itself and its
pipe tells us when it is gone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.05


@dataclass
class Adopted:
    """A process to stop, and a directory to remove, if the run dies."""

    pid: int
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


def _alive(a: Adopted) -> bool:
    try:
        text = Path(f"/proc/{a.pid}/stat").read_text()
    except OSError:
        return False
    state = text.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X") and start_ticks(a.pid) == a.start_ticks


def clean_up(items: list[Adopted]) -> None:
    """Stop every adopted process (signal, grace, SIGKILL), then remove the directories."""
    for a in items:
        if _alive(a):
            try:
                os.kill(a.pid, a.stop_signal)
            except ProcessLookupError:
                pass
    for a in items:
        deadline = time.monotonic() + a.grace_s
        while _alive(a) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if _alive(a):
            try:
                os.kill(a.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 5.0
            while _alive(a) and time.monotonic() < deadline:
                time.sleep(POLL_S)
    for a in items:
        if a.directory:
            shutil.rmtree(a.directory, ignore_errors=True)


def serve(stdin: "object", stdout: "object") -> int:
    """Read messages until ``bye`` (return 0, touch nothing) or EOF (clean up, return 1)."""
    adopted: dict[int, Adopted] = {}
    print("ready", file=stdout, flush=True)  # type: ignore[arg-type]
    for line in stdin:  # type: ignore[attr-defined]
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        op = msg.get("op")
        if op == "adopt":
            pid = int(msg["pid"])
            adopted[pid] = Adopted(pid, start_ticks(pid), int(msg.get("signal", signal.SIGTERM)), msg.get("dir"),
                                   float(msg.get("grace_s", 10.0)))
        elif op == "release":
            adopted.pop(int(msg["pid"]), None)
        elif op == "bye":
            return 0
    clean_up(list(adopted.values()))
    return 1


def main() -> int:
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_IGN)
    # Our own session: a terminal hang-up or the run's process group being signalled must not stop us
    # before we cleaned up.
    try:
        os.setsid()
    except OSError:
        pass
    return serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
