"""Parsers of the INNODB STATUS sections dbdiag reads, one function per section, registered in :data:`PARSERS`.

Each parser gets the stripped lines under its section's heading and fills a
:class:`~collectors.mysql.innodb_lines.Reader`; what each version prints is in
the table of :mod:`collectors.mysql.innodb_status`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from collectors.mysql.innodb_lines import DEC, MAX_TOKEN_CHARS, NUM, Reader, Rule, apply_rules, rule

__all__ = ["PARSERS"]


_HEADER_RULES = (
    rule(r"^Per second averages", rf"Per second averages calculated from the last {NUM} seconds?$",
          "header.per_second_averages_seconds"),
)


def _parse_header(lines: Sequence[str], reader: Reader) -> None:
    apply_rules(lines, _HEADER_RULES, reader)


_RW_LOCK = re.compile(rf"(RW-shared|RW-excl(?:usive)?|RW-sx) spins {NUM}, (?:rounds {NUM}, )?OS waits {NUM}")
_SPIN_PER_WAIT = re.compile(rf"{DEC} (mutex|RW-shared|RW-excl(?:usive)?|RW-sx)\b")
# Some forks spell out "RW-exclusive"; it is the same lock mode.
_LOCK_KEY = {"mutex": "mutex", "RW-shared": "rw_shared", "RW-excl": "rw_excl", "RW-exclusive": "rw_excl",
             "RW-sx": "rw_sx"}
_MUTEX_RULE = rule(r"^Mutex spin waits", rf"Mutex spin waits {NUM}, rounds {NUM}, OS waits {NUM}$",
                    "semaphores.mutex_spin_waits", "semaphores.mutex_spin_rounds", "semaphores.mutex_os_waits")


def _parse_semaphores(lines: Sequence[str], reader: Reader) -> None:
    """Read SEMAPHORES; MariaDB 10.6+ prints the heading with nothing under it."""
    apply_rules(lines, (_MUTEX_RULE,), reader)
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


def _read_wait_array(line: str, reader: Reader) -> None:
    # One line per sync array (and 5.6 puts both counts on one line): sum them.
    found = False
    for label in ("reservation", "signal"):
        match = re.search(rf"{label} count {NUM}", line)
        if match:
            reader.add(f"semaphores.os_wait_array_{label}_count", match.group(1), line)
            found = True
    if not found:
        reader.bad(line, "the OS wait array counts")


def _read_rw_locks(line: str, reader: Reader) -> None:
    matches = list(_RW_LOCK.finditer(line))
    if not matches:
        reader.bad(line, "rw-lock spin counts")
    for match in matches:
        key = _LOCK_KEY[match.group(1)]
        for suffix, token in zip(("spins", "rounds", "os_waits"), match.groups()[1:]):
            reader.put(f"semaphores.{key}_{suffix}", token, line)


def _read_spin_rounds(text: str, reader: Reader) -> None:
    matches = list(_SPIN_PER_WAIT.finditer(text))
    if not matches:
        reader.bad(text, "spin rounds per wait")
    for match in matches:
        reader.put(f"semaphores.spin_rounds_per_wait_{_LOCK_KEY[match.group(2)]}", match.group(1), text)


_TRANSACTION_RULES = (
    # MySQL <= 5.5 printed ids in hex; such a line is reported, not misread.
    rule(r"^Trx id counter\b", rf"Trx id counter {NUM}$", "transactions.trx_id_counter"),
    # Anchored loosely: a wrapped "... state: running but\nidle History list length N" happens.
    rule(r"History list length\b", rf"(?:.*\s)?History list length {NUM}$", "transactions.history_list_length"),
)


def _parse_transactions(lines: Sequence[str], reader: Reader) -> None:
    # Only the lines before the per-session list: the list quotes user SQL.
    head = []
    for line in lines:
        if line.startswith("LIST OF TRANSACTIONS") or line.startswith("---TRANSACTION"):
            break
        head.append(line)
    apply_rules(head, _TRANSACTION_RULES, reader)


_FILE_IO_RULES = (
    rule(r"^Pending flushes \(fsync\) log", rf"Pending flushes \(fsync\) log: {NUM}; buffer pool: {NUM}$",
          "file_io.pending_fsyncs_log", "file_io.pending_fsyncs_buffer_pool"),
    # MariaDB 10.8+: only the tablespace count (fil_n_pending_tablespace_flushes).
    rule(r"^Pending flushes \(fsync\):", rf"Pending flushes \(fsync\): {NUM}$",
          "file_io.pending_fsyncs_buffer_pool"),
    rule(r"OS file reads", rf"{NUM} OS file reads, {NUM} OS file writes, {NUM} OS fsyncs$",
          "file_io.os_file_reads", "file_io.os_file_writes", "file_io.os_fsyncs"),
    rule(r"avg bytes/read", rf"{DEC} reads/s, {NUM} avg bytes/read, {DEC} writes/s, {DEC} fsyncs/s$",
          "file_io.reads_per_sec", "file_io.avg_bytes_per_read", "file_io.writes_per_sec",
          "file_io.fsyncs_per_sec"),
)


def _parse_file_io(lines: Sequence[str], reader: Reader) -> None:
    apply_rules(lines, _FILE_IO_RULES, reader)


def _lsn_rule(label: str, name: str) -> Rule:
    return rule(rf"^{label}\b", rf"{label}\s+{NUM}$", f"log.{name}")


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
    rule(r"pending chkp writes", rf"{NUM} pending log (?:flushes|writes), {NUM} pending chkp writes$",
          "log.pending_log_flushes", "log.pending_chkp_writes"),
    rule(r"log i/o's done", rf"{NUM} log i/o's done, {DEC} log i/o's/second$",
          "log.log_ios_done", "log.log_ios_per_sec"),
)


def _parse_log(lines: Sequence[str], reader: Reader) -> None:
    apply_rules(lines, _LOG_RULES, reader)
    lsn, checkpoint = reader.values.get("log.lsn"), reader.values.get("log.last_checkpoint")
    if isinstance(lsn, int) and isinstance(checkpoint, int):
        # Subtract as ints: LSNs beyond 2**53 would lose bytes as floats.
        reader.values["log.checkpoint_age"] = lsn - checkpoint


def _pages_rule(label: str, name: str) -> Rule:
    return rule(rf"^{label}\s+\d", rf"{label}\s+{NUM}$", f"buffer_pool.{name}")


_BUFFER_POOL_RULES = (
    # 5.6 printed "Total memory allocated N; in additional pool allocated 0".
    rule(r"^Total (?:large )?memory allocated\b", rf"Total (?:large )?memory allocated {NUM}(?:;.*)?$",
          "buffer_pool.total_memory_allocated_bytes"),
    rule(r"^Dictionary memory allocated\b", rf"Dictionary memory allocated {NUM}$",
          "buffer_pool.dictionary_memory_allocated_bytes"),
    # "\s+\d" keeps Percona's "Buffer pool size, bytes N" out of the page count.
    _pages_rule("Buffer pool size", "total_pages"),
    _pages_rule("Free buffers", "free_buffers"),
    _pages_rule("Database pages", "database_pages"),
    _pages_rule("Old database pages", "old_database_pages"),
    _pages_rule("Modified db pages", "modified_db_pages"),
    _pages_rule("Pending reads", "pending_reads"),
    rule(r"^Percent of dirty pages", rf"Percent of dirty pages\(LRU & free pages\): {DEC}$",
          "buffer_pool.dirty_pages_percent"),
    rule(r"^Pending writes:", rf"Pending writes: LRU {NUM}, flush list {NUM}(?:, single page {NUM})?$",
          "buffer_pool.pending_writes_lru", "buffer_pool.pending_writes_flush_list",
          "buffer_pool.pending_writes_single_page"),
    rule(r"^Pages made young\b", rf"Pages made young {NUM}, not young {NUM}$",
          "buffer_pool.pages_made_young", "buffer_pool.pages_made_not_young"),
    rule(r"youngs/s", rf"{DEC} youngs/s, {DEC} non-youngs/s$",
          "buffer_pool.youngs_per_sec", "buffer_pool.non_youngs_per_sec"),
    rule(r"^Pages read \d", rf"Pages read {NUM}, created {NUM}, written {NUM}$",
          "buffer_pool.pages_read", "buffer_pool.pages_created", "buffer_pool.pages_written"),
    rule(r"creates/s", rf"{DEC} reads/s, {DEC} creates/s, {DEC} writes/s$",
          "buffer_pool.pages_read_per_sec", "buffer_pool.pages_created_per_sec",
          "buffer_pool.pages_written_per_sec"),
    rule(r"^Pages read ahead\b", rf"Pages read ahead {DEC}/s, evicted without access {DEC}/s",
          "buffer_pool.read_ahead_per_sec", "buffer_pool.evicted_without_access_per_sec"),
)
_HIT_RATE = re.compile(rf"Buffer pool hit rate {NUM} / {NUM}\b")


def _parse_buffer_pool(lines: Sequence[str], reader: Reader) -> None:
    """Read the totals; the per-instance copies sit in INDIVIDUAL BUFFER POOL INFO."""
    apply_rules(lines, _BUFFER_POOL_RULES, reader)
    for line in lines:
        if not line.startswith("Buffer pool hit rate"):
            continue
        match = _HIT_RATE.match(line)
        if match is None or max(len(match.group(1)), len(match.group(2))) > MAX_TOKEN_CHARS:
            reader.bad(line, "buffer_pool.hit_rate")
            continue
        hits, gets = int(match.group(1)), int(match.group(2))
        if not 0 <= hits <= gets or gets == 0:
            reader.bad(line, "buffer_pool.hit_rate (not a fraction)")
        else:
            reader.values.setdefault("buffer_pool.hit_rate", hits / gets)


_ROW_COUNTS = re.compile(rf"Number of (system )?rows inserted {NUM}, updated {NUM}, deleted {NUM}, read {NUM}$")
_ROW_RATES = re.compile(rf"{DEC} inserts/s, {DEC} updates/s, {DEC} deletes/s, {DEC} reads/s$")
_ROW_RULES = (
    rule(r"queries inside InnoDB", rf"{NUM} queries inside InnoDB, {NUM} queries in queue$",
          "row_operations.queries_inside_innodb", "row_operations.queries_in_queue"),
    rule(r"read views open inside InnoDB", rf"{NUM} read views open inside InnoDB$",
          "row_operations.read_views_open"),
)


def _parse_row_operations(lines: Sequence[str], reader: Reader) -> None:
    """Read ROW OPERATIONS; a rates line belongs to the counts line just above it."""
    apply_rules(lines, _ROW_RULES, reader)
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
PARSERS: dict[str, tuple[Callable[[Sequence[str], Reader], None], str | None]] = {
    "header": (_parse_header, "header.per_second_averages_seconds"),
    "semaphores": (_parse_semaphores, None),  # legitimately empty on MariaDB 10.6+
    "transactions": (_parse_transactions, "transactions.trx_id_counter"),
    "file_io": (_parse_file_io, "file_io.os_file_reads"),
    "log": (_parse_log, "log.lsn"),
    "buffer_pool": (_parse_buffer_pool, "buffer_pool.total_pages"),
    "row_operations": (_parse_row_operations, "row_operations.read_views_open"),
}
