"""PostgreSQL's part of the findings rules: its lock and buffer counters beside the wait samples, and
checkpoints forced by WAL volume.

checkpoint_pressure: ``checkpointer.num_requested`` of ``pg_stats--<label>`` counts checkpoints requested before
checkpoint_timeout, almost always because WAL reached max_wal_size (or a manual CHECKPOINT). Each checkpoint makes
the next change of every page write a full-page image into WAL, so forced checkpoints inflate WAL and its flushes.
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle
from reports.model.steps import Finding, Step, num, series_in_window, target_info
from reports.rules.base import counter_around, counter_in_step, gauge_mean
from reports.rules.cpu import CONDITION_WEIGHT
from reports.rules.engines.parts import RuleParts, no_counters, no_note

# One checkpoint forced by WAL volume inside a measured step of seconds means
# max_wal_size is reached within seconds: at a steady load it happens again
# and again. checkpoint_timeout (30 s at least) never requests one.
MIN_REQUESTED_CHECKPOINTS = 1
# Impact: the share of the step during which checkpoints were writing or syncing
# (checkpointer write_time + sync_time; writes are spread over
# checkpoint_completion_target, so this is the time the step ran under a
# checkpoint), times CONDITION_WEIGHT.


def lock_counters(b: Bundle, step: Step) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    stats = step.engine.stats_series
    waiting = gauge_mean(series_in_window(b, stats, step), "locks.waiting")
    if waiting is not None:
        ev["waiting_lock_requests_avg"] = num(waiting)
    d = counter_in_step(b, step, stats, "db.deadlocks")
    if d:
        ev["deadlocks"] = round(d)
    return ev


def cache_counters(b: Bundle, step: Step) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    txn = step.transactions
    stats = step.engine.stats_series
    read = counter_in_step(b, step, stats, "db.blks_read")
    hit = counter_in_step(b, step, stats, "db.blks_hit")
    rtime = counter_in_step(b, step, stats, "db.blk_read_time")
    if read is not None and hit is not None and read + hit > 0:
        ev["shared_buffers_hit_pct"] = num(100.0 * hit / (read + hit), 2)
        if txn:
            ev["blocks_read_per_txn"] = num(read / txn, 2)
    if rtime and txn:
        ev["read_time_ms_per_txn"] = num(rtime / txn, 3)
    if rtime and read:  # from the counters, not the rounded figures above (reports.rules.pool)
        ev["ms_per_block_read"] = round(rtime / read, 5)
    return ev


def checkpoint_pressure(b: Bundle, step: Step) -> Finding | None:
    stats = step.engine.stats_series
    requested = counter_around(b, step, stats, "checkpointer.num_requested")
    if requested is None or requested < MIN_REQUESTED_CHECKPOINTS:
        return None
    ev: dict[str, Any] = {
        "source": "pg_stat_checkpointer / pg_stat_bgwriter and pg_stat_wal (pg_stats), counted from the sample "
                  "before the step to the one after it",
        "requested_checkpoints": round(requested),
    }
    timed = counter_around(b, step, stats, "checkpointer.num_timed")
    if timed is not None:
        ev["timed_checkpoints"] = round(timed)
    written = counter_around(b, step, stats, "checkpointer.buffers_written")
    if written is not None:
        ev["checkpoint_buffers_written"] = round(written)
    wal = counter_in_step(b, step, stats, "wal.wal_bytes")
    if wal is not None:
        ev["wal_mb_per_s"] = num(wal / step.duration / 2**20, 2)
        if step.transactions:
            ev["wal_bytes_per_txn"] = round(wal / step.transactions)
    fpi = counter_in_step(b, step, stats, "wal.wal_fpi")
    records = counter_in_step(b, step, stats, "wal.wal_records")
    if fpi is not None and records:
        ev["full_page_image_records_pct"] = num(100 * fpi / records)
        if step.transactions:
            ev["full_page_images_per_txn"] = num(fpi / step.transactions, 2)
    busy_ms = [counter_in_step(b, step, stats, f"checkpointer.{k}") for k in ("write_time", "sync_time")]
    busy = min(1.0, sum(x for x in busy_ms if x) / 1000 / step.duration)
    ev["checkpointing_pct_of_step"] = num(100 * busy)
    mws = (target_info(b, step.target).get("settings") or {}).get("max_wal_size")
    if mws:
        ev["max_wal_size"] = str(mws)
    return step.finding(
        "checkpoint_pressure", "warning",
        f"{round(requested)} checkpoint{'s' if requested >= 1.5 else ''} forced by WAL volume during the step", ev,
        "WAL reaches max_wal_size within the step, so checkpoints run back to back: each one writes every dirty "
        "buffer and makes the next change of each page log a full 8 kB image. Raise max_wal_size so that "
        "checkpoints come from checkpoint_timeout (the checkpoint log lines say 'wal' vs 'time'), and keep "
        "checkpoint_completion_target at 0.9.",
        CONDITION_WEIGHT * busy, requested=requested)


PARTS = RuleParts(no_note, lock_counters, no_counters, cache_counters, checkpoint_pressure)
