"""Parse MySQL / MariaDB ``SHOW ENGINE INNODB STATUS`` text into numbers.

Public API: :func:`parse_innodb_status` returns an :class:`InnodbStatus` whose
``fields`` maps flat, stable names (``<section>.<metric>``, declared once in
:data:`FIELD_SPECS` with unit and counter/gauge kind) to floats, and whose
``errors`` maps a section name (the field prefix: ``header``, ``semaphores``,
``transactions``, ``file_io``, ``log``, ``buffer_pool``, ``row_operations``)
to one line saying why that section gave nothing or less than it should.
Parsing never raises on odd text (only :class:`TypeError` for a non-str);
each section is parsed on its own so one bad section does not lose the rest.
A field that the server did not print is absent, never zero.

Parsing needs nothing; producing the text needs the ``PROCESS`` privilege.

What each version prints, read from the saved outputs in
``tests/data/innodb_status/`` (``SOURCES.md`` says where each came from).
"x" = printed, "-" = not printed, so the field is absent:

=====================================  ====  ====  ====  =====  =====  =====
field (group)                          My    My    My    Maria  Maria  Maria
                                       5.7   8.0   8.4   10.5   10.6   10.11
                                       [1]   [2]   [3]                 11.1
=====================================  ====  ====  ====  =====  =====  =====
header.per_second_averages_seconds     x     x     x     x      x      x
semaphores.os_wait_array_*,            x     x     x     x      -      -
rw_{shared,excl,sx}_*,
spin_rounds_per_wait_rw_*
semaphores.mutex_*,                    x     -     -     -      -      -
spin_rounds_per_wait_mutex
transactions.*                         x     x     x     x      x      x
file_io.pending_fsyncs_buffer_pool,    x     x     x     x      x      x
os_*, *_per_sec, avg_bytes_per_read
file_io.pending_fsyncs_log             x     x     x     x      x      -
log.lsn, flushed_up_to,                x     x     x     x      x      x
pages_flushed_up_to, last_checkpoint,
checkpoint_age
log.buffer_assigned_up_to,             -     x     x     -      -      -
buffer_completed_up_to, written_up_to,
added_dirty_pages_up_to
log.min_file_id, max_file_id           -     x     -     -      -      -
log.pending_log_flushes,               x     -     -     x      x      -
pending_chkp_writes
log.log_ios_done, log_ios_per_sec      x     x     x     x      x      -
buffer_pool.* (sizes, pages, pending,  x     x     x     x      x      x
young, rates, hit_rate [4])
buffer_pool.pending_writes_single_page x     x     x     -      -      -
buffer_pool.dirty_pages_percent        -     -     -     x      x      x
row_operations.read_views_open         x     x     x     x      x      x
row_operations.queries_inside_innodb,  x     x     x     -      -      -
queries_in_queue
row_operations.rows_*, *_per_sec       x     x     x     x      x      -
row_operations.system_rows_*,          -     x     -     x      x      -
system_*_per_sec
=====================================  ====  ====  ====  =====  =====  =====

[1] The 5.7 Reference Manual example (a 2014 5.7.5 development build; the
    manual wraps long lines). Its "Mutex spin waits" line comes from 5.6-era
    code: the 8.0 source prints only the RW-lock lines, so MySQL did not drop
    the spin lines in 8.0, only the mutex one.
[2] A real 8.0.30+ capture: 8.0.30 added "Log minimum/maximum file id is"
    when the redo log became ``#innodb_redo/`` files; there are no other
    redo-capacity lines in this output.
[3] No genuine 8.4 capture was found; the saved file is the example the 8.4
    Reference Manual prints, which dates from 2018 (pre-8.0.30) and so lacks
    the file id and system-row lines that real 8.4 servers print.
[4] ``buffer_pool.hit_rate`` is absent when the server says "No buffer pool
    page gets since the last printout" (an idle window).

MariaDB 10.6 prints the SEMAPHORES heading with no counters under it.
Between 10.6 and 10.11 (the 10.8 redo log rewrite) LOG lost "pending log
flushes" and "log i/o's", FILE I/O merged its fsync counts into one
"Pending flushes (fsync): N", and ROW OPERATIONS kept only the read views. "Total large memory allocated" is
0 on MySQL 8.0, where the counter is no longer kept.

Notes on the numbers:

* ``buffer_pool.hit_rate`` is the server's own "hit rate X / 1000" over the
  ``header.per_second_averages_seconds`` window, as a fraction.
* ``*_per_sec`` values are averages over that same window, which is the time
  since the previous printout by *anyone* (monitor thread or another client),
  so take rates from your own counter deltas when you can.
* ``semaphores.os_wait_array_*`` are summed over all sync arrays
  (``innodb_sync_array_size`` > 1 prints one line per array).
* ``file_io.pending_fsyncs_buffer_pool`` is the tablespace (data file) flush
  count: MariaDB 10.8+ prints it alone as "Pending flushes (fsync): N".
* The server cuts output over 1 MB by removing the middle of the transaction
  list (it writes ``...truncated...``); the sections we read survive that.
  Text cut at its end (no ``END OF INNODB MONITOR OUTPUT``) keeps the complete
  lines of the last section and names that section in ``errors``.
* The TRANSACTIONS and deadlock sections quote users' SQL, which could forge a
  section heading; a heading seen twice makes that section an error rather
  than trusting either copy.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "FIELD_NAMES",
    "FIELD_SPECS",
    "SECTIONS",
    "FieldSpec",
    "InnodbStatus",
    "parse_innodb_status",
]


@dataclass(frozen=True)
class InnodbStatus:
    """Numbers read from one ``SHOW ENGINE INNODB STATUS`` text.

    ``fields``: field name -> value, in the unit given by :data:`FIELD_SPECS`.
    ``errors``: section name -> one-line reason it is missing or incomplete.
    """

    fields: dict[str, float]
    errors: dict[str, str]


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

_END = "END OF INNODB MONITOR OUTPUT"
# Every heading any supported version prints, so that sections we do not read
# (deadlock, insert buffer, per-instance pools) still end the one before them.
_HEADINGS = frozenset({
    "BACKGROUND THREAD", "LATEST FOREIGN KEY ERROR", "LATEST DETECTED DEADLOCK",
    "INSERT BUFFER AND ADAPTIVE HASH INDEX", "INDIVIDUAL BUFFER POOL INFO", _END,
    *(title for key, title in SECTIONS.items() if key != "header"),
})

# Real values fit in 64 bits; bound the token length so a fuzzed 5,000-digit
# "number" cannot hit int()'s digit limit or become float("inf").
_MAX_TOKEN_CHARS = 24
_NUM = r"(\d+)"
_DEC = r"(\d+(?:\.\d+)?)"


class _Reader:
    """Collects one section's values and the first problem met in it."""

    def __init__(self) -> None:
        self.values: dict[str, int | float] = {}
        self.problem: str | None = None

    def bad(self, line: str, what: str) -> None:
        """Remember the first line that looked like ``what`` but did not parse."""
        if self.problem is None:
            shown = line if len(line) <= 80 else line[:77] + "..."
            self.problem = f"cannot read {what} from line {shown!r}"

    def put(self, name: str, token: str | None, line: str) -> None:
        """Store ``token`` (digits, maybe with a decimal part) as ``name``; first one wins."""
        if token is None or name in self.values:
            return
        if len(token) > _MAX_TOKEN_CHARS:
            self.bad(line, f"{name} (number too long)")
            return
        self.values[name] = float(token) if "." in token else int(token)

    def add(self, name: str, token: str, line: str) -> None:
        """Add ``token`` to ``name`` (for values printed once per sync array)."""
        if len(token) > _MAX_TOKEN_CHARS:
            self.bad(line, f"{name} (number too long)")
            return
        self.values[name] = self.values.get(name, 0) + int(token)


