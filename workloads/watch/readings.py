"""What a watched server's counters read (:class:`Reading`) and what they count over a window
(:class:`WindowCounts`); each engine's readers and counting rules are its module's in :mod:`workloads.engines`
(``WatchReading``), the reader session is :class:`workloads.watch.watch_counters.CounterReader`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Reading:
    """One read of a server's counters: cumulative counts, and the sessions connected now.

    ``t``: Unix s. ``counters``: name -> cumulative value (engine-specific, see the module docstring).
    """

    t: float
    counters: Mapping[str, float]
    sessions: int
    busy: int
    hidden: int = 0  # sessions of other roles whose state this role may not see (PostgreSQL)
    connected: int = 0  # every client session connected, dbdiag's own included (MySQL/MariaDB)

    def clients(self, baseline: int | None = None) -> int:
        """The workload's clients as this engine can count them: connected sessions where dbdiag's own are
        known apart (PostgreSQL), else (MySQL/MariaDB: ``sessions`` = -1) the sessions connected beyond
        ``baseline`` (those before a load command started: dbdiag's own and idle ones), at least those
        running a statement."""
        if self.sessions >= 0:
            return self.sessions
        return max(self.busy, self.connected - baseline) if baseline is not None else self.busy


def delta(a: Reading, b: Reading, key: str) -> float | None:
    """Increase of counter ``key`` from ``a`` to ``b``; a decrease (reset, restart) counts from 0."""
    x, y = a.counters.get(key), b.counters.get(key)
    if x is None or y is None:
        return None
    return y - x if y >= x else y


@dataclass(frozen=True)
class WindowCounts:
    """What the server counted in one window, dbdiag's own reads taken out.

    ``rule``: how transactions were counted, in words. ``own_transactions``: what was subtracted.
    """

    transactions: float
    statements: float | None
    busy_ms: float | None
    own_transactions: float
    rule: str
    raw: float = 0.0  # what the server counted, dbdiag's own reads included
    own_estimate: float = 0.0  # dbdiag's reads in the window as estimated (own_transactions is at most raw)
