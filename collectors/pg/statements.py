"""PostgreSQL's half of the per-step statement source: pg_stat_statements, pg_stat_user_tables, EXPLAIN.

Needs pg_stat_statements 1.8+ loaded (shared_preload_libraries) and created in
the target's database; dbdiag never creates it on a server it did not start
(a remote or shared server is read only). Other roles' statements need
pg_read_all_stats (part of pg_monitor); without it the workload's own role is
still seen, and the probe says what is missing.

Plans: ``EXPLAIN (GENERIC_PLAN)`` of the normalised text on PostgreSQL 16+; before
16 the same generic plan through ``PREPARE`` under ``plan_cache_mode =
force_generic_plan`` and ``EXPLAIN EXECUTE`` with NULL parameters (a generic plan
does not look at the values). pg_stat_statements counts no rows examined: for a
statement whose plan scans a whole table, rows examined are the rows per
sequential scan of that table in the step (pg_stat_user_tables; the planner's size
when it counted none) per call, scaled down when its blocks per call show it stopped early
(``examined_from`` "plan x table size"); the step's per-table tuple reads are
kept beside it (``tables``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from collectors.pg.common import MONITOR_HINT, describe, open_session, plain, privileges, quote_ident, \
    unsupported_reason
from collectors.plans import pg_plan_nodes
from collectors.sql import MARKER, session_sql
from collectors.statements import SNAPSHOT_TIMEOUT_MS, TEXT_CHARS, Snapshot, StatementSource
from diag.db import Session
from diag.errors import DbError
from diag.schema import StatementPlan, TableStat

GENERIC_PLAN_SINCE = 160000
MIN_VERSION = (1, 8)
_PARAM = re.compile(r"\$(\d+)")
EXAMINED_FROM_PLAN = "plan x table size"


class PgStatementSource(StatementSource):
    """pg_stat_statements per step, with per-table counters and generic plans."""

    view = "pg_stat_statements"
    counters = ("calls", "total_ms", "plan_ms", "rows", "shared_blks_hit", "shared_blks_read", "shared_blks_dirtied",
                "shared_blks_written", "temp_blks_read", "temp_blks_written")

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.schema = ""
        self._rows_per_scan: dict[str, float] = {}

    def open(self) -> Session:
        return open_session(self.ctx.target, self.name, SNAPSHOT_TIMEOUT_MS)

    def check(self, s: Session) -> tuple[str, str, list[str]]:
        too_old = unsupported_reason(s.version_num)
        if too_old:
            return too_old, "use PostgreSQL 13 or newer", []
        rows = s.query(session_sql(s, "statements_extension"))
        db = s.target.database
        if not rows:
            return (f"pg_stat_statements is not installed in database {db}",
                    f"CREATE EXTENSION pg_stat_statements in database {db}, with shared_preload_libraries = "
                    "'pg_stat_statements' (needs a restart); dbdiag does not change a server it did not start", [])
        version = str(rows[0]["version"])
        if tuple(int(x) for x in version.split(".") if x.isdigit()) < MIN_VERSION:
            return f"pg_stat_statements {version} is older than 1.8", "ALTER EXTENSION pg_stat_statements UPDATE", []
        schema = quote_ident(str(rows[0]["schema"]))
        try:
            s.query(f"SELECT {MARKER} 1 FROM {schema}.pg_stat_statements(false) LIMIT 1")
        except DbError as e:
            if e.kind == "unsupported":  # 55000: created, but the library is not in shared_preload_libraries
                return ("pg_stat_statements is installed but not loaded",
                        "add pg_stat_statements to shared_preload_libraries and restart the server", [])
            return f"pg_stat_statements: {describe(e)}", MONITOR_HINT if e.kind == "privilege" else "", []
        self.schema = schema
        notes: list[str] = []
        p = privileges(s)
        if not (p.superuser or p.pg_read_all_stats):
            notes.append(f"statements of roles other than {p.role} are not visible: needs pg_read_all_stats "
                         f"({MONITOR_HINT})")
        return "", MONITOR_HINT if notes else "", notes

    def snapshot(self, s: Session, texts: bool) -> Snapshot:
        sql = session_sql(s, "step_statements").format(schema=self.schema)
        rows = s.query(sql, {"texts": texts, "max_chars": TEXT_CHARS})
        return {str(r.pop("key")): {k: plain(v) for k, v in r.items()} for r in rows}

    def table_snapshot(self, s: Session) -> Snapshot:
        return {str(r.pop("table")): {k: plain(v) for k, v in r.items()} for r in s.query(session_sql(s, "table_stats"))}

    def is_own(self, key: str, text: str) -> bool:
        return MARKER in text

    def explain(self, s: Session, text: str, key: str = "") -> tuple[StatementPlan, Any]:
        params = max((int(n) for n in _PARAM.findall(text)), default=0)
        if s.version_num >= GENERIC_PLAN_SINCE:
            method = "generic_plan"
            rows = s.query(f"EXPLAIN {MARKER} (GENERIC_PLAN, FORMAT JSON, VERBOSE) {text}")
        elif params:
            method = "generic_prepared"
            rows = self._prepared_generic(s, text, params)
        else:
            method = "explain"
            rows = s.query(f"EXPLAIN {MARKER} (FORMAT JSON, VERBOSE) {text}")
        raw = next(iter(rows[0].values()))
        return StatementPlan(method=method, nodes=tuple(pg_plan_nodes(raw))), raw

    @staticmethod
    def _prepared_generic(s: Session, text: str, params: int) -> list[dict[str, Any]]:
        """Before PostgreSQL 16: the generic plan of a statement with ``$n`` parameters (values unknown)."""
        s.execute(f"SET {MARKER} plan_cache_mode = force_generic_plan")
        try:
            s.execute(f"PREPARE {MARKER} dbdiag_plan AS {text}")
            try:
                nulls = ", ".join(["NULL"] * params)
                return s.query(f"EXPLAIN {MARKER} (FORMAT JSON, VERBOSE) EXECUTE dbdiag_plan({nulls})")
            finally:
                s.execute(f"DEALLOCATE {MARKER} dbdiag_plan")
        finally:
            s.execute(f"RESET {MARKER} plan_cache_mode")

    def step_tables(self, tables: list[TableStat]) -> None:
        # Rows a sequential scan of each table read in this step, as the server counted them (the planner's
        # reltuples lags behind a load until the next ANALYZE).
        self._rows_per_scan = {t.table: t.seq_tup_read / t.seq_scan for t in tables if t.seq_scan > 0}

    def examined(self, d: Mapping[str, float], plan: StatementPlan | None, tables: Snapshot) -> tuple[int | None, str]:
        if plan is None or not plan.full_scans:
            return None, ""
        rows = pages = 0.0
        for n in plan.full_scans:
            t = tables.get(n.table) or {}
            rows += self._rows_per_scan.get(n.table) or max(float(t.get("reltuples") or 0),
                                                            float(t.get("n_live_tup") or 0))
            pages += float(t.get("relpages") or 0)
        calls = d.get("calls", 0.0)
        blocks = (d.get("shared_blks_hit") or 0.0) + (d.get("shared_blks_read") or 0.0)
        # A scan under a LIMIT stops early: its blocks per call say how much of the table it read.
        share = min(1.0, blocks / calls / pages) if pages > 0 and calls > 0 and blocks > 0 else 1.0
        return int(round(rows * share * calls)), EXAMINED_FROM_PLAN