@dataclass(frozen=True)
class _Rule:
    """A line that ``detect`` recognises must match ``pattern``; its groups fill ``names``."""

    detect: re.Pattern[str]
    pattern: re.Pattern[str]
    names: tuple[str, ...]


def _rule(detect: str, pattern: str, *names: str) -> _Rule:
    return _Rule(re.compile(detect), re.compile(pattern), names)


def _apply(lines: Sequence[str], rules: Sequence[_Rule], reader: _Reader) -> None:
    """Fill ``reader`` from every line that one of ``rules`` recognises."""
    for line in lines:
        for rule in rules:
            if not rule.detect.search(line):
                continue
            match = rule.pattern.match(line)
            if match is None:
                reader.bad(line, rule.names[0])
            else:
                for name, token in zip(rule.names, match.groups()):
                    reader.put(name, token, line)
            break


_HEADER_RULES = (
    _rule(r"^Per second averages", rf"Per second averages calculated from the last {_NUM} seconds?$",
          "header.per_second_averages_seconds"),
)


def _parse_header(lines: Sequence[str], reader: _Reader) -> None:
    _apply(lines, _HEADER_RULES, reader)


_RW_LOCK = re.compile(rf"(RW-shared|RW-excl(?:usive)?|RW-sx) spins {_NUM}, (?:rounds {_NUM}, )?OS waits {_NUM}")
_SPIN_PER_WAIT = re.compile(rf"{_DEC} (mutex|RW-shared|RW-excl(?:usive)?|RW-sx)\b")
# Some forks spell out "RW-exclusive"; it is the same lock mode.
_LOCK_KEY = {"mutex": "mutex", "RW-shared": "rw_shared", "RW-excl": "rw_excl", "RW-exclusive": "rw_excl",
             "RW-sx": "rw_sx"}
