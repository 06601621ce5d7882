"""The stop flag of the collectors cannot be left locked by a child that died waiting on it (issue 25).

The run used a ``multiprocessing.Event``: its ``set()`` waits for every sleeper in ``wait()`` to wake, and
a sleeper killed there never does, so the run's clean-up hung and (its stop signals then ignored) only
SIGKILL ended it. Both are shown on real forked processes: the Event hangs, :class:`diag.core.procs.StopFlag`
does not.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from collectors.lifecycle import SharedPids
from diag.core.procs import StopFlag

ROOT = Path(__file__).resolve().parents[2]

_KILL_A_WAITER = """
    import multiprocessing as mp, os, signal, sys, time
    from diag.core.procs import StopFlag
    ctx = mp.get_context("fork")
    flag = ctx.Event() if sys.argv[1] == "event" else StopFlag()
    kids = [ctx.Process(target=lambda: flag.wait(30), daemon=True) for _ in range(3)]
    for k in kids:
        k.start()
    time.sleep(0.5)                       # all three inside wait()
    os.kill(kids[0].pid, signal.SIGKILL)  # one dies there
    kids[0].join()
    t = time.monotonic()
    flag.set()
    for k in kids[1:]:
        k.join(5)
    print(round(time.monotonic() - t, 3), [k.exitcode for k in kids[1:]], flush=True)
"""


def _run(kind: str, timeout_s: float) -> str | None:
    """The child's line, or None when it did not finish within ``timeout_s``."""
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(_KILL_A_WAITER), kind], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout_s)
        return out.strip()
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return None


def test_a_waiter_killed_in_wait_hangs_an_event_but_not_the_stop_flag() -> None:
    assert _run("event", 2.5) is None, "multiprocessing.Event.set() returned: the hazard this flag avoids is gone"
    line = _run("flag", 15.0)
    assert line is not None, "StopFlag.set() hung after a waiter was killed"
    took, codes = line.split(" ", 1)
    assert float(took) < 2.0 and codes == "[0, 0]", line  # set at once; the live waiters saw it and ended


def test_stop_flag_wait_and_set() -> None:
    f = StopFlag()
    t = time.monotonic()
    assert f.wait(0.2) is False and time.monotonic() - t >= 0.19
    f.set()
    f.set()  # twice: no error, never blocks
    assert f.is_set() and f.wait(5)
    f.close()
    assert f.is_set()  # a closed flag reads as set: whoever still asks should stop


def test_shared_pids_reads_what_was_set_without_a_lock() -> None:
    pids = SharedPids(8)
    assert pids() == []
    pids.set([11, 12, 13])
    assert pids() == [11, 12, 13]
    pids.set(list(range(20)))  # more than fit: the first 8
    assert pids() == list(range(8))
