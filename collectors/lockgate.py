"""What a target's wait sampler saw of lock waits, told to its blocking sampler without a query.

The blocking samplers (collectors/pg/blocking.py, collectors/mysql/blocking.py) read the server at the wait
sampler's rate (10 Hz). When nobody waits for a lock, which is most of most runs, that read finds nothing and
still costs a query round trip a tick: about as much CPU as the wait sampler itself (BENCHMARKS.md, "Soak":
0.9-1.1% of a core each). The wait sampler reads the same sessions every tick anyway, so it marks here when
it last ticked and when it last saw a lock wait; the blocking sampler queries only while a lock wait was seen
recently (:data:`HOLD_S`), and, as before, every tick whenever the wait sampler is not ticking (switched off,
failing, slow, or not in the run: tests drive a blocking sampler alone). While quiet, the blocking sampler
ticks :data:`QUIET_TICKS` times slower: even a tick that reads nothing wakes a process.

Two monotonic timestamps in shared memory made before the collectors are forked (``RawArray``: no lock, so
no process that dies mid-write can leave the other waiting; one 8-byte store each, read whole on x86-64 and
arm64). ``CLOCK_MONOTONIC`` is one clock for every process of the machine.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import time

QUIET_TICKS = 3  # a blocking sampler ticks this many times slower while the gate is quiet (its idle ticks cost)
HOLD_S = 2.0  # after a lock wait was seen the chains are read this long (a wait that comes and goes is one story)
STALE_TICKS = 3.0  # a wait sampler silent for this many of its ticks (plus STALE_SLACK_S) is not ticking
STALE_SLACK_S = 1.0  # slow reads on a busy machine (load 30+ here) must not turn the gate open and shut


class LockGate:
    """Shared between one target's wait sampler (writer, :meth:`tick`) and blocking sampler (reader)."""

    def __init__(self) -> None:
        # the wait sampler's last tick [0], last tick that saw a lock wait [1], last that saw none [2];
        # monotonic s, 0 = never
        self._t = mp.get_context("fork").RawArray(ctypes.c_double, 3)

    def tick(self, lock_wait: bool, now: float | None = None) -> None:
        """The wait sampler read its sessions at ``now`` (monotonic s); ``lock_wait``: one of them waited for a
        lock (a heavyweight lock on PostgreSQL; a row, metadata or table lock on MySQL / MariaDB)."""
        now = time.monotonic() if now is None else now
        self._t[1 if lock_wait else 2] = now  # before the tick mark: a reader that sees the tick sees this too
        self._t[0] = now

    def since_s(self, now: float | None = None) -> float | None:
        """Seconds since the wait sampler's last tick that saw no lock wait (None: no such tick): a lock wait
        it sees now began after that tick, or at most one of its INNODB_TRX periods before (MySQL row locks)."""
        now = time.monotonic() if now is None else now
        clear = self._t[2]
        return now - clear if clear > 0 else None

    def quiet(self, interval_s: float, now: float | None = None) -> bool:
        """True when the blocking read can be skipped at ``now``: the wait sampler (ticking every
        ``interval_s`` s) ticked lately and saw no lock wait in the last :data:`HOLD_S` s."""
        now = time.monotonic() if now is None else now
        last_tick, last_lock = self._t[0], self._t[1]
        if last_tick <= 0 or now - last_tick > STALE_TICKS * interval_s + STALE_SLACK_S:
            return False
        return last_lock <= 0 or now - last_lock > HOLD_S