_MUTEX_RULE = _rule(r"^Mutex spin waits", rf"Mutex spin waits {_NUM}, rounds {_NUM}, OS waits {_NUM}$",
                    "semaphores.mutex_spin_waits", "semaphores.mutex_spin_rounds", "semaphores.mutex_os_waits")


def _parse_semaphores(lines: Sequence[str], reader: _Reader) -> None:
    """Read SEMAPHORES; MariaDB 10.6+ prints the heading with nothing under it."""
    _apply(lines, (_MUTEX_RULE,), reader)
    for index, line in enumerate(lines):
        if line.startswith("OS WAIT ARRAY INFO:"):
            _read_wait_array(line, reader)
        elif line.startswith("RW-"):
            _read_rw_locks(line, reader)
        elif line.startswith("Spin rounds per wait:"):
            # The 5.7 manual's sample wraps this line after a comma; join it back.
            text = line
            for extra in lines[index + 1:index + 3]:
                if not text.endswith(","):
                    break
                text = f"{text} {extra}"
            _read_spin_rounds(text, reader)


def _read_wait_array(line: str, reader: _Reader) -> None:
    # One line per sync array (and 5.6 puts both counts on one line): sum them.
    found = False
    for label in ("reservation", "signal"):
        match = re.search(rf"{label} count {_NUM}", line)
        if match:
            reader.add(f"semaphores.os_wait_array_{label}_count", match.group(1), line)
            found = True
    if not found:
        reader.bad(line, "the OS wait array counts")


def _read_rw_locks(line: str, reader: _Reader) -> None:
    matches = list(_RW_LOCK.finditer(line))
    if not matches:
        reader.bad(line, "rw-lock spin counts")
    for match in matches:
        key = _LOCK_KEY[match.group(1)]
        for suffix, token in zip(("spins", "rounds", "os_waits"), match.groups()[1:]):
            reader.put(f"semaphores.{key}_{suffix}", token, line)


def _read_spin_rounds(text: str, reader: _Reader) -> None:
    matches = list(_SPIN_PER_WAIT.finditer(text))
    if not matches:
        reader.bad(text, "spin rounds per wait")
    for match in matches:
        reader.put(f"semaphores.spin_rounds_per_wait_{_LOCK_KEY[match.group(2)]}", match.group(1), text)


_TRANSACTION_RULES = (
    # MySQL <= 5.5 printed ids in hex; such a line is reported, not misread.
    _rule(r"^Trx id counter\b", rf"Trx id counter {_NUM}$", "transactions.trx_id_counter"),
    # Anchored loosely: a wrapped "... state: running but\nidle History list length N" happens.
    _rule(r"History list length\b", rf"(?:.*\s)?History list length {_NUM}$", "transactions.history_list_length"),
)


def _parse_transactions(lines: Sequence[str], reader: _Reader) -> None:
    # Only the lines before the per-session list: the list quotes user SQL.
    head = []
    for line in lines:
        if line.startswith("LIST OF TRANSACTIONS") or line.startswith("---TRANSACTION"):
            break
        head.append(line)
    _apply(head, _TRANSACTION_RULES, reader)


