"""Declarations of the fields and sections :func:`collectors.mysql.innodb_status.parse_innodb_status` reads.

Each field is declared once, with its unit and whether it is a counter or a
gauge; the MySQL status collector turns these into its metric declarations.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FIELD_NAMES", "FIELD_SPECS", "SECTIONS", "FieldSpec"]


@dataclass(frozen=True)
class FieldSpec:
    """Declaration of one output field.

    ``unit``: count, pages, bytes, lsn (a redo log byte offset), seconds,
    per_second, fraction, percent, rounds_per_wait, id.
    ``kind``: "counter" (only grows while the server runs; take deltas) or
    "gauge" (a current value or an average over the printout window).
    """

    name: str
    unit: str
    kind: str
    description: str


def _specs(section: str, kind: str, unit: str, items: str) -> tuple[FieldSpec, ...]:
    """Declare several fields of one section, kind and unit: "name: text; ...". """
    out = []
    for item in items.split(";"):
        name, _, text = item.partition(":")
        out.append(FieldSpec(f"{section}.{name.strip()}", unit, kind, text.strip()))
    return tuple(out)


FIELD_SPECS: tuple[FieldSpec, ...] = (
    *_specs("header", "gauge", "seconds", "per_second_averages_seconds: window the per-second averages cover"),
    *_specs("semaphores", "counter", "count",
            "os_wait_array_reservation_count: sync array cells reserved to wait (all arrays);"
            "os_wait_array_signal_count: sync array signals (all arrays);"
            "mutex_spin_waits: mutex spin waits; mutex_spin_rounds: mutex spin rounds;"
            "mutex_os_waits: mutex waits that went to the OS;"
            "rw_shared_spins: shared rw-lock spins; rw_shared_rounds: shared rw-lock spin rounds;"
            "rw_shared_os_waits: shared rw-lock OS waits;"
            "rw_excl_spins: exclusive rw-lock spins; rw_excl_rounds: exclusive rw-lock spin rounds;"
            "rw_excl_os_waits: exclusive rw-lock OS waits;"
            "rw_sx_spins: shared-exclusive rw-lock spins; rw_sx_rounds: sx rw-lock spin rounds;"
            "rw_sx_os_waits: sx rw-lock OS waits"),
    *_specs("semaphores", "gauge", "rounds_per_wait",
            "spin_rounds_per_wait_mutex: mutex spin rounds per OS wait since start;"
            "spin_rounds_per_wait_rw_shared: shared rw-lock spin rounds per OS wait since start;"
            "spin_rounds_per_wait_rw_excl: exclusive rw-lock spin rounds per OS wait since start;"
            "spin_rounds_per_wait_rw_sx: sx rw-lock spin rounds per OS wait since start"),
    *_specs("transactions", "counter", "id", "trx_id_counter: next transaction id"),
    *_specs("transactions", "gauge", "count",
            "history_list_length: undo log entries (committed transactions) not yet purged"),
    *_specs("file_io", "gauge", "count",
            "pending_fsyncs_log: redo log fsyncs in progress;"
            "pending_fsyncs_buffer_pool: tablespace (data file) fsyncs in progress"),
    *_specs("file_io", "counter", "count",
            "os_file_reads: data file reads; os_file_writes: data file writes; os_fsyncs: fsync calls"),
    *_specs("file_io", "gauge", "per_second",
            "reads_per_sec: data file reads per second; writes_per_sec: data file writes per second;"
            "fsyncs_per_sec: fsync calls per second"),
    *_specs("file_io", "gauge", "bytes", "avg_bytes_per_read: mean bytes per data file read in the window"),
    *_specs("log", "counter", "lsn",
            "lsn: current log sequence number; buffer_assigned_up_to: LSN reserved in the log buffer;"
            "buffer_completed_up_to: LSN fully copied into the log buffer;"
            "written_up_to: LSN written to the redo files; flushed_up_to: LSN made durable by fsync;"
            "added_dirty_pages_up_to: LSN up to which dirty pages are in the flush lists;"
            "pages_flushed_up_to: oldest LSN of a page not yet flushed; last_checkpoint: LSN of the last checkpoint"),
    *_specs("log", "gauge", "bytes", "checkpoint_age: lsn - last_checkpoint, redo that recovery would replay"),
    *_specs("log", "gauge", "id", "min_file_id: oldest redo file id (8.0.30+); max_file_id: newest redo file id"),
    *_specs("log", "gauge", "count",
            "pending_log_flushes: redo log flushes in progress; pending_chkp_writes: checkpoint writes in progress"),
    *_specs("log", "counter", "count", "log_ios_done: redo log write I/Os"),
    *_specs("log", "gauge", "per_second", "log_ios_per_sec: redo log write I/Os per second"),
    *_specs("buffer_pool", "gauge", "bytes",
            "total_memory_allocated_bytes: memory the buffer pool allocated (0 on MySQL 8.0);"
            "dictionary_memory_allocated_bytes: data dictionary cache memory"),
    *_specs("buffer_pool", "gauge", "pages",
            "total_pages: buffer pool size; free_buffers: free pages; database_pages: pages holding data (LRU);"
            "old_database_pages: pages in the old LRU sublist; modified_db_pages: dirty pages;"
            "pending_reads: page reads in progress; pending_writes_lru: LRU flush writes pending;"
            "pending_writes_flush_list: flush-list writes pending;"
            "pending_writes_single_page: single page flushes pending"),
    *_specs("buffer_pool", "gauge", "percent", "dirty_pages_percent: dirty pages as % of LRU + free pages"),
    *_specs("buffer_pool", "counter", "pages",
            "pages_made_young: pages moved to the young sublist; pages_made_not_young: pages kept old;"
            "pages_read: pages read from disk; pages_created: pages created; pages_written: pages written"),
    *_specs("buffer_pool", "gauge", "per_second",
            "youngs_per_sec: pages made young per second; non_youngs_per_sec: pages kept old per second;"
            "pages_read_per_sec: page reads per second; pages_created_per_sec: pages created per second;"
            "pages_written_per_sec: page writes per second; read_ahead_per_sec: read-ahead pages per second;"
            "evicted_without_access_per_sec: read-ahead pages evicted unused per second"),
    *_specs("buffer_pool", "gauge", "fraction", "hit_rate: page gets served from memory in the window (0..1)"),
    *_specs("row_operations", "gauge", "count",
            "queries_inside_innodb: threads inside InnoDB; queries_in_queue: threads waiting to enter;"
            "read_views_open: open read views"),
    *_specs("row_operations", "counter", "count",
            "rows_inserted: user rows inserted; rows_updated: user rows updated; rows_deleted: user rows deleted;"
            "rows_read: user rows read; system_rows_inserted: system table rows inserted;"
            "system_rows_updated: system table rows updated; system_rows_deleted: system table rows deleted;"
            "system_rows_read: system table rows read"),
    *_specs("row_operations", "gauge", "per_second",
            "inserts_per_sec: user rows inserted per second; updates_per_sec: user rows updated per second;"
            "deletes_per_sec: user rows deleted per second; reads_per_sec: user rows read per second;"
            "system_inserts_per_sec: system rows inserted per second;"
            "system_updates_per_sec: system rows updated per second;"
            "system_deletes_per_sec: system rows deleted per second;"
            "system_reads_per_sec: system rows read per second"),
)

FIELD_NAMES: frozenset[str] = frozenset(spec.name for spec in FIELD_SPECS)

# Section key -> heading printed by the server ("header" is the text before the first heading).
SECTIONS: dict[str, str] = {
    "header": "INNODB MONITOR OUTPUT",
    "semaphores": "SEMAPHORES",
    "transactions": "TRANSACTIONS",
    "file_io": "FILE I/O",
    "log": "LOG",
    "buffer_pool": "BUFFER POOL AND MEMORY",
    "row_operations": "ROW OPERATIONS",
}
