"""Reads from outside the buffer pool: when they are :func:`reports.rules.cache.buffer_pool_misses`' finding
(the pool's own counters, reads the OS page cache served) rather than
:func:`reports.rules.waits.io_read_bound`'s (waits for a device). The thresholds both rules read."""

from __future__ import annotations

from typing import Any

# A read from outside the pool in one transaction of five, with under 99% of the block requests served from it:
# a pool that holds the working set serves nearly all of them once warm.
MIN_READS_PER_TXN = 0.2
MAX_HIT_PCT = 99.0
# A block read faster than this (ms) came from memory (the OS page cache), not from a device (NVMe reads take
# ~50+ µs). Per block: PostgreSQL 17+ reads up to io_combine_limit blocks in one call and times the call once,
# so a combined read from a fast device can average under it; point lookups read one block per call.
PAGE_CACHE_READ_MS = 0.03


def pool_misses(ev: dict[str, Any]) -> tuple[float, float] | None:
    """(reads from outside the pool per transaction, % of block requests served from it) of the engine's
    cache counters (``cache_counters`` evidence) when they say the working set does not fit; else None."""
    reads = ev.get("blocks_read_per_txn", ev.get("pages_read_from_disk_per_txn"))
    hit = ev.get("shared_buffers_hit_pct", ev.get("buffer_pool_hit_pct"))
    if not isinstance(reads, (int, float)) or not isinstance(hit, (int, float)):
        return None
    if reads < MIN_READS_PER_TXN or hit >= MAX_HIT_PCT:
        return None
    return float(reads), float(hit)


def served_by_page_cache(ev: dict[str, Any]) -> bool | None:
    """Whether the server's own read time says its block reads came from memory; None: it did not time them
    (InnoDB, track_io_timing off)."""
    ms = ev.get("ms_per_block_read")
    if not isinstance(ms, (int, float)) or ms <= 0:
        return None
    return ms < PAGE_CACHE_READ_MS


def page_cache_misses(ev: dict[str, Any]) -> bool:
    """The pool rule names this step's reads, timed at memory speed: io_read_bound leaves it to that rule,
    however large its read waits (a 16-block pool's page-cache reads were a fifth of the backends' time on a
    busy host, and are not reads from disk)."""
    return pool_misses(ev) is not None and served_by_page_cache(ev) is True
