"""What a run records when a target's server went away mid-step (the workload driver found it).

The driver's row says when and in which step (``server_lost``); this adds what
only the run knows: for a throwaway server, how its process ended and the last
lines of its log, read before the server's directory is removed. They go into
run.json's target (``lost``) and a ``server_lost`` event, since reports read the
bundle only (:mod:`reports.rules.lost`).
"""

from __future__ import annotations

import signal
import subprocess
from typing import Any

import psutil

from diag.core.schema import ResultRow
from diag.core.servers import ThrowawayServer

EXIT_WAIT_S = 2.0   # a server that lost its clients may still be on its way out: wait this long for its status
LOG_LINES = 10


def exit_status(returncode: int | None) -> str:
    """``-9`` -> "killed by signal 9 (SIGKILL)", ``1`` -> "exited with code 1", None -> "still running"."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-returncode} ({name})"
    return f"exited with code {returncode}"


def loss_facts(server: ThrowawayServer | None, pid: int | None = None,
               wait_s: float = EXIT_WAIT_S) -> dict[str, Any]:
    """The lost server's exit status and last log lines when the run started it; for another local
    server (``pid`` known) only whether that process is still there; else {}."""
    if server is None or server.process is None:
        if pid is None:
            return {}
        alive = psutil.pid_exists(pid)
        return {"pid": pid, "exit_status": f"process {pid} {'still runs' if alive else 'is gone'}"}
    try:
        rc: int | None = server.process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        rc = None
    tail = server.log_tail(LOG_LINES)
    return {"pid": server.pid, "returncode": rc, "exit_status": exit_status(rc),
            "log_tail": tail.split(" | ") if tail else []}


def loss_line(label: str, row: ResultRow, facts: dict[str, Any]) -> str:
    """One line for the console and run.json's ``error``: which target, when, in which step, how it ended."""
    cut = row.server_lost or {}
    after = cut.get("after_s")
    when = f"{after:.1f} s into" if isinstance(after, (int, float)) and after >= 0 else "in the warmup of"
    how = f" ({facts['exit_status']})" if facts.get("exit_status") else ""
    return f"{label}: the server went away{how} {when} {row.workload} with {row.clients} clients"


def aborted_line(label: str, row: ResultRow) -> str:
    """One line for a step ``--on-error abort`` ended: which target and step, when, and the first error."""
    cut = row.aborted or {}
    after = cut.get("after_s")
    when = f"{after:.1f} s into its measured part" if isinstance(after, (int, float)) and after >= 0 else \
        "in its warmup"
    code = f"{cut.get('code')}: " if cut.get("code") else ""
    return (f"{label}: --on-error abort ended {row.workload} with {row.clients} clients {when}, "
            f"at its first error ({code}{cut.get('message') or 'no message'})")


def stuck_line(label: str, row: ResultRow) -> str:
    """One line for a step a stuck statement ended: which target and step, and what the statement waited for."""
    cut = row.stuck or {}
    return f"{label}: {row.workload} with {row.clients} clients: {cut.get('message') or 'stuck'}"