_FILE_IO_RULES = (
    _rule(r"^Pending flushes \(fsync\) log", rf"Pending flushes \(fsync\) log: {_NUM}; buffer pool: {_NUM}$",
          "file_io.pending_fsyncs_log", "file_io.pending_fsyncs_buffer_pool"),
    # MariaDB 10.8+: only the tablespace count (fil_n_pending_tablespace_flushes).
    _rule(r"^Pending flushes \(fsync\):", rf"Pending flushes \(fsync\): {_NUM}$",
          "file_io.pending_fsyncs_buffer_pool"),
    _rule(r"OS file reads", rf"{_NUM} OS file reads, {_NUM} OS file writes, {_NUM} OS fsyncs$",
          "file_io.os_file_reads", "file_io.os_file_writes", "file_io.os_fsyncs"),
    _rule(r"avg bytes/read", rf"{_DEC} reads/s, {_NUM} avg bytes/read, {_DEC} writes/s, {_DEC} fsyncs/s$",
          "file_io.reads_per_sec", "file_io.avg_bytes_per_read", "file_io.writes_per_sec",
          "file_io.fsyncs_per_sec"),
)


def _parse_file_io(lines: Sequence[str], reader: _Reader) -> None:
    _apply(lines, _FILE_IO_RULES, reader)


def _lsn_rule(label: str, name: str) -> _Rule:
    return _rule(rf"^{label}\b", rf"{label}\s+{_NUM}$", f"log.{name}")


_LOG_RULES = (
    _lsn_rule("Log sequence number", "lsn"),
    _lsn_rule("Log buffer assigned up to", "buffer_assigned_up_to"),
    _lsn_rule("Log buffer completed up to", "buffer_completed_up_to"),
    _lsn_rule("Log written up to", "written_up_to"),
    _lsn_rule("Log flushed up to", "flushed_up_to"),
    _lsn_rule("Added dirty pages up to", "added_dirty_pages_up_to"),
    _lsn_rule("Pages flushed up to", "pages_flushed_up_to"),
    _lsn_rule("Last checkpoint at", "last_checkpoint"),
    _lsn_rule("Log minimum file id is", "min_file_id"),
    _lsn_rule("Log maximum file id is", "max_file_id"),
    # 5.6 said "pending log writes" for the same counter 5.7 renamed to flushes.
    _rule(r"pending chkp writes", rf"{_NUM} pending log (?:flushes|writes), {_NUM} pending chkp writes$",
          "log.pending_log_flushes", "log.pending_chkp_writes"),
    _rule(r"log i/o's done", rf"{_NUM} log i/o's done, {_DEC} log i/o's/second$",
          "log.log_ios_done", "log.log_ios_per_sec"),
)


def _parse_log(lines: Sequence[str], reader: _Reader) -> None:
    _apply(lines, _LOG_RULES, reader)
    lsn, checkpoint = reader.values.get("log.lsn"), reader.values.get("log.last_checkpoint")
    if isinstance(lsn, int) and isinstance(checkpoint, int):
        # Subtract as ints: LSNs beyond 2**53 would lose bytes as floats.
        reader.values["log.checkpoint_age"] = lsn - checkpoint


def _pages_rule(label: str, name: str) -> _Rule:
    return _rule(rf"^{label}\s+\d", rf"{label}\s+{_NUM}$", f"buffer_pool.{name}")


_BUFFER_POOL_RULES = (
    # 5.6 printed "Total memory allocated N; in additional pool allocated 0".
    _rule(r"^Total (?:large )?memory allocated\b", rf"Total (?:large )?memory allocated {_NUM}(?:;.*)?$",
          "buffer_pool.total_memory_allocated_bytes"),
    _rule(r"^Dictionary memory allocated\b", rf"Dictionary memory allocated {_NUM}$",
          "buffer_pool.dictionary_memory_allocated_bytes"),
    # "\s+\d" keeps Percona's "Buffer pool size, bytes N" out of the page count.
    _pages_rule("Buffer pool size", "total_pages"),
    _pages_rule("Free buffers", "free_buffers"),
    _pages_rule("Database pages", "database_pages"),
    _pages_rule("Old database pages", "old_database_pages"),
    _pages_rule("Modified db pages", "modified_db_pages"),
    _pages_rule("Pending reads", "pending_reads"),
    _rule(r"^Percent of dirty pages", rf"Percent of dirty pages\(LRU & free pages\): {_DEC}$",
          "buffer_pool.dirty_pages_percent"),
    _rule(r"^Pending writes:", rf"Pending writes: LRU {_NUM}, flush list {_NUM}(?:, single page {_NUM})?$",
          "buffer_pool.pending_writes_lru", "buffer_pool.pending_writes_flush_list",
          "buffer_pool.pending_writes_single_page"),
    _rule(r"^Pages made young\b", rf"Pages made young {_NUM}, not young {_NUM}$",
          "buffer_pool.pages_made_young", "buffer_pool.pages_made_not_young"),
    _rule(r"youngs/s", rf"{_DEC} youngs/s, {_DEC} non-youngs/s$",
          "buffer_pool.youngs_per_sec", "buffer_pool.non_youngs_per_sec"),
    _rule(r"^Pages read \d", rf"Pages read {_NUM}, created {_NUM}, written {_NUM}$",
          "buffer_pool.pages_read", "buffer_pool.pages_created", "buffer_pool.pages_written"),
    _rule(r"creates/s", rf"{_DEC} reads/s, {_DEC} creates/s, {_DEC} writes/s$",
          "buffer_pool.pages_read_per_sec", "buffer_pool.pages_created_per_sec",
          "buffer_pool.pages_written_per_sec"),
    _rule(r"^Pages read ahead\b", rf"Pages read ahead {_DEC}/s, evicted without access {_DEC}/s",
          "buffer_pool.read_ahead_per_sec", "buffer_pool.evicted_without_access_per_sec"),
)
_HIT_RATE = re.compile(rf"Buffer pool hit rate {_NUM} / {_NUM}\b")


