"""The load command of ``dbdiag watch -- CMD ARGS...``: started, read, ended.

The command runs in a session of its own (its process group is ours to end) and dies
with us (PR_SET_PDEATHSIG). Its standard output and error go, as they come, to one
file in the bundle's artifacts; :meth:`LoadCommand.new_lines` hands the lines written
since the last call to the watch, which parses the tools' progress lines
(:mod:`workloads.watch.progress_lines`). Its process tree is the watch's clients: their CPU
is measured as a run's own clients' is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

from diag.core.errors import UsageError
from diag.core.procs import pdeathsig_preexec

STOP_GRACE_S = 3.0  # after SIGTERM, before SIGKILL


class LoadCommand:
    """A started load command; ``output`` is the file its output goes to."""

    def __init__(self, argv: list[str], output: Path) -> None:
        if not argv:
            raise UsageError("nothing after --: give the load command to run, e.g. -- pgbench -T 60 ...")
        self.argv = list(argv)
        self.output = output
        self._out = open(output, "wb")  # noqa: SIM115 - closed in wait()/stop()
        self._pos = 0
        self._partial = b""
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self._out,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=pdeathsig_preexec())
        except FileNotFoundError:
            self._out.close()
            raise UsageError(f"load command not found: {self.argv[0]}") from None
        except PermissionError:
            self._out.close()
            raise UsageError(f"load command not executable: {self.argv[0]}") from None
        self.started = time.time()
        self.ended: float | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        """Its exit status once it ended (negative: killed by that signal), else None."""
        rc = self.proc.poll()
        if rc is not None and self.ended is None:
            self.ended = time.time()
        return rc

    def new_lines(self) -> list[tuple[float, str]]:
        """(arrival time, line) of every complete line written since the last call."""
        now = time.time()
        try:
            with open(self.output, "rb") as f:
                f.seek(self._pos)
                data = f.read()
        except OSError:
            return []
        self._pos += len(data)
        data = self._partial + data
        *lines, self._partial = data.split(b"\n")
        # pgbench and sysbench end progress lines with "\n"; a tool drawing with "\r" gives one line per redraw
        return [(now, part.decode("utf-8", "replace")) for ln in lines for part in ln.split(b"\r") if part.strip()]

    def rest(self) -> list[tuple[float, str]]:
        """The lines still unread, the unterminated last one included (after the command ended)."""
        out = self.new_lines()
        if self._partial.strip():
            out.append((time.time(), self._partial.decode("utf-8", "replace")))
            self._partial = b""
        return out

    def stop(self) -> int | None:
        """End the command's process group (SIGTERM, then SIGKILL); its exit status."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(STOP_GRACE_S)
        self.poll()
        with contextlib.suppress(OSError):
            self._out.close()
        return self.proc.returncode

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._out.close()
