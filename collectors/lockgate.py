"""What a target's wait sampler saw of lock waits, told to its blocking sampler without a query.

The blocking samplers (collectors/pg/blocking.py, collectors/mysql/blocking.py) read the server at the wait
sampler's rate (10 Hz). When nobody waits for a lock, which is most of most runs, that read finds nothing and
still costs a query round trip a tick: about as much CPU as the wait sampler itself (BENCHMARKS.md, "Soak":
0.9-1.1% of a core each). The wait sampler reads the same sessions every tick anyway, so it marks here when
it last ticked and when it last saw a lock wait; the blocking sampler queries only while a lock wait was seen
recently (:data:`HOLD_S`), and, as before, every tick whenever the wait sampler is not ticking (switched off,
failing, slow, or not in the run: tests drive a blocking sampler alone).

On PostgreSQL a lock wait opens the gate only when the same session is seen waiting for a lock at two
consecutive wait-sampler ticks (a wait of about a tick, 0.1 s, or more, or a session that waits most of the
time): read-write at 4 clients has row-lock waits of a few ms in most seconds, and reading chains for each of
them cost 0.7% of a core (pg_blocking_pids takes the lock manager's partition locks) for holders that had let
go by the read. Such short waits stay in the wait accounting (row/table lock class); their holders are not
read. A hot row where sessions queue most of the time opens it at once. While quiet, the blocking sampler
ticks :data:`QUIET_TICKS` times slower: even a tick that reads nothing wakes a process.

A gate open for :data:`SUSTAINED_S` without a break is a lock-bound load (read-write at 4 clients on a small
table: 43% of session time waiting for row locks, BENCHMARKS.md), where the chains repeat themselves tick after
tick: the blocking sampler then reads them :data:`SUSTAINED_TICKS` times slower (:class:`TickPace`); each read
stands for the time since the previous one, so blocked seconds stay an estimate of the same size. Read at
10 Hz all along, they cost 0.6-0.8% of a core on read-write (pg_blocking, my_blocking), half the collectors';
5 s at 10 Hz, then 3.3 Hz, still 0.44-0.51% (PostgreSQL read-write, 8 s steps), and on PostgreSQL each read
takes every lock-manager partition lock (pg_blocking_pids) that the load's row locks queue on. A wait sampler
that is not ticking leaves the pace alone: the blocking sampler is then the only lock source.

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
SUSTAINED_S = 2.0  # a gate open this long without a break: the blocking sampler slows down (TickPace)
SUSTAINED_TICKS = 5  # ... to this many of its ticks (2 Hz for a 10 Hz sampler)
RESET_S = 5.0  # ... until the gate stayed shut this long (waits that come and go are one lock-bound load)
STALE_TICKS = 3.0  # a wait sampler silent for this many of its ticks (plus STALE_SLACK_S) is not ticking
STALE_SLACK_S = 1.0  # slow reads on a busy machine (load 30+ here) must not turn the gate open and shut


class LockGate:
    """Shared between one target's wait sampler (writer, :meth:`tick`) and blocking sampler (reader)."""

    def __init__(self) -> None:
        # the wait sampler's last tick [0], last tick that saw a lock wait [1], last that saw none [2];
        # monotonic s, 0 = never
        self._t = mp.get_context("fork").RawArray(ctypes.c_double, 3)

    def tick(self, lock_wait: bool, now: float | None = None, opens: bool | None = None) -> None:
        """The wait sampler read its sessions at ``now`` (monotonic s); ``lock_wait``: one of them waited for a
        lock (a heavyweight lock on PostgreSQL; a row, metadata or table lock on MySQL / MariaDB). ``opens``:
        that wait is one to read chains for (default: any lock wait); a tick with a lock wait that does not
        open the gate is not a tick without one either (the catch-up's bound, :meth:`since_s`)."""
        now = time.monotonic() if now is None else now
        if lock_wait if opens is None else opens:  # before the tick mark: a reader that sees it sees this too
            self._t[1] = now
        if not lock_wait:
            self._t[2] = now
        self._t[0] = now

    def since_s(self, now: float | None = None) -> float | None:
        """Seconds since the wait sampler's last tick that saw no lock wait (None: no such tick): a lock wait
        it sees now began after that tick, or at most one of its INNODB_TRX periods before (MySQL row locks)."""
        now = time.monotonic() if now is None else now
        clear = self._t[2]
        return now - clear if clear > 0 else None

    def ticking(self, interval_s: float, now: float | None = None) -> bool:
        """The wait sampler (ticking every ``interval_s`` s) ticked lately (see :data:`STALE_TICKS`)."""
        now = time.monotonic() if now is None else now
        last_tick = self._t[0]
        return last_tick > 0 and now - last_tick <= STALE_TICKS * interval_s + STALE_SLACK_S

    def quiet(self, interval_s: float, now: float | None = None) -> bool:
        """True when the blocking read can be skipped at ``now``: the wait sampler (ticking every
        ``interval_s`` s) ticked lately and saw no lock wait in the last :data:`HOLD_S` s."""
        now = time.monotonic() if now is None else now
        if not self.ticking(interval_s, now):
            return False
        last_lock = self._t[1]
        return last_lock <= 0 or now - last_lock > HOLD_S


class TickPace:
    """A blocking sampler's tick (s) from the gate's word: :data:`QUIET_TICKS` slower while quiet, its own while
    the gate opened recently, :data:`SUSTAINED_TICKS` slower once it stayed open :data:`SUSTAINED_S`. A load
    whose waits come and go (MariaDB read-write: the gate shuts after HOLD_S without a wait and opens again a
    second later) stays at the slower pace until the gate stayed shut :data:`RESET_S`."""

    def __init__(self) -> None:
        self.open_since: float | None = None  # monotonic s the gate opened (None: quiet for RESET_S)
        self.quiet_since: float | None = None  # monotonic s the gate last shut (None: open)

    def tick_s(self, base_s: float, quiet: bool, now: float, ticking: bool = True) -> float:
        """``quiet``: LockGate.quiet; ``ticking``: LockGate.ticking (False: the sampler's own tick, always)."""
        if not ticking:
            self.open_since = self.quiet_since = None
            return base_s
        if quiet:
            if self.quiet_since is None:
                self.quiet_since = now
            if now - self.quiet_since >= RESET_S:
                self.open_since = None
            return base_s * QUIET_TICKS
        self.quiet_since = None
        if self.open_since is None:
            self.open_since = now
        return base_s * SUSTAINED_TICKS if now - self.open_since >= SUSTAINED_S else base_s