def _parse_buffer_pool(lines: Sequence[str], reader: _Reader) -> None:
    """Read the totals; the per-instance copies sit in INDIVIDUAL BUFFER POOL INFO."""
    _apply(lines, _BUFFER_POOL_RULES, reader)
    for line in lines:
        if not line.startswith("Buffer pool hit rate"):
            continue
        match = _HIT_RATE.match(line)
        if match is None or max(len(match.group(1)), len(match.group(2))) > _MAX_TOKEN_CHARS:
            reader.bad(line, "buffer_pool.hit_rate")
            continue
        hits, gets = int(match.group(1)), int(match.group(2))
        if not 0 <= hits <= gets or gets == 0:
            reader.bad(line, "buffer_pool.hit_rate (not a fraction)")
        else:
            reader.values.setdefault("buffer_pool.hit_rate", hits / gets)


_ROW_COUNTS = re.compile(rf"Number of (system )?rows inserted {_NUM}, updated {_NUM}, deleted {_NUM}, read {_NUM}$")
_ROW_RATES = re.compile(rf"{_DEC} inserts/s, {_DEC} updates/s, {_DEC} deletes/s, {_DEC} reads/s$")
_ROW_RULES = (
    _rule(r"queries inside InnoDB", rf"{_NUM} queries inside InnoDB, {_NUM} queries in queue$",
          "row_operations.queries_inside_innodb", "row_operations.queries_in_queue"),
    _rule(r"read views open inside InnoDB", rf"{_NUM} read views open inside InnoDB$",
          "row_operations.read_views_open"),
)


def _parse_row_operations(lines: Sequence[str], reader: _Reader) -> None:
    """Read ROW OPERATIONS; a rates line belongs to the counts line just above it."""
    _apply(lines, _ROW_RULES, reader)
    prefix: str | None = None
    for line in lines:
        if line.startswith("Number of "):
            match = _ROW_COUNTS.match(line)
            if match is None:
                reader.bad(line, "row counts")
                prefix = None
                continue
            prefix = "system_" if match.group(1) else ""
            for what, token in zip(("inserted", "updated", "deleted", "read"), match.groups()[1:]):
                reader.put(f"row_operations.{prefix}rows_{what}", token, line)
        elif "inserts/s" in line:
            match = _ROW_RATES.match(line)
            if match is None or prefix is None:
                reader.bad(line, "row rates")
                continue
            for what, token in zip(("inserts", "updates", "deletes", "reads"), match.groups()):
                reader.put(f"row_operations.{prefix}{what}_per_sec", token, line)
            prefix = None


# Section key -> (parser, field that must be present when the section is complete).
_PARSERS: dict[str, tuple[Callable[[Sequence[str], _Reader], None], str | None]] = {
    "header": (_parse_header, "header.per_second_averages_seconds"),
    "semaphores": (_parse_semaphores, None),  # legitimately empty on MariaDB 10.6+
    "transactions": (_parse_transactions, "transactions.trx_id_counter"),
    "file_io": (_parse_file_io, "file_io.os_file_reads"),
    "log": (_parse_log, "log.lsn"),
    "buffer_pool": (_parse_buffer_pool, "buffer_pool.total_pages"),
    "row_operations": (_parse_row_operations, "row_operations.read_views_open"),
}


