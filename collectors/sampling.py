"""The tick loop of the 10 Hz samplers (PostgreSQL waits and blocking, MySQL / MariaDB blocking).

Each ``sample()`` call is one tick (a catalog read, at the collector's ``interval_s``); the ticks of one
:data:`WINDOW_S` window are added into a window object, and the tick that completes the window turns it
into the series record. ``stop()`` writes the part-window the run ended in and closes the session.
A subclass says how to make a window, what one tick reads and how a window becomes a record.
"""

from __future__ import annotations

import abc
import time
from typing import Any, Generic, Protocol, TypeVar

from collectors.base import Collector
from diag.core.db import Session

WINDOW_S = 1.0  # seconds of ticks folded into one record


class Window(Protocol):
    """What the loop needs of a window: when it opened (``time.monotonic()`` s) and its ticks so far."""

    t0: float
    ticks: int


W = TypeVar("W", bound=Window)


class TickSampler(Collector, Generic[W]):
    """A collector that samples many times a second and writes one record a window.

    Subclasses set ``interval_s`` (seconds between ticks), open ``self.session`` in ``start()`` and
    implement :meth:`_new_window`, :meth:`_tick` and :meth:`_record`.
    """

    session: Session | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._window: W = self._new_window()
        self._last: dict[str, float] = {}

    @abc.abstractmethod
    def _new_window(self) -> W:
        """An empty window opening now."""

    @abc.abstractmethod
    def _tick(self) -> None:
        """One sample, added into ``self._window`` (a refused or timed-out read adds nothing)."""

    @abc.abstractmethod
    def _record(self, window: W) -> dict[str, Any]:
        """The series record of a finished ``window``."""

    def _since(self, kind: str, now: float, default: float) -> float:
        """The time a sample of ``kind`` taken at ``now`` (monotonic s) stands for: seconds since the previous
        one of its kind (a slow tick stands for more), at most a window; ``default`` for the first."""
        last = self._last.get(kind)
        self._last[kind] = now
        return min(now - last, WINDOW_S) if last is not None else default

    def _flush(self) -> dict[str, Any]:
        rec = self._record(self._window)
        self._window = self._new_window()
        return rec

    def sample(self) -> dict[str, Any] | None:
        assert self.session is not None, "start() first"
        self._tick()
        # half a tick early: a window of 10 ticks at 10 Hz ends on its 10th tick, not on an 11th
        if time.monotonic() - self._window.t0 >= WINDOW_S - self.interval_s / 2:
            return self._flush()
        return None

    def stop(self) -> list[dict[str, Any]] | None:
        if self.session is None:
            return None
        try:
            return [self._flush()] if self._window.ticks else None
        finally:
            self.session.close()
            self.session = None
