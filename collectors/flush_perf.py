"""``perf stat`` for flush tracing: its command line, its interval output, its failures.

``perf stat -I MS -x,`` prints one CSV line per event and interval on stderr
(interval end in seconds, count, unit, event, run time, enabled %); free-text
lines are its warnings and errors. Used by :class:`collectors.flush.FlushCollector`;
parsed here so the parsing is tested on saved real outputs (tests/data/flush).
"""

from __future__ import annotations

import shutil
import subprocess
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from diag.core.errors import ParseError

MIN_INTERVAL_S = 0.1  # perf stat -I refuses less than 10 ms and warns below 100 ms
PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class PerfCount:
    """One data line of ``perf stat -I MS -x,``: ``count`` None when perf says <not supported>."""

    t_rel: float  # seconds since perf started counting (end of the interval)
    event: str
    count: int | None


def parse_perf_stat_line(line: str) -> PerfCount | None:
    """Parse one line of ``perf stat -I MS -x,`` output; None for lines that carry no count.

    Fields: interval end (s), count, unit, event, run time (ns), enabled %, ...
    ``<not counted>`` (the task did not run in the interval) is 0;
    ``<not supported>`` is None. Raises :class:`ParseError` for a line that looks
    like a count but is not one.
    """
    s = line.strip()
    if not s or s.startswith("#"):
        return None
    parts = s.split(",")
    if len(parts) < 4:
        return None  # perf's messages (warnings, errors) are free text
    try:
        t_rel = float(parts[0])
    except ValueError:
        return None
    event = parts[3].strip()
    if not event:
        raise ParseError(f"perf stat line without an event name: {s[:200]!r}")
    raw = parts[1].strip()
    if raw == "<not counted>":
        count: int | None = 0
    elif raw == "<not supported>":
        count = None
    else:
        try:
            count = int(float(raw))  # perf prints integers for tracepoints; tolerate "12.00"
        except ValueError:
            raise ParseError(f"perf stat line with a count that is not a number: {s[:200]!r}") from None
        if count < 0:
            raise ParseError(f"perf stat line with a negative count: {s[:200]!r}")
    return PerfCount(t_rel, event, count)


class IntervalAssembler:
    """Groups perf's per-event lines into intervals.

    ``feed(line)`` returns the finished interval ``(t_rel, {event: count})`` when the
    line completes one (all ``events`` seen for its timestamp) or starts the next
    (then the earlier one is returned incomplete: its missing events are absent).
    """

    def __init__(self, events: Iterable[str]) -> None:
        self.events = tuple(events)
        self._t: float | None = None
        self._counts: dict[str, int | None] = {}
        self.messages: deque[str] = deque(maxlen=20)  # perf's free-text lines, for error messages

    def feed(self, line: str) -> tuple[float, dict[str, int | None]] | None:
        pc = parse_perf_stat_line(line)
        if pc is None:
            if line.strip():
                self.messages.append(line.strip())
            return None
        out = None
        if self._t is not None and pc.t_rel != self._t:
            out = (self._t, self._counts)
            self._counts = {}
        self._t = pc.t_rel
        self._counts[pc.event] = pc.count
        if all(e in self._counts for e in self.events):
            done = (self._t, self._counts)
            self._t, self._counts = None, {}
            return done if out is None else out  # two completions at once cannot happen: one line each
        return out

    def flush(self) -> tuple[float, dict[str, int | None]] | None:
        """The interval in progress, if any (at end of output)."""
        if self._t is None:
            return None
        done = (self._t, self._counts)
        self._t, self._counts = None, {}
        return done


def perf_error_reason(stderr: str) -> str:
    """One line saying why ``perf stat`` failed (its messages span many lines)."""
    low = stderr.lower()
    if "problems finding threads of monitor" in low or "no such process" in low:
        return "a server process exited before perf could attach"
    if "can't access trace events" in low or "no permissions to read" in low:
        return "perf may not read the tracepoints (/sys/kernel/tracing is not readable for this user)"
    if "unknown tracepoint" in low:
        for line in stderr.splitlines():
            if "error:" in line.lower() and "not found" in line.lower():
                return "tracepoint missing: " + line.split(":", 1)[1].strip()
        return "a tracepoint is missing from this kernel"
    if "perf_event_paranoid" in low or "access to performance monitoring" in low:
        return "kernel.perf_event_paranoid forbids counting for this user"
    if "permission denied" in low or "operation not permitted" in low:
        return "permission denied"
    for line in stderr.splitlines():
        t = line.strip()
        if t and not t.lower().startswith(("usage:", "-", "warning")) and "\\___" not in t:
            return t
    return "perf exited with an error and no message"


def perf_stat_argv(perf: str, events: Iterable[str], pids: Iterable[int], interval_s: float) -> list[str]:
    """The ``perf stat`` command line: interval counts as CSV on stderr, counters inherited."""
    ms = max(int(MIN_INTERVAL_S * 1000), int(round(interval_s * 1000)))
    return [perf, "stat", "-e", ",".join(events), "-x", ",", "-I", str(ms),
            "-p", ",".join(str(p) for p in pids)]


def probe_perf_tracepoints(pid: int, events: list[str], perf: str = "perf") -> tuple[bool, str]:
    """Count ``events`` on ``pid`` for 0.1 s: ``(ok, reason)``. Proves both the events and the permission."""
    exe = shutil.which(perf)
    if exe is None:
        return False, "perf not found on PATH"
    argv = [exe, "stat", "-e", ",".join(events), "-x", ",", "-p", str(pid), "--", "sleep", "0.1"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"perf stat did not finish within {PROBE_TIMEOUT_S:.0f} s"
    except OSError as e:
        return False, f"cannot run perf: {e.strerror}"
    if out.returncode != 0:
        return False, perf_error_reason(out.stderr)
    return True, ""