@dataclass(frozen=True)
class _Layout:
    """Where each section's body lies in the text."""

    bodies: dict[str, list[str]]  # section key -> stripped lines under its heading
    duplicated: dict[str, int]  # section key -> times its heading appeared (if > 1)
    cut: str | None  # heading of the section the text ends inside, if no END marker
    headings: int  # headings recognised (0: this is not monitor output at all)


def _is_rule(line: str, char: str) -> bool:
    return len(line) >= 3 and line.strip(char) == ""


def _heading_at(lines: Sequence[str], index: int) -> str | None:
    """Return the heading title at ``index`` if it is framed as the server frames it."""
    title = lines[index]
    if title not in _HEADINGS or index == 0 or not _is_rule(lines[index - 1], "-"):
        return None
    if index + 1 == len(lines) or _is_rule(lines[index + 1], "-") or _is_rule(lines[index + 1], "="):
        return title
    return None


def _split(lines: list[str], ends_with_newline: bool) -> _Layout:
    """Cut the stripped lines into section bodies, noting duplicates and a cut end."""
    key_of = {title: key for key, title in SECTIONS.items() if key != "header"}
    starts: list[tuple[int, str]] = []
    ended = False
    for index in range(len(lines)):
        title = _heading_at(lines, index)
        if title == _END:
            starts.append((index, title))
            ended = True
            break
        if title is not None:
            starts.append((index, title))

    # A body runs from after a heading's lower rule to before the next heading's upper rule.
    stop = starts[0][0] - 1 if starts else len(lines)
    raw: list[tuple[str, list[str]]] = [("header", lines[:stop])]
    for (index, title), following in zip(starts, [*starts[1:], (len(lines) + 1, "")]):
        raw.append((title, lines[index + 2:following[0] - 1]))

    cut = None
    if not ended:
        cut, cut_body = raw[-1]
        if cut_body and not ends_with_newline:
            cut_body.pop()  # the last line stops mid-way; its number may be short

    bodies: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for title, body in raw:
        key = "header" if title == "header" else key_of.get(title)
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
            bodies.setdefault(key, body)
    duplicated = {key: n for key, n in counts.items() if n > 1}
    return _Layout(bodies, duplicated, cut, len(starts))


def _section_result(key: str, layout: _Layout) -> tuple[dict[str, int | float], str | None]:
    """Parse one section; return its values and the one-line error, if any."""
    heading = "header" if key == "header" else SECTIONS[key]  # as _Layout.cut names it
    title = "header (the text before the first section)" if key == "header" else SECTIONS[key]
    if key in layout.duplicated:
        return {}, (f"heading {title} appears {layout.duplicated[key]} times (quoted SQL can forge one); "
                    "section ignored")
    if layout.headings == 0:
        return {}, f"{title} not found: the text has no InnoDB monitor section headings"
    if key not in layout.bodies:
        if layout.cut is not None:
            return {}, f"section {title} not found: the text ends early, inside {layout.cut}"
        return {}, f"section {title} not found in the output"
    parser, required = _PARSERS[key]
    reader = _Reader()
    try:
        parser(layout.bodies[key], reader)
    except Exception as error:  # noqa: BLE001 - a parser bug must cost one section, not the whole sample
        return {}, f"internal error parsing {title}: {type(error).__name__}: {error}"
    if layout.cut == heading:
        return reader.values, f"section {title} is cut off (no {_END} marker); later lines are missing"
    if reader.problem is not None:
        return reader.values, f"{title}: {reader.problem}"
    if required is not None and required not in reader.values:
        return reader.values, f"section {title} is present but has no line giving {required}"
    return reader.values, None


def parse_innodb_status(text: str) -> InnodbStatus:
    """Parse the Status column of ``SHOW ENGINE INNODB STATUS`` into numbers.

    ``text`` may carry the mysql client's ``\\G`` frame or leading/trailing
    blank lines; both are ignored. Raises :class:`TypeError` if ``text`` is not
    a str, and nothing else: problems go to :attr:`InnodbStatus.errors`.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_innodb_status needs str, got {type(text).__name__}")
    lines = [line.strip() for line in text.splitlines()]
    layout = _split(lines, text.endswith(("\n", "\r")))
    fields: dict[str, float] = {}
    errors: dict[str, str] = {}
    for key in SECTIONS:
        values, error = _section_result(key, layout)
        for name, value in values.items():
            number = float(value)
            if math.isfinite(number):
                fields[name] = number
        if error is not None:
            errors[key] = error
    return InnodbStatus(fields=fields, errors=errors)
