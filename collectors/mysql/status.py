"""MySQL / MariaDB server counters: SHOW GLOBAL STATUS, SHOW ENGINE INNODB STATUS, INNODB_METRICS.

One record a second:

* ``status.<Name>``: numeric SHOW GLOBAL STATUS values, raw (counters are
  not differenced here; :mod:`collectors.rates` does that). No privilege needed.
  Every record has those of :data:`SECOND_STATUS` (what the rules, the report
  and the declared metrics read); the first record and every
  :data:`FULL_EVERY`-th have every numeric value (``status_full`` true).
* ``innodb.<section>.<field>``: SHOW ENGINE INNODB STATUS parsed by
  :func:`collectors.mysql.innodb_status.parse_innodb_status` (units in its
  ``FIELD_SPECS``). Needs PROCESS. ``innodb_errors`` ({section: reason}) is
  present only in the record where a section first fails, so a server that
  never prints a section is said once, not every second. The raw text of the
  first sample, of every 10th sample and of any sample with a new section
  error is appended to ``artifacts/innodb_status--<label>.txt`` (bounded to
  ``ARTIFACT_MAX_BYTES``) after a ``==== dbdiag ... ====`` line; the record that
  wrote it carries ``innodb_status_file`` and ``innodb_status_offset`` (byte).
* ``metrics.<name>``: enabled INFORMATION_SCHEMA.INNODB_METRICS counters about
  the redo log and fsyncs (``os_log_fsyncs``, ``log_padded``... where the server
  has them). Needs PROCESS.
* First record only: ``log_fsync_counter`` names the field that counts redo log
  fsyncs on this server and ``log_fsync_note`` says what it covers. MySQL and
  MariaDB <= 10.7 have ``Innodb_os_log_fsyncs``; MariaDB 10.8+ dropped it and
  counts redo log fsyncs inside ``Innodb_data_fsyncs`` (measured on 10.11: 300
  single-row autocommit inserts gave +301 Innodb_data_fsyncs, +301
  Innodb_log_writes, no data-file writes).
* ``parts_off`` ({part: reason and fix}) in the record after a part is switched off.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from collectors.base import CollectorContext, Metric, Probe
from collectors.mysql.common import GRANT_PROCESS, MyCollector, Parts, query_named, redact_sql_secrets, to_number
from collectors.mysql.innodb_privacy import without_literals
from collectors.mysql.innodb_status import FIELD_SPECS, parse_innodb_status
from collectors.sql import session_sql
from diag.core.bundle import safe_name
from diag.core.db import Session

ARTIFACT_EVERY = 10  # keep the raw INNODB STATUS text of every Nth sample
ARTIFACT_MAX_BYTES = 32 * 1024 * 1024

_COUNTER = "counter"
_GAUGE = "gauge"
_STATUS_METRICS = (
    ("Com_<command>", "statements", _COUNTER, "statements executed per command type (Com_insert, Com_commit...)"),
    ("Questions", "statements", _COUNTER, "statements sent by clients"),
    ("Threads_running", "threads", _GAUGE, "threads executing a statement now"),
    ("Innodb_os_log_fsyncs", "fsyncs", _COUNTER, "redo log fsyncs (MySQL; MariaDB <= 10.7)"),
    ("Innodb_data_fsyncs", "fsyncs", _COUNTER,
     "fsyncs of data files; on MariaDB 10.8+ also of the redo log (no separate counter there)"),
    ("Innodb_log_waits", "waits", _COUNTER, "times the log buffer was too small and a write waited for a flush"),
    ("Innodb_log_writes", "writes", _COUNTER, "redo log write requests to the file"),
    ("Innodb_os_log_written", "bytes", _COUNTER, "bytes written to the redo log"),
    ("Innodb_row_lock_waits", "waits", _COUNTER, "row lock waits"),
    ("Innodb_row_lock_time", "ms", _COUNTER, "time spent waiting for row locks"),
    ("Innodb_buffer_pool_reads", "pages", _COUNTER, "page reads that missed the buffer pool (went to disk)"),
    ("Innodb_buffer_pool_read_requests", "pages", _COUNTER, "logical page reads"),
    ("Innodb_buffer_pool_wait_free", "waits", _COUNTER, "waits for a free page (flushing too slow)"),
    ("Uptime", "s", _COUNTER, "server uptime (a decrease means a restart: counters reset)"),
    ("<Name>", "raw", _COUNTER, "every other numeric SHOW GLOBAL STATUS value, kept raw (every FULL_EVERY-th "
                                "record: 10 s)"),
)
# The status variables read every second: those the metrics above declare, and every one the rules, the report
# and the comparison read (Engine counters in diag/engines/mysql.py, reports/rules/*: a unit test checks that
# every "status.<Name>" they name is here). The server's other ~500 numeric values are read in full every
# FULL_EVERY-th record: parsing all ~560 rows every second was most of this collector's CPU (PyMySQL, in Python).
SECOND_STATUS = (
    "Questions", "Queries", "Threads_running", "Threads_connected", "Threads_created", "Connections", "Uptime",
    "Com_commit", "Com_rollback", "Com_select", "Com_insert", "Com_update", "Com_delete", "Com_replace",
    "Com_insert_select", "Com_update_multi", "Com_delete_multi", "Com_stmt_execute", "Com_stmt_prepare",
    "Handler_read_rnd_next", "Select_scan", "Select_full_join", "Sort_merge_passes", "Created_tmp_tables",
    "Created_tmp_disk_tables", "Innodb_os_log_fsyncs", "Innodb_data_fsyncs", "Innodb_log_waits", "Innodb_log_writes",
    "Innodb_log_write_requests", "Innodb_os_log_written", "Innodb_row_lock_waits", "Innodb_row_lock_time",
    "Innodb_row_lock_current_waits", "Innodb_deadlocks", "Innodb_buffer_pool_reads",
    "Innodb_buffer_pool_read_requests", "Innodb_buffer_pool_wait_free", "Innodb_buffer_pool_write_requests",
    "Innodb_buffer_pool_pages_dirty", "Innodb_buffer_pool_pages_free", "Innodb_buffer_pool_pages_total",
    "Innodb_buffer_pool_pages_flushed", "Innodb_checkpoint_age", "Innodb_checkpoint_max_age",
    "Innodb_history_list_length", "Innodb_data_reads", "Innodb_data_writes", "Innodb_data_read",
    "Innodb_data_written", "Innodb_pages_read", "Innodb_pages_written", "Innodb_rows_read", "Innodb_rows_inserted",
    "Innodb_rows_updated", "Innodb_rows_deleted", "Bytes_sent", "Bytes_received",
)
FULL_EVERY = 10
SECOND_STATUS_SQL = ("/* dbdiag */ SHOW GLOBAL STATUS WHERE Variable_name IN (%s)"
                     % ", ".join(f"'{n}'" for n in SECOND_STATUS))
HINTS = {
    "innodb_status": GRANT_PROCESS,
    "innodb_metrics": GRANT_PROCESS,
}


def log_fsync_counter(rec: dict[str, Any]) -> tuple[str, str]:
    """(field name, what it counts) of the best redo-log fsync counter in a status record."""
    if "status.Innodb_os_log_fsyncs" in rec:
        return "status.Innodb_os_log_fsyncs", "redo log fsyncs"
    if "metrics.os_log_fsyncs" in rec:
        return "metrics.os_log_fsyncs", "redo log fsyncs (INNODB_METRICS)"
    if "status.Innodb_data_fsyncs" in rec:
        return ("status.Innodb_data_fsyncs",
                "redo log and data file fsyncs together: this server has no separate redo log fsync counter "
                "(MariaDB 10.8+); Innodb_log_writes counts redo writes")
    return "", "no fsync counter on this server"


class InnodbStatusArchive:
    """Appends raw INNODB STATUS texts to one artifact file, bounded in size."""

    def __init__(self, artifacts: Path, label: str, max_bytes: int = ARTIFACT_MAX_BYTES,
                 keep_literals: bool = False) -> None:
        """``keep_literals``: keep the statements and record contents the texts quote (innodb_privacy)."""
        self.name = f"innodb_status--{safe_name(label)}.txt"
        self.keep_literals = keep_literals
        self.path = Path(artifacts) / self.name
        self.max_bytes = max_bytes
        self.full = False

    @property
    def relative(self) -> str:
        return f"artifacts/{self.name}"

    def append(self, text: str, t: float) -> int | None:
        """Append ``text`` after a timestamp line; its byte offset, or None once the file is full."""
        if self.full:
            return None
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
        kept = redact_sql_secrets(text if self.keep_literals else without_literals(text))
        block = f"==== dbdiag {stamp}Z t={t:.3f} ====\n{kept.rstrip()}\n"
        data = block.encode("utf-8", "replace")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        offset = self.path.stat().st_size if self.path.exists() else 0
        if offset + len(data) > self.max_bytes:
            self.full = True
            return None
        with open(self.path, "ab") as fh:
            fh.write(data)  # flushed on close, never fsynced: no extra disk load on the measured machine
        return offset


def status_record(rows: Iterable[tuple[Any, Any]]) -> dict[str, int | float]:
    """``status.<Name>`` -> number for every numeric (Variable_name, Value) pair; text values are left out."""
    out: dict[str, int | float] = {}
    for name, value in rows:
        n = to_number(value)
        if n is not None:
            out[f"status.{name}"] = n
    return out


def _status(s: Session, full: bool = True) -> dict[str, Any]:
    """``status.<Name>`` of every numeric value (``full``), or of :data:`SECOND_STATUS` only."""
    sql = session_sql(s, "global_status") if full else SECOND_STATUS_SQL
    return status_record(r[:2] for r in s.text_rows(sql))  # type: ignore[misc]


def _innodb_text(s: Session) -> str:
    rows = query_named(s, "innodb_status")
    if not rows:
        return ""
    row = rows[0]
    text = row.get("Status", list(row.values())[-1])
    return text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text or "")


def _metrics(s: Session) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in query_named(s, "innodb_metrics"):
        n = to_number(r["value"])
        if n is not None:
            out[f"metrics.{r['name']}"] = n
    return out


class MyStatusCollector(MyCollector):
    """SHOW GLOBAL STATUS (all numeric values), SHOW ENGINE INNODB STATUS parsed, INNODB_METRICS log counters.

    Works with no privilege for the status counters; INNODB STATUS and
    INNODB_METRICS need PROCESS and are switched off (said once) without it.
    """

    name = "my_status"
    interval_s = 1.0
    hints = HINTS
    metrics = (
        *(Metric(f"status.{n}", u, k, d) for n, u, k, d in _STATUS_METRICS),  # type: ignore[arg-type]
        *(Metric(f"innodb.{f.name}", f.unit, f.kind, f.description) for f in FIELD_SPECS),  # type: ignore[arg-type]
        Metric("metrics.os_log_fsyncs", "fsyncs", "counter", "INNODB_METRICS redo log fsyncs (MySQL; MariaDB <= 10.7)"),
        Metric("metrics.log_padded", "bytes", "counter",
               "INNODB_METRICS redo bytes padded to block boundaries (MySQL)"),
        Metric("metrics.<name>", "raw", "counter", "other enabled INNODB_METRICS log / fsync counters"),
    )

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.archive = InnodbStatusArchive(ctx.artifacts, ctx.target.label, keep_literals=ctx.keep_literals)
        self.n = 0
        self._said_errors: set[str] = set()

    def check(self, s: Session, parts: Parts) -> Probe:
        rec = _status(s)
        if not rec:
            return Probe(False, "SHOW GLOBAL STATUS returned nothing", "check the server")
        parts.call("innodb_status", lambda: _innodb_text(s))
        metrics = parts.call("innodb_metrics", lambda: _metrics(s)) or {}
        rec.update(metrics)
        missing = list(parts.missing())
        counter, note = log_fsync_counter(rec)
        if counter != "status.Innodb_os_log_fsyncs":
            missing.append(f"Innodb_os_log_fsyncs: absent on {s.product} {s.version_text.split('-')[0]}; "
                           f"using {counter or 'nothing'}: {note}")
        return Probe(True, missing=tuple(missing), hint=parts.hint())

    def sample(self) -> dict[str, Any]:
        s = self.session
        assert s is not None, "start() first"
        now = time.time()
        rec = _status(s, full=self.n % FULL_EVERY == 0)
        rec.update(self.parts.call("innodb_metrics", lambda: _metrics(s)) or {})
        text = self.parts.call("innodb_status", lambda: _innodb_text(s))
        if text is not None:
            self._innodb(rec, text, now)
        if self.n % FULL_EVERY == 0:
            rec["status_full"] = True
        if self.n == 0:
            rec["log_fsync_counter"], rec["log_fsync_note"] = log_fsync_counter(rec)
        self.note_parts_off(rec)
        self.n += 1
        return rec

    def _innodb(self, rec: dict[str, Any], text: str, now: float) -> None:
        parsed = parse_innodb_status(text)
        for k, v in parsed.fields.items():
            rec[f"innodb.{k}"] = v
        new_errors = {k: v for k, v in parsed.errors.items() if k not in self._said_errors}
        if new_errors:
            rec["innodb_errors"] = new_errors
            self._said_errors.update(new_errors)
        if self.n % ARTIFACT_EVERY == 0 or new_errors:
            offset = self.archive.append(text, now)
            if offset is not None:
                rec["innodb_status_file"] = self.archive.relative
                rec["innodb_status_offset"] = offset
            elif self.archive.full:
                self.parts.switch_off("innodb_status_text", f"{self.archive.relative} reached "
                                      f"{self.archive.max_bytes // 2**20} MiB; later raw texts are not kept", hint="")
