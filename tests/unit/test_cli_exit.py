"""diag.cli.entry: a stop signal after the command decided its exit code does not kill the process.

Python restores the default handlers as it shuts down; a SIGTERM then killed a finished run (exit status -15).
Here the restoring is done in an atexit callback, which then signals the process, as the late signal would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LATE_SIGNAL = """
import atexit, os, signal, sys
def late():
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # what the interpreter's shutdown does
    os.kill(os.getpid(), signal.SIGTERM)
atexit.register(late)
sys.argv = ["dbdiag", "--version"]
from diag.cli import {call}
"""


def _run(call: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LATE_SIGNAL.format(call=call)], capture_output=True, text=True,
                          timeout=60, cwd=str(REPO))


def test_a_signal_after_the_exit_code_is_dropped() -> None:
    p = _run("entry; entry()")
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert "dbdiag" in p.stdout and "Traceback" not in p.stderr


def test_main_alone_is_killed_so_the_plant_is_real() -> None:
    p = _run("main; sys.exit(main())")
    assert p.returncode == -15, (p.returncode, p.stderr)
