"""One progress bar for a whole sweep: every target x workload x client-count step, warmup included.

Progress is counted in *planned* seconds: each step is ``warmup + duration +
STEP_OVERHEAD_S`` (starting the client processes, connecting, preparing,
summing up), so the bar moves with the clock inside a step and the total is
known before the first step starts. Loading data is not planned (it is skipped
when the data are reused) and has its own bar (``workloads.load.Progress``).

On a terminal the bar is one line redrawn in place with a carriage return. Any
other line (the sysbench-like interval lines, step headers, warnings) goes
through :meth:`SweepBar.say`, which erases the bar, writes the line and draws
the bar again below it, so the two never share a line. Elsewhere (a file, a
pipe, CI logs) nothing is redrawn and no carriage return is written: each
step's header line carries the sweep's progress instead, and the sweep's end
gets one line.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import TextIO

STEP_OVERHEAD_S = 0.5   # per step, beyond warmup + duration: client start-up and the step's summary
REDRAW_S = 0.2          # at most this often on a terminal between lines
BAR_CELLS = 30          # the bar's width when the terminal is wide enough


def hms(secs: float) -> str:
    """``45s``, ``2m05s``, ``1h02m05s`` (whole seconds, rounded)."""
    s = max(int(secs + 0.5), 0)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def fraction(done_s: float, total_s: float) -> float:
    """done_s / total_s clamped to [0, 1]; an empty plan is complete."""
    if total_s <= 0:
        return 1.0
    return min(max(done_s / total_s, 0.0), 1.0)


def _floor(x: float) -> int:
    return math.floor(x + 1e-9)  # 0.29 * 100 is 28.999999999999996: that is 29%


def percent(done_s: float, total_s: float) -> int:
    """Whole percent done, rounded down: 100 only when done."""
    frac = fraction(done_s, total_s)
    return 100 if frac >= 1 else min(_floor(frac * 100), 99)


def format_bar(done_s: float, total_s: float, width: int = BAR_CELLS) -> str:
    """``[#############-----------------]  45% 1m03s/2m20s ETA 1m17s``.

    ``done_s`` of ``total_s`` planned seconds; ``width`` is the number of cells
    between the brackets (at least 1). The percentage and the cells are rounded
    down, so 100% and a full bar mean done, never "almost done".
    """
    cells = max(int(width), 1)
    frac = fraction(done_s, total_s)
    full = cells if frac >= 1 else min(_floor(frac * cells), cells - 1)
    pct = percent(done_s, total_s)
    d, t, left = _times(done_s, total_s)
    return f"[{'#' * full}{'-' * (cells - full)}] {pct:3d}% {d}/{t} ETA {left}"


def _times(done_s: float, total_s: float) -> tuple[str, str, str]:
    """Done, total and left as text; done rounds down and left rounds up, so they add up to the total."""
    total = max(total_s, 0.0)
    done = min(max(done_s, 0.0), total)
    return hms(_floor(done)), hms(total), hms(-_floor(done - total))


def is_tty(out: TextIO | None) -> bool:
    if out is None:
        return False
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError, OSError):  # closed or a stream without isatty
        return False


def _columns(out: TextIO) -> int:
    """The terminal's width: $COLUMNS, else the terminal's own, else 80 (a pty may report 0)."""
    try:
        cols = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        cols = 0
    if cols <= 0:
        try:
            cols = os.get_terminal_size(out.fileno()).columns
        except (AttributeError, ValueError, OSError):  # not a real terminal (a test's stream)
            cols = 0
    return cols if cols > 0 else 80


class SweepBar:
    """Progress of ``steps`` steps of ``step_s`` planned seconds each, written to ``out``.

    The driver calls :meth:`begin_step` / :meth:`end_step` around each step,
    :meth:`say` for every line it prints, :meth:`tick` while a step runs, and
    :meth:`hide` before others write to ``out`` (loading, the run's own notes).
    The owner calls :meth:`close` once, at the end of the sweep.
    """

    def __init__(self, out: TextIO | None, steps: int, step_s: float, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.out = out
        self.steps = max(int(steps), 0)
        self.step_s = max(float(step_s), 0.0)
        self.tty = is_tty(out)
        self.clock = clock
        self.done_steps = 0
        self.t0 = clock()
        self._step_t0: float | None = None
        self._shown = 0          # characters of the bar now on screen (0: none)
        self._visible = False    # redraw after lines (between the first step and hide/close)
        self._last_draw = -math.inf
        self._closed = False
        self._began = False      # a step has started: there is something to sum up at close

    @property
    def total_s(self) -> float:
        return self.steps * self.step_s

    def done_s(self) -> float:
        """Planned seconds done: finished steps plus the running one, capped at its plan."""
        cur = 0.0
        if self._step_t0 is not None:
            cur = min(max(self.clock() - self._step_t0, 0.0), self.step_s)
        return min(self.done_steps * self.step_s + cur, self.total_s)

    # -- the driver's side -------------------------------------------------------------

    def begin_step(self, what: str) -> None:
        """A header line for the next step (with the sweep's progress), then the bar."""
        i = self.done_steps + 1
        done, total = self.done_s(), self.total_s
        self._step_t0 = self.clock()
        self._visible = self._began = True
        d, t, left = _times(done, total)
        self.say(f"[step {i}/{self.steps} | sweep {percent(done, total)}% done, {d} of {t}, about {left} left] "
                 f"{what}")

    def end_step(self) -> None:
        self.done_steps += 1
        self._step_t0 = None
        self._draw()

    def say(self, line: str) -> None:
        """Write one whole line; on a terminal the bar is erased first and drawn again after it."""
        if self.out is None:
            return
        self._erase()
        self.out.write(line + "\n")
        if self._visible:
            self._draw()
        self.out.flush()

    def tick(self) -> None:
        """Redraw if the bar is showing and was last drawn more than REDRAW_S ago (terminal only)."""
        if self._visible and self.clock() - self._last_draw >= REDRAW_S:
            self._draw()

    def hide(self) -> None:
        """Take the bar off the screen until the next step (others are about to write)."""
        self._erase()
        self._visible = False
        if self.out is not None:
            self.out.flush()

    def close(self) -> None:
        """End of the sweep: leave the final bar on its own line (terminal) or one summary line.

        Nothing when no step started (the run failed before its first step)."""
        if self._closed or self.out is None:
            self._closed = True
            return
        self._closed = True
        self._erase()
        self._visible = False
        if not self._began:
            self.out.flush()
            return
        took = hms(self.clock() - self.t0)
        if self.tty:
            self.out.write(self._line() + f" (took {took})\n")
        else:
            pct = percent(self.done_s(), self.total_s)
            self.out.write(f"[sweep {pct}% done: {self.done_steps} of {self.steps} steps in {took}]\n")
        self.out.flush()

    # -- drawing -----------------------------------------------------------------------

    def _line(self) -> str:
        cols = _columns(self.out) if self.out is not None else 80
        i = min(self.done_steps + (1 if self._step_t0 is not None else 0), self.steps)
        done = self.done_s()

        def line(width: int) -> str:
            return f"  {format_bar(done, self.total_s, width)}  step {i}/{self.steps}"

        # One line, short of the last column: a wrapped bar could not be redrawn in place.
        width = max(min(BAR_CELLS, cols - len(line(1))), 5)
        return line(width)[: max(cols - 1, 20)]

    def _draw(self) -> None:
        if not self.tty or self.out is None or not self._visible:
            return
        line = self._line()
        pad = max(self._shown - len(line), 0)
        self.out.write("\r" + line + " " * pad)
        self.out.flush()
        self._shown = len(line)
        self._last_draw = self.clock()

    def _erase(self) -> None:
        if self._shown and self.out is not None:
            self.out.write("\r" + " " * self._shown + "\r")
            self._shown = 0
