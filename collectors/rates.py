"""Rates from raw counters: the one tested place that turns counter samples into per-second values.

Collectors store raw counter values; reports call these functions. Three cases
matter: the first sample (no rate yet: ``None``), a counter reset (pg_stat_reset,
a server restart: the counter went down, so the new value is what accrued since
the reset), and a true zero (the counter did not move: ``0.0``, not ``None``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def counter_delta(prev: float | None, cur: float | None) -> float | None:
    """Increase of a monotonic counter between two samples (units of the counter).

    ``None`` when either sample is missing; after a reset (``cur < prev``) the
    counter restarted from zero, so ``cur`` is the best lower bound of the increase.
    """
    if prev is None or cur is None:
        return None
    if cur < prev:
        return float(cur)
    return float(cur) - float(prev)


def counter_rate(prev: float | None, cur: float | None, dt_s: float) -> float | None:
    """Per-second rate of a counter over ``dt_s`` seconds; ``None`` when it cannot be known."""
    d = counter_delta(prev, cur)
    if d is None or dt_s is None or dt_s <= 0:
        return None
    return d / dt_s


def series_rates(points: Sequence[tuple[float, float | None]]) -> list[tuple[float, float | None]]:
    """Rates for a series of ``(t_seconds, counter)`` points; the first point's rate is ``None``."""
    out: list[tuple[float, float | None]] = []
    prev_t: float | None = None
    prev_v: float | None = None
    for t, v in points:
        out.append((t, None if prev_t is None else counter_rate(prev_v, v, t - prev_t)))
        prev_t, prev_v = t, v
    return out


def total_delta(values: Iterable[float | None]) -> float | None:
    """Sum of increases over consecutive samples (reset-safe); ``None`` if fewer than two samples."""
    total: float | None = None
    prev: float | None = None
    first = True
    for v in values:
        if v is None:
            continue  # a missed sample: the next increase spans it
        if not first:
            d = counter_delta(prev, v)
            if d is not None:
                total = (total or 0.0) + d
        prev, first = v, False
    return total
