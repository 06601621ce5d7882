"""Latency histograms: clients send sparse counts, the parent merges them into HDR histograms.

A client keeps raw ``perf_counter_ns`` differences in a list on its query loop and,
once per report interval, folds them into ``{microseconds: count}`` (a C-speed
``Counter``). The parent records those counts into HDR histograms (1 µs .. 1 h,
3 significant digits): counts merge by addition, so the merge across processes
and intervals is exact up to the histogram's stated precision.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from hdrh.histogram import HdrHistogram

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
DIGITS = 3
PERCENTILES = {"p50": 50.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}


def fold(latencies_ns: Iterable[int]) -> dict[int, int]:
    """Raw nanosecond latencies -> {µs: count} (µs at least 1)."""
    c = Counter([v // 1000 for v in latencies_ns])
    if 0 in c:
        c[1] += c.pop(0)
    return dict(c)


def new() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)


def record(h: HdrHistogram, counts: Mapping[int, int]) -> None:
    """Add sparse {µs: count} into ``h`` (values above an hour are clamped)."""
    for us, n in counts.items():
        h.record_value(min(max(int(us), LOWEST_US), HIGHEST_US), int(n))


def summary_ms(h: HdrHistogram, with_p999: bool = True) -> dict[str, float]:
    """p50, p95, p99 (p99.9), max in milliseconds; zeros for an empty histogram."""
    keys = dict(PERCENTILES) if with_p999 else {k: v for k, v in PERCENTILES.items() if k != "p999"}
    if h.get_total_count() == 0:
        out = {k: 0.0 for k in keys}
        out["max"] = 0.0
        return out
    vals = h.get_percentile_to_value_dict(list(keys.values()))
    out = {k: round(vals[p] / 1000.0, 3) for k, p in keys.items()}
    out["max"] = round(h.get_max_value() / 1000.0, 3)
    return out


def encode(h: HdrHistogram) -> str:
    """The standard compressed base64 HDR encoding (readable by any HdrHistogram library)."""
    e = h.encode()
    return e.decode("ascii") if isinstance(e, bytes) else str(e)


def encode_counts(counts: Mapping[int, int], into: HdrHistogram) -> str:
    """Sparse {µs: count} as :func:`encode` text, through ``into`` (emptied first, reused: a fresh histogram
    per interval is 188 KB that only the cyclic collector frees, see workloads.merge)."""
    into.reset()
    record(into, counts)
    return encode(into)


def decode(text: str) -> HdrHistogram:
    return HdrHistogram.decode(text)
