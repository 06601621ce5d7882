"""PostgreSQL cumulative statistics, sampled once a second as raw counters.

One flat record per second: pg_stat_database of the target's database
(``db.*``) and summed over every database (``alldb.*``), WAL (``wal.*``:
pg_stat_wal on 14-17, pg_stat_wal plus the ``object = 'wal'`` rows of pg_stat_io
on 18, only the WAL position on 13), background writer (``bgwriter.*``),
checkpointer (``checkpointer.*``: pg_stat_checkpointer on 17+, the checkpoint
columns of pg_stat_bgwriter before), pg_stat_io per backend type / object /
context (``io.<backend_type>.<object>.<context>.<op>``, 16+; in every
:data:`IO_EVERY`-th record only, and in the first and the last) and waiting lock
requests (``locks.waiting.*``). Counters are uncooked: rates come from
:mod:`collectors.rates`.

pg_stat_io is read at a coarser cadence because it is most of each record (268
of 359 keys on PostgreSQL 18, 9.8 of 14.6 KB) and no rule or chart reads it: in
the 1-hour soak pg_stats was 84% of the bundle and its parsing most of the
report's time (BENCHMARKS.md, Soak). Its counters stay whole (a rate over a
record without them spans the gap, :func:`collectors.rates.total_delta`).

pg_stat_statements, when installed in the target's database, is read at start
and at stop; ``stop()`` adds one record ``{"kind": "statements", ...}`` with the
top statements by execution time spent during the run (deltas).

All of it is readable by any role; only other roles' statements in
pg_stat_statements need pg_read_all_stats (part of pg_monitor). On PostgreSQL
15+ a backend flushes its counters at most once a second and when it goes
idle, so the last second of a run may show up one sample late.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Literal

from collectors.base import Collector, Metric, Probe
from collectors.pg.common import (MONITOR_HINT, describe, new_parts, open_session, plain, privileges, probe_hint,
                                  quote_ident, unsupported_reason)
from collectors.sql import MARKER, SqlUnavailable, session_sql
from diag.core.db import Session
from diag.core.errors import DbError

TICK_TIMEOUT_MS = 1000  # per-second catalog reads: small views, must never stall the sampling
IO_EVERY = 10  # pg_stat_io in every 10th record (10 s at the 1 s cadence): see the module docstring
STATEMENTS_TIMEOUT_MS = 5000  # pg_stat_statements can hold pg_stat_statements.max (5000) rows
TOP_STATEMENTS = 20
QUERY_TEXT_CHARS = 2000
MIN_STATEMENTS_VERSION = (1, 8)  # total_exec_time, wal_* columns (PostgreSQL 13's version)

# part -> SQL file name
COUNTER_PARTS = {
    "pg_stat_database": "database",
    "pg_stat_wal": "stat_wal",
    "pg_stat_bgwriter": "bgwriter",
    "pg_stat_checkpointer": "checkpointer",
    "pg_stat_io": "stat_io",
    "pg_locks": "locks",
}
IO_OPS = ("reads", "writes", "extends", "hits", "fsyncs")
LOCKTYPES = ("relation", "extend", "frozenid", "page", "tuple", "transactionid", "virtualxid", "spectoken",
             "object", "userlock", "advisory", "applytransaction")
STATEMENT_COUNTERS = ("calls", "total_exec_time", "total_plan_time", "rows", "shared_blks_hit", "shared_blks_read",
                      "shared_blks_dirtied", "shared_blks_written", "temp_blks_read", "temp_blks_written",
                      "wal_records", "wal_fpi", "wal_bytes")

_DB_FIELDS: tuple[tuple[str, str, Literal["counter", "gauge"], str], ...] = (
    ("numbackends", "count", "gauge", "backends connected"),
    ("xact_commit", "count", "counter", "transactions committed"),
    ("xact_rollback", "count", "counter", "transactions rolled back"),
    ("blks_read", "blocks", "counter", "blocks read from outside shared buffers (OS cache or disk)"),
    ("blks_hit", "blocks", "counter", "blocks found in shared buffers"),
    ("tup_returned", "rows", "counter", "rows returned by scans"),
    ("tup_fetched", "rows", "counter", "rows fetched by index scans"),
    ("tup_inserted", "rows", "counter", "rows inserted"),
    ("tup_updated", "rows", "counter", "rows updated"),
    ("tup_deleted", "rows", "counter", "rows deleted"),
    ("conflicts", "count", "counter", "queries cancelled by recovery conflicts (standby)"),
    ("temp_files", "count", "counter", "temporary files created"),
    ("temp_bytes", "bytes", "counter", "bytes written to temporary files"),
    ("deadlocks", "count", "counter", "deadlocks detected"),
    ("checksum_failures", "count", "counter", "data page checksum failures"),
    ("blk_read_time", "ms", "counter", "time reading data blocks (needs track_io_timing)"),
    ("blk_write_time", "ms", "counter", "time writing data blocks (needs track_io_timing)"),
    ("session_time", "ms", "counter", "time spent by sessions (14+)"),
    ("active_time", "ms", "counter", "time spent executing statements (14+)"),
    ("idle_in_transaction_time", "ms", "counter", "time idle in a transaction (14+)"),
    ("sessions", "count", "counter", "sessions established (14+)"),
    ("sessions_abandoned", "count", "counter", "sessions ended by the client going away (14+)"),
    ("sessions_fatal", "count", "counter", "sessions ended by a fatal error (14+)"),
    ("sessions_killed", "count", "counter", "sessions terminated by an operator (14+)"),
    ("parallel_workers_to_launch", "count", "counter", "parallel workers planned (18+)"),
    ("parallel_workers_launched", "count", "counter", "parallel workers launched (18+)"),
)

METRICS: tuple[Metric, ...] = (
    *(Metric(f"db.{n}", u, k, f"{d}, in the target's database") for n, u, k, d in _DB_FIELDS),
    *(Metric(f"alldb.{n}", u, k, f"{d}, summed over all databases") for n, u, k, d in _DB_FIELDS),
    Metric("wal.lsn_bytes", "bytes", "counter", "WAL position in bytes since 0/0 (replay position on a standby)"),
    Metric("wal.wal_records", "count", "counter", "WAL records generated (14+)"),
    Metric("wal.wal_fpi", "count", "counter", "WAL full page images generated (14+)"),
    Metric("wal.wal_bytes", "bytes", "counter", "WAL generated (14+)"),
    Metric("wal.wal_buffers_full", "count", "counter", "WAL writes forced by full WAL buffers (14+)"),
    Metric("wal.wal_write", "count", "counter", "WAL buffer writes by XLogWrite (14+; pg_stat_io on 18)"),
    Metric("wal.wal_sync", "count", "counter", "WAL file syncs by issue_xlog_fsync (14+; pg_stat_io on 18)"),
    Metric("wal.wal_write_time", "ms", "counter", "time writing WAL (needs track_wal_io_timing)"),
    Metric("wal.wal_sync_time", "ms", "counter", "time syncing WAL (needs track_wal_io_timing)"),
    Metric("wal.wal_write_bytes", "bytes", "counter", "WAL bytes written (18+)"),
    Metric("wal.init_write", "count", "counter", "writes initialising new WAL segments (18+)"),
    Metric("wal.init_sync", "count", "counter", "syncs of new WAL segments (18+)"),
    Metric("bgwriter.buffers_clean", "buffers", "counter", "buffers written by the background writer"),
    Metric("bgwriter.maxwritten_clean", "count", "counter", "bgwriter rounds stopped at bgwriter_lru_maxpages"),
    Metric("bgwriter.buffers_alloc", "buffers", "counter", "buffers allocated"),
    Metric("bgwriter.buffers_backend", "buffers", "counter", "buffers written by backends themselves (13-16)"),
    Metric("bgwriter.buffers_backend_fsync", "count", "counter", "fsyncs backends had to do themselves (13-16)"),
    Metric("checkpointer.num_timed", "count", "counter", "checkpoints due to checkpoint_timeout"),
    Metric("checkpointer.num_requested", "count", "counter", "requested checkpoints (max_wal_size, CHECKPOINT)"),
    Metric("checkpointer.num_done", "count", "counter", "checkpoints performed (18+)"),
    Metric("checkpointer.restartpoints_timed", "count", "counter", "scheduled restartpoints (17+)"),
    Metric("checkpointer.restartpoints_req", "count", "counter", "requested restartpoints (17+)"),
    Metric("checkpointer.restartpoints_done", "count", "counter", "restartpoints performed (17+)"),
    Metric("checkpointer.write_time", "ms", "counter", "checkpoint time writing files"),
    Metric("checkpointer.sync_time", "ms", "counter", "checkpoint time syncing files"),
    Metric("checkpointer.buffers_written", "buffers", "counter", "buffers written by checkpoints"),
    Metric("checkpointer.slru_written", "buffers", "counter", "SLRU buffers written by checkpoints (18+)"),
    *(Metric(f"io.<backend_type>.<object>.<context>.{op}", "operations", "counter",
             f"pg_stat_io {op} (16+; every {IO_EVERY}th record, the first and the last; absent where the view "
             "has NULL: the operation never happens there)")
      for op in IO_OPS),
    Metric("locks.waiting", "count", "gauge", "lock requests waiting now (pg_locks, not granted)"),
    Metric("locks.waiting.<locktype>", "count", "gauge", "lock requests waiting now, per lock type"),
)


def statements_delta(start: Mapping[str, Mapping[str, Any]], end: Mapping[str, Mapping[str, Any]]
                     ) -> dict[str, dict[str, float]]:
    """Per statement key, the increase of each counter between two pg_stat_statements snapshots.

    A statement missing at start (new, or evicted and back) counts from zero;
    a counter that went down (pg_stat_statements_reset) counts from zero too.
    Statements that did not run in between (calls unchanged) are left out.
    """
    out: dict[str, dict[str, float]] = {}
    for key, cur in end.items():
        prev = start.get(key, {})
        d: dict[str, float] = {}
        for c in STATEMENT_COUNTERS:
            now = float(cur.get(c) or 0)
            before = float(prev.get(c) or 0)
            v = now if now < before else now - before
            d[c] = int(v) if v.is_integer() and not c.endswith("_time") else v
        if d["calls"] > 0:
            out[key] = d
    return out


def top_statements(delta: Mapping[str, Mapping[str, float]], n: int) -> list[tuple[str, Mapping[str, float]]]:
    """The ``n`` statements with the most execution time, most first (ties: more calls first)."""
    return sorted(delta.items(), key=lambda kv: (-kv[1]["total_exec_time"], -kv[1]["calls"], kv[0]))[:n]


class PgStatsCollector(Collector):
    """Cumulative statistics views of PostgreSQL 13-18, once a second; pg_stat_statements at start and stop."""

    name = "pg_stats"
    interval_s = 1.0
    metrics = METRICS

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.session: Session | None = None
        self.parts = new_parts()
        self._sql: dict[str, str] = {}
        self._reads: dict[str, Callable[[], list[dict[str, Any]]]] = {}  # part -> its read, prepared (start())
        self._stmt_schema: str | None = None
        self._stmt_start: dict[str, dict[str, Any]] = {}
        self._stmt_t0 = 0.0
        self._ticks = 0  # records sampled so far: pg_stat_io goes into every IO_EVERY-th
        self.top_n = int(ctx.options.get("pg_top_statements", TOP_STATEMENTS))

    # -- setup shared by probe and start ------------------------------------------------------

    def _prepare(self, s: Session) -> list[str]:
        """Pick each part's SQL for this server; switch off what the version lacks. Returns notes."""
        notes: list[str] = []
        for part, sql_name in COUNTER_PARTS.items():
            try:
                self._sql[part] = session_sql(s, sql_name)
            except SqlUnavailable as e:
                self.parts.switch_off(part, str(e).split(": ", 1)[-1], hint="")
        if s.version_num < 140000:
            notes.append("pg_stat_wal: needs PostgreSQL 14 or newer (only the WAL position wal.lsn_bytes is recorded)")
        return notes

    def _statements_status(self, s: Session) -> tuple[str | None, str, str]:
        """(quoted schema or None, why not usable, hint). Tries one read of the function."""
        rows = s.query(session_sql(s, "statements_extension"))
        if not rows:
            return None, f"pg_stat_statements: not installed in database {s.target.database}", (
                f"CREATE EXTENSION pg_stat_statements in database {s.target.database}, with "
                "shared_preload_libraries = 'pg_stat_statements' (needs a restart)")
        version = str(rows[0]["version"])
        parsed = tuple(int(x) for x in version.split(".") if x.isdigit())
        if parsed < MIN_STATEMENTS_VERSION:
            return None, f"pg_stat_statements: extension version {version} is older than 1.8", \
                "ALTER EXTENSION pg_stat_statements UPDATE"
        schema = quote_ident(str(rows[0]["schema"]))
        try:
            s.query(f"SELECT {MARKER} 1 FROM {schema}.pg_stat_statements(false) LIMIT 1")
        except DbError as e:
            if e.kind == "unsupported":  # 55000: the library is not in shared_preload_libraries
                return None, "pg_stat_statements: installed but not loaded", \
                    "add pg_stat_statements to shared_preload_libraries and restart the server"
            # a privilege, a timeout...: the counters go on without the statements
            return None, f"pg_stat_statements: {describe(e)}", MONITOR_HINT if e.kind == "privilege" else ""
        return schema, "", ""

    # -- lifecycle -----------------------------------------------------------------------------

    def probe(self) -> Probe:
        try:
            with open_session(self.ctx.target, self.name, TICK_TIMEOUT_MS) as s:
                too_old = unsupported_reason(s.version_num)
                if too_old:
                    return Probe(False, too_old, "use PostgreSQL 13 or newer")
                missing = self._prepare(s)
                hints: list[str] = []
                self._read_counters(s)
                if not self.parts.is_on("pg_stat_database"):
                    return Probe(False, self.parts.off["pg_stat_database"], MONITOR_HINT)
                missing.extend(self.parts.missing())
                hints.append(self.parts.hint())
                schema, why, hint = self._statements_status(s)
                if schema is None:
                    missing.append(why)
                    hints.append(hint)
                elif not privileges(s).pg_read_all_stats:
                    missing.append("pg_stat_statements of other roles: needs pg_monitor or pg_read_all_stats")
                    hints.append(MONITOR_HINT)
        except DbError as e:
            return Probe(False, str(e), probe_hint(e))
        finally:
            self.parts = new_parts()  # probe runs in the orchestrator; start() decides afresh in the collector process
            self._sql = {}
        return Probe(True, missing=tuple(missing), hint="; ".join(dict.fromkeys(h for h in hints if h)))

    def start(self) -> None:
        self.session = open_session(self.ctx.target, self.name, TICK_TIMEOUT_MS)
        self._prepare(self.session)
        schema, why, _hint = self._statements_status(self.session)
        if schema is None:
            self.parts.switch_off("pg_stat_statements", why.split(": ", 1)[-1], hint="")
        self._stmt_schema = schema
        self._stmt_start = self._statements_snapshot()
        self._stmt_t0 = time.time()

    def sample(self, with_io: bool | None = None) -> dict[str, Any]:
        """One record; pg_stat_io in it when ``with_io`` (None: every :data:`IO_EVERY`-th record, the first too)."""
        assert self.session is not None, "start() first"
        io = self._ticks % IO_EVERY == 0 if with_io is None else with_io
        self._ticks += 1
        rec = self._read_counters(self.session, io)
        news = self.parts.unsaid()
        if news:
            rec["off"] = news  # the first record after a part went off says why its series stops
        return rec

    def stop(self) -> list[dict[str, Any]] | None:
        if self.session is None:
            return None
        try:
            out = [self.sample(with_io=True)]  # the last record is whole: every counter's increase ends here
            stmts = self._statements_record()
            if stmts is not None:
                out.append(stmts)
            return out
        finally:
            self.session.close()
            self.session = None
            self._reads = {}

    # -- reading -------------------------------------------------------------------------------

    def _query(self, part: str, s: Session, sql: str) -> list[dict[str, Any]] | None:
        """Rows of ``part`` through the parts; on the collector's own session its statement is prepared once
        (Session.prepared: five reads a second, each ~40% of a cursor's cost then)."""
        if s is not self.session:
            return self.parts.query(part, s, sql)

        def read() -> list[dict[str, Any]]:
            if part not in self._reads:
                self._reads[part] = s.prepared(sql)
            return self._reads[part]()
        return self.parts.call(part, read)

    def _read_counters(self, s: Session, with_io: bool = True) -> dict[str, Any]:
        rec: dict[str, Any] = {}
        q = self._query
        for row in q("pg_stat_database", s, self._sql.get("pg_stat_database", "")) or []:
            scope = row.pop("scope")
            rec.update({f"{scope}.{k}": plain(v) for k, v in row.items() if v is not None})
        for part in ("pg_stat_wal", "pg_stat_bgwriter", "pg_stat_checkpointer"):
            for row in q(part, s, self._sql.get(part, "")) or []:
                rec.update({k: plain(v) for k, v in row.items() if v is not None})
        for row in (q("pg_stat_io", s, self._sql.get("pg_stat_io", "")) or []) if with_io else []:
            where = f"io.{row['backend_type']}.{row['object']}.{row['context']}"
            for op in IO_OPS:
                if row[op] is not None:
                    rec[f"{where}.{op}"] = plain(row[op])
        locks = q("pg_locks", s, self._sql.get("pg_locks", ""))
        if locks is not None:
            waiting = {lt: 0 for lt in LOCKTYPES}
            for row in locks:
                waiting[str(row["locktype"])] = int(row["waiting"])
            rec["locks.waiting"] = sum(waiting.values())
            rec.update({f"locks.waiting.{lt}": n for lt, n in waiting.items()})
        return rec

    def _statements_snapshot(self) -> dict[str, dict[str, Any]]:
        """queryid|role -> counters, without texts (cheap); {} when the part is off."""
        s = self.session
        if s is None or self._stmt_schema is None or not self.parts.is_on("pg_stat_statements"):
            return {}
        sql = session_sql(s, "statements").format(schema=self._stmt_schema)
        s.set_statement_timeout(STATEMENTS_TIMEOUT_MS)
        try:
            rows = self.parts.query("pg_stat_statements", s, sql) or []
        finally:
            s.set_statement_timeout(TICK_TIMEOUT_MS)
        return {f"{r['queryid']}|{r['role']}": {k: plain(v) for k, v in r.items()} for r in rows}

    def _statement_texts(self, queryids: list[str]) -> dict[str, str]:
        s = self.session
        if s is None or not queryids or self._stmt_schema is None:
            return {}
        sql = session_sql(s, "statement_texts").format(schema=self._stmt_schema)
        s.set_statement_timeout(STATEMENTS_TIMEOUT_MS)
        try:
            rows = self.parts.query("pg_stat_statements", s, sql, {"ids": queryids, "max_chars": QUERY_TEXT_CHARS})
        except DbError:
            rows = None  # texts are a nicety: the counters stand without them
        finally:
            s.set_statement_timeout(TICK_TIMEOUT_MS)
        return {str(r["queryid"]): str(r["query"]) for r in rows or []}

    def _statements_record(self) -> dict[str, Any] | None:
        if self._stmt_schema is None or not self.parts.is_on("pg_stat_statements"):
            return None
        end = self._statements_snapshot()
        if not self.parts.is_on("pg_stat_statements"):
            return {"kind": "statements", "off": self.parts.unsaid()}
        delta = statements_delta(self._stmt_start, end)
        # a few extra candidates: our own catalog queries are dropped once their text is known
        candidates = top_statements(delta, self.top_n + 10)
        texts = self._statement_texts(sorted({key.split("|", 1)[0] for key, _ in candidates}))
        top: list[dict[str, Any]] = []
        for key, d in candidates:
            queryid, role = key.split("|", 1)
            text = texts.get(queryid)
            if text is not None and MARKER in text:
                continue
            shown = None if text is None else self.ctx.statement_text(text)  # other roles' literals: a fingerprint
            top.append({"queryid": queryid, "role": role, "query": shown,
                        **{c: round(v, 3) if isinstance(v, float) else v for c, v in d.items()}})
            if len(top) >= self.top_n:
                break
        return {
            "kind": "statements",
            "window_s": round(time.time() - self._stmt_t0, 3),
            "statements_seen": len(delta),
            "total_exec_time": round(sum(d["total_exec_time"] for d in delta.values()), 3),
            "calls": sum(d["calls"] for d in delta.values()),
            "top": top,
        }
