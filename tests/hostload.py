"""The machine's load as the tests read it themselves (/proc/stat, /proc/loadavg), never through dbdiag's collectors.

A planted test whose plant needs the machine in some state (not saturated by others, say) checks that state
with this independent evidence, and fails with it as the reason when this machine could not host the plant.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path


def _busy_total() -> tuple[float, float]:
    """Busy and total CPU time of the whole machine since boot, in ticks (the ``cpu`` line of /proc/stat;
    idle and iowait are not busy, guest time is already inside user)."""
    f = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (f + [0.0] * 8)[:8]
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def loadavg() -> float:
    """The 1-minute load average (/proc/loadavg)."""
    return float(Path("/proc/loadavg").read_text().split()[0])


def host_busy(seconds: float) -> tuple[float, float]:
    """Share (0-1) of all CPUs' time that was busy over the next ``seconds``, and the 1-minute load average
    at the end."""
    b0, t0 = _busy_total()
    time.sleep(seconds)
    b1, t1 = _busy_total()
    return ((b1 - b0) / (t1 - t0) if t1 > t0 else 0.0), loadavg()


class HostSampler:
    """Samples /proc/stat in a thread every ``every_s`` seconds (wall-clock time of each sample kept), so that a
    test can tell how busy the machine was over any window of a run it started (``busy(t0, t1)``)."""

    def __init__(self, every_s: float = 0.25) -> None:
        self.every_s = every_s
        self.samples: list[tuple[float, float, float, float]] = []  # (unix s, busy ticks, total ticks, load)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HostSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while True:
            self.samples.append((time.time(), *_busy_total(), loadavg()))
            if self._stop.wait(self.every_s):
                return

    def busy(self, t0: float, t1: float) -> tuple[float | None, float | None]:
        """Share of all CPUs' time busy between the samples nearest inside [t0, t1] (None: fewer than 2), and
        the highest 1-minute load average sampled there."""
        inside = [s for s in self.samples if t0 <= s[0] <= t1]
        if len(inside) < 2 or inside[-1][2] <= inside[0][2]:
            return None, max((s[3] for s in inside), default=None)
        return (inside[-1][1] - inside[0][1]) / (inside[-1][2] - inside[0][2]), max(s[3] for s in inside)


def describe(load: tuple[float | None, float | None]) -> str:
    """A (busy share, load average) pair of :func:`host_busy` or :meth:`HostSampler.busy`, for a message."""
    busy, avg = load
    cpus = os.cpu_count() or 1
    b = "unknown" if busy is None else f"{100 * busy:.0f}% of {cpus} CPUs busy"
    return f"{b} by /proc/stat, load average {'unknown' if avg is None else f'{avg:g}'}"
