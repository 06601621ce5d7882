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
SUB_BITS = 11             # an HDR histogram of DIGITS=3 from 1 µs: 2,048 sub-buckets, exact below ...
BUCKETED_FROM = 1 << SUB_BITS  # ... 2,048 µs (tests/unit/test_hist_record.py holds bucket() to HdrHistogram's)
PERCENTILES = {"p50": 50.0, "p95": 95.0, "p99": 99.0, "p999": 99.9}


def fold(latencies_ns: Iterable[int]) -> dict[int, int]:
    """Raw nanosecond latencies -> {µs: count} (µs at least 1), one key per HDR bucket (:func:`bucket`)."""
    c = Counter([v // 1000 for v in latencies_ns])
    if 0 in c:
        c[1] += c.pop(0)
    if not c or max(c) < BUCKETED_FROM:
        return dict(c)
    out: dict[int, int] = {}
    get = out.get
    for us, n in c.items():
        if us >= BUCKETED_FROM:
            s = us.bit_length() - SUB_BITS
            us = us >> s << s
        out[us] = get(us, 0) + n
    return out


def bucket(us: int) -> int:
    """The lowest value of ``us``'s bucket in the histograms here (3 significant digits: exact below 2,048 µs,
    then buckets of 2, 4, 8... µs). Recording it records what recording ``us`` would (the same bucket: the
    same counts, percentiles, min, max and encoding), so the clients send one key per bucket: at 200
    clients of 20 ms transactions, 16 times fewer keys for the orchestrator to merge and record (issue 26)."""
    if us < BUCKETED_FROM:
        return us
    s = us.bit_length() - SUB_BITS
    return us >> s << s


def new() -> HdrHistogram:
    return HdrHistogram(LOWEST_US, HIGHEST_US, DIGITS)


def record(h: HdrHistogram, counts: Mapping[int, int]) -> None:
    """Add sparse {µs: count} into ``h`` (values above an hour are clamped), as ``h.record_value(us, n)`` for
    each would, with HdrHistogram's index arithmetic inline: its record_value is five Python calls a value,
    and the orchestrator records each interval's merged counts (a few thousand distinct values a second at
    tens of thousands of transactions a second) into the step's, the statements' and the interval's
    histograms: 0.07 of a core at 200 clients (issue 26), a third of what the clients themselves used.
    tests/unit/test_hist_record.py holds it equal to record_value."""
    try:
        cnt, mask, unit, half_mag = h.counts, h.sub_bucket_mask, h.unit_magnitude, h.sub_bucket_half_count_magnitude
        half, length = h.sub_bucket_half_count, h.counts_len
    except AttributeError:  # another hdrh layout: its own method
        for us, n in counts.items():
            h.record_value(min(max(int(us), LOWEST_US), HIGHEST_US), int(n))
        return
    total, lo, hi = 0, h.min_value, h.max_value
    shift = unit + half_mag + 1
    for us, n in counts.items():
        v = min(max(int(us), LOWEST_US), HIGHEST_US)
        b = (v | mask).bit_length() - shift  # _get_bucket_index
        i = ((b + 1) << half_mag) + (v >> (b + unit)) - half  # _counts_index(b, _get_sub_bucket_index(v, b))
        if 0 <= i < length:
            n = int(n)
            cnt[i] += n
            total += n
            lo = v if v < lo else lo
            hi = v if v > hi else hi
    h.total_count += total
    h.min_value, h.max_value = lo, hi


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
    per interval is 188 KB that only the cyclic collector frees, see workloads.steps.merge)."""
    into.reset()
    record(into, counts)
    return encode(into)


def decode(text: str) -> HdrHistogram:
    return HdrHistogram.decode(text)
