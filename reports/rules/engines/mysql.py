"""MySQL / MariaDB's part of the findings rules: InnoDB's lock, latch and buffer pool counters beside the wait
samples, the note on flush waits seen as thread states, and a redo log nearly full.

checkpoint_pressure: ``Innodb_checkpoint_age`` against ``Innodb_checkpoint_max_age`` of ``my_status--<label>``:
near the limit InnoDB flushes dirty pages furiously and stalls writers.
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle
from reports.model.steps import Finding, Step, num, pct, series_in_window, target_info
from reports.rules.base import counter_in_step
from reports.rules.cpu import CONDITION_WEIGHT
from reports.rules.engines.parts import RuleParts

# InnoDB starts flushing dirty pages ahead of schedule ("async" point) at 7/8
# of the maximum checkpoint age and blocks writers at the limit; at 3/4 of the
# maximum the redo log has one eighth of headroom left before that.
CHECKPOINT_AGE_SHARE = 0.75


def flush_note(source: str) -> str:
    if source == "performance_schema":
        return ""
    return ("thread state 'Commit' stands for the redo flush here: without performance_schema "
            "there are no wait events")


def lock_counters(b: Bundle, step: Step) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    stats = step.engine.stats_series
    waits = counter_in_step(b, step, stats, "status.Innodb_row_lock_waits")
    ms = counter_in_step(b, step, stats, "status.Innodb_row_lock_time")
    if waits is not None:
        ev["row_lock_waits_per_s"] = num(waits / step.duration)
    if ms is not None and step.transactions:
        ev["row_lock_time_ms_per_txn"] = num(ms / step.transactions, 2)
    d = counter_in_step(b, step, stats, "status.Innodb_deadlocks")
    if d:
        ev["deadlocks"] = round(d)
    return ev


def latch_counters(b: Bundle, step: Step) -> dict[str, Any]:
    os_waits = [counter_in_step(b, step, step.engine.stats_series, f"innodb.semaphores.{k}") for k in
                ("mutex_os_waits", "rw_shared_os_waits", "rw_excl_os_waits", "rw_sx_os_waits")]
    got = [w for w in os_waits if w is not None]
    if not got or not step.transactions:
        return {}
    return {"innodb_latch_os_waits_per_txn": num(sum(got) / step.transactions, 3)}


def cache_counters(b: Bundle, step: Step) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    txn = step.transactions
    stats = step.engine.stats_series
    reads = counter_in_step(b, step, stats, "status.Innodb_buffer_pool_reads")
    reqs = counter_in_step(b, step, stats, "status.Innodb_buffer_pool_read_requests")
    if reads is not None and reqs:
        ev["buffer_pool_hit_pct"] = num(100.0 * (1 - reads / reqs), 2)
        if txn:
            ev["pages_read_from_disk_per_txn"] = num(reads / txn, 2)
    return ev


def checkpoint_pressure(b: Bundle, step: Step) -> Finding | None:
    recs = [r for r in series_in_window(b, step.engine.stats_series, step)
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
    # the setting to raise, as the server reported it (bytes; MySQL 8.0.30+ sizes the redo log by
    # innodb_redo_log_capacity instead, which the settings record does not hold)
    size = (target_info(b, step.target).get("settings") or {}).get("innodb_log_file_size")
    if size:
        ev["innodb_log_file_size"] = str(size)
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


PARTS = RuleParts(flush_note, lock_counters, latch_counters, cache_counters, checkpoint_pressure)
