"""buffer_pool_misses: the working set does not fit the engine's buffer pool, from its own counters.

:func:`reports.rules.waits.io_read_bound` speaks when the wait sampler sees backends waiting for data reads.
Reads from outside the pool served by the OS page cache seldom show as a wait (measured here: 0-16% of the
samples on PostgreSQL with 128 kB of shared_buffers, a fifth on a busy host), yet each costs a system call and an
8 kB copy per block. This rule
reads the pool's counters instead (PostgreSQL pg_stat_database blks_read / blks_hit; InnoDB
Innodb_buffer_pool_reads / _read_requests) and names the setting, where the reads were served when the server
times them (PostgreSQL blk_read_time, track_io_timing on) and the share of the transaction they took. A step
that io_read_bound already names is left to it; io_read_bound leaves to this rule the steps whose reads the
server timed at memory speed (:func:`reports.rules.pool.page_cache_misses`), however large their read waits.
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle
from reports.model.steps import Finding, Step, num, steps, target_info
from reports.rules.cpu import CONDITION_WEIGHT
from reports.rules.pool import pool_misses, served_by_page_cache
from reports.rules.waits import cache_counters, io_read_bound


def buffer_pool_misses(b: Bundle) -> list[Finding]:
    """A finding per step whose transactions read from outside the buffer pool (see the module docstring)."""
    named = {(f.target, f.workload, f.clients) for f in io_read_bound(b)}
    out: list[Finding] = []
    for step in steps(b):
        if step.key in named or step.transactions <= 0:
            continue
        f = _misses(b, step)
        if f is not None:
            out.append(f)
    return out


def _per_table(step: Step) -> dict[str, Any]:
    """The hit ratio of each table that read from outside the pool (PostgreSQL's ``table_io``, from
    pg_statio_user_tables) and the size they would need; where the engine has no per-table counters, why not."""
    rows = step.row.table_io
    if not isinstance(rows, list):
        return {"hit_ratio_per_table": step.engine.per_table_io_hint} if step.engine.per_table_io_hint else {}
    parts, need = [], 0
    for r in rows:
        if not isinstance(r, dict):
            continue
        read = int(r.get("heap_blks_read") or 0) + int(r.get("idx_blks_read") or 0)
        hit = int(r.get("heap_blks_hit") or 0) + int(r.get("idx_blks_hit") or 0)
        if read <= 0:
            continue
        need += int(r.get("bytes") or 0)
        parts.append(f"{r.get('table')}: {100 * hit / (read + hit):.1f}% of {read + hit:,} blocks")
    if not parts:
        return {}
    return {"hit_ratio_per_table": "; ".join(parts[:5]), "would_need_bytes": need}


def _misses(b: Bundle, step: Step) -> Finding | None:
    ev = cache_counters(b, step)
    misses = pool_misses(ev)
    if misses is None:
        return None
    reads, hit = misses
    setting = step.engine.buffer_pool_setting
    value = (target_info(b, step.target).get("settings") or {}).get(setting)
    ev = {"source": f"{step.engine.stats_series}: the buffer pool's own counters over the step", **ev}
    if value is not None:
        ev[setting] = value
    ev.update(_per_table(step))
    wall_us = step.clients * step.duration * 1e6 / step.transactions
    read_ms = ev.get("read_time_ms_per_txn")
    from_cache = served_by_page_cache(ev)
    if isinstance(read_ms, (int, float)) and read_ms > 0 and from_cache is not None:
        ev["served_from"] = ("the OS page cache (reads faster than a device's)" if from_cache
                             else "the device (reads as slow as a device's)")
        impact = min(1.0, read_ms * 1000.0 / wall_us)
        ev["impact_from"] = "the server's own read time per transaction over the mean transaction's time"
    else:
        ev["served_from"] = "not known: the server does not time its reads (track_io_timing off, or InnoDB)"
        impact = CONDITION_WEIGHT * min(1.0, 1.0 - hit / 100.0)
        ev["impact_from"] = "not timed: ranked as a condition (half the share of block requests that missed)"
    title = (f"Working set larger than {setting}: {num(reads, 2)} reads from outside it per transaction, "
             f"{num(hit, 2)}% of block requests served from it")
    need = ev.get("would_need_bytes")
    size = f"about {need / 2**20:,.0f} MB, the size of the tables and indexes it read from outside it" \
        if isinstance(need, (int, float)) and need > 0 else "large enough to hold the tables and indexes the workload reads"
    advice = (f"Make {setting} {size} (currently {value if value is not None else 'unknown'}), or make queries "
              "read fewer blocks (a narrower index, fewer rows per statement).")
    return step.finding("buffer_pool_misses", "warning", title, ev, advice, impact)
