"""checkpoint_pressure: checkpoints forced by WAL volume (PostgreSQL), redo log nearly full (InnoDB).

PostgreSQL: ``checkpointer.num_requested`` of ``pg_stats--<label>`` counts
checkpoints requested before checkpoint_timeout, almost always because WAL
reached max_wal_size (or a manual CHECKPOINT). Each checkpoint makes the next
change of every page write a full-page image into WAL, so forced checkpoints
inflate WAL and its flushes. InnoDB (MariaDB): ``Innodb_checkpoint_age``
against ``Innodb_checkpoint_max_age`` of ``my_status--<label>``: near the
limit InnoDB flushes dirty pages furiously and stalls writers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from diag.bundle import Bundle
from diag.engines import MYSQL, POSTGRES
from reports.rules.base import (Finding, Step, counter_around, counter_in_step, in_window, num, pct, series, steps,
                                target_info)
from reports.rules.cpu import CONDITION_WEIGHT

# One checkpoint forced by WAL volume inside a measured step of seconds means
# max_wal_size is reached within seconds: at a steady load it happens again
# and again. checkpoint_timeout (30 s at least) never requests one.
MIN_REQUESTED_CHECKPOINTS = 1
# InnoDB starts flushing dirty pages ahead of schedule ("async" point) at 7/8
# of the maximum checkpoint age and blocks writers at the limit; at 3/4 of the
# maximum the redo log has one eighth of headroom left before that.
CHECKPOINT_AGE_SHARE = 0.75
# Impact: the share of the step during which checkpoints were writing or syncing
# (checkpointer write_time + sync_time; writes are spread over
# checkpoint_completion_target, so this is the time the step ran under a
# checkpoint), times CONDITION_WEIGHT.


def checkpoint_pressure(b: Bundle) -> list[Finding]:
    """Each step's engine judges its own checkpoint pressure (see :data:`BY_ENGINE`)."""
    out: list[Finding] = []
    for step in steps(b):
        f = BY_ENGINE[step.engine.name](b, step)
        if f is not None:
            out.append(f)
    return out


def _postgres(b: Bundle, step: Step) -> Finding | None:
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


def _innodb(b: Bundle, step: Step) -> Finding | None:
    recs = [r for r in in_window(series(b, step.engine.stats_series, step.target), step)
            if isinstance(r.get("status.Innodb_checkpoint_age"), (int, float))
            and isinstance(r.get("status.Innodb_checkpoint_max_age"), (int, float))
            and r["status.Innodb_checkpoint_max_age"] > 0]
    if not recs:
        return None
    ratios = [r["status.Innodb_checkpoint_age"] / r["status.Innodb_checkpoint_max_age"] for r in recs]
    peak = max(ratios)
    if peak < CHECKPOINT_AGE_SHARE:
        return None
    above = sum(1 for x in ratios if x >= CHECKPOINT_AGE_SHARE) / len(ratios)
    ev: dict[str, Any] = {
        "source": "Innodb_checkpoint_age / Innodb_checkpoint_max_age (SHOW GLOBAL STATUS, once a second)",
        "checkpoint_age_peak_pct_of_max": num(100 * peak),
        "seconds_above_threshold_pct": num(100 * above),
        "checkpoint_max_age_mb": num(recs[-1]["status.Innodb_checkpoint_max_age"] / 2**20),
    }
    wait_free = counter_in_step(b, step, step.engine.stats_series, "status.Innodb_buffer_pool_wait_free")
    if wait_free:
        ev["buffer_pool_wait_free"] = round(wait_free)
    log_waits = counter_in_step(b, step, step.engine.stats_series, "status.Innodb_log_waits")
    if log_waits:  # the log buffer was full and a write waited for a flush (innodb_log_buffer_size)
        ev["log_buffer_waits"] = round(log_waits)
    return step.finding(
        "checkpoint_pressure", "warning",
        f"Redo log {pct(peak)} full: InnoDB must flush pages to make room", ev,
        "The checkpoint age came close to the redo log's capacity, where InnoDB flushes dirty pages "
        "furiously and then makes writers wait. Enlarge the redo log (innodb_log_file_size on MariaDB, "
        "innodb_redo_log_capacity on MySQL 8.0.30+) and let the page cleaners keep up (innodb_io_capacity "
        "matching the disk).",
        CONDITION_WEIGHT * above, peak=peak)


# Explicit registry, keyed by Engine.name: forced checkpoints (PostgreSQL), checkpoint age (InnoDB).
BY_ENGINE: dict[str, Callable[[Bundle, Step], Finding | None]] = {POSTGRES.name: _postgres, MYSQL.name: _innodb}
