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

Whose plan: pg_stat_statements records each statement's role. A statement of
dbdiag's own login role is planned in the session as it is; another role's only
with ``--plan-others`` and only as that role: through a SECURITY DEFINER function
owned by it (a temporary one, in this session's pg_temp), inside which a
function the planner runs cannot ``SET ROLE`` or ``SET SESSION AUTHORIZATION``
back to dbdiag's login (PostgreSQL refuses both within a security-definer
function; a plain ``SET ROLE`` would not hold: a superuser's session may switch
back). That needs dbdiag's login to be a member of the role (a superuser is).
Every plan is made in a ``READ ONLY`` transaction that is rolled back, under a
statement timeout of :data:`collectors.plansafety.PLAN_TIMEOUT_MS`, with
:data:`SAFE_SEARCH_PATH`: pg_catalog first and temporary objects last, whatever
search_path a role or database setting would give the session.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from typing import Any

from collectors.plansafety import PLAN_OTHERS_OPTION, PLAN_TIMEOUT_MS, PlanNotMade
from collectors.pg.common import MONITOR_HINT, describe, open_session, plain, privileges, quote_ident, \
    unsupported_reason
from collectors.plans import pg_plan_nodes
from collectors.sql import MARKER, session_sql
from collectors.statements import SNAPSHOT_TIMEOUT_MS, TEXT_CHARS, Snapshot, StatementSource
from diag.core.db import Session
from diag.core.errors import DbError
from diag.core.schema import StatementPlan, TableStat

GENERIC_PLAN_SINCE = 160000
MIN_VERSION = (1, 8)
_PARAM = re.compile(r"\$(\d+)")
EXAMINED_FROM_PLAN = "plan x table size"
# pg_catalog before anything a role could create, the role's own schema and public as a session has them by
# default, temporary objects (which would otherwise come first for tables) last.
SAFE_SEARCH_PATH = 'pg_catalog, "$user", public, pg_temp'
# Runs its statements as the function's owner (a security-definer context: no SET ROLE back); all but the
# last are run (PREPARE), the last's rows (one JSON plan) returned.
_AS_OWNER = """CREATE {marker} FUNCTION pg_temp.{name}(stmts text[]) RETURNS SETOF text LANGUAGE plpgsql
SECURITY DEFINER SET search_path = {path} AS $dbdiag$
DECLARE i int; r record;
BEGIN
  FOR i IN 1 .. array_length(stmts, 1) - 1 LOOP EXECUTE stmts[i]; END LOOP;
  FOR r IN EXECUTE stmts[array_length(stmts, 1)] LOOP RETURN NEXT r."QUERY PLAN"::text; END LOOP;
END $dbdiag$"""


class PgStatementSource(StatementSource):
    """pg_stat_statements per step, with per-table counters and generic plans."""

    view = "pg_stat_statements"
    counters = ("calls", "total_ms", "plan_ms", "rows", "shared_blks_hit", "shared_blks_read", "shared_blks_dirtied",
                "shared_blks_written", "temp_blks_read", "temp_blks_written")

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.schema = ""
        self.own_role = ""  # the login's role as pg_stat_statements names it (regrole text)
        self._rows_per_scan: dict[str, float] = {}
        self._as_role: dict[str, str] = {}  # role -> the pg_temp function that plans as it
        self._made = 0

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
        self.own_role = str(s.query(f"SELECT {MARKER} current_user::regrole::text AS r")[0]["r"])
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

    @staticmethod
    def role_of(key: str) -> str:
        """The role (regrole text) of statement ``key`` ("queryid|role")."""
        return key.split("|", 1)[1] if "|" in key else ""

    def not_planned(self, key: str, active: set[str] | None, seen: dict[str, set[str]]) -> str:
        role = self.role_of(key)
        if not role or role == self.own_role:
            return ""
        if not self.plan_others:
            return f"statement of role {role}; run with {PLAN_OTHERS_OPTION} to plan it as {role}"
        return ""

    def explain(self, s: Session, text: str, key: str = "") -> tuple[StatementPlan, Any]:
        params = max((int(n) for n in _PARAM.findall(text)), default=0)
        generic = s.version_num < GENERIC_PLAN_SINCE and params > 0
        if s.version_num >= GENERIC_PLAN_SINCE:
            method, stmts = "generic_plan", [f"EXPLAIN {MARKER} (GENERIC_PLAN, FORMAT JSON, VERBOSE) {text}"]
        elif generic:  # before 16: the generic plan of a statement with $n parameters (values unknown)
            nulls = ", ".join(["NULL"] * params)
            method, stmts = "generic_prepared", [
                f"PREPARE {MARKER} dbdiag_plan AS {text}",
                f"EXPLAIN {MARKER} (FORMAT JSON, VERBOSE) EXECUTE dbdiag_plan({nulls})"]
        else:
            method, stmts = "explain", [f"EXPLAIN {MARKER} (FORMAT JSON, VERBOSE) {text}"]
        role = self.role_of(key)
        as_role = self._planner_as(s, role) if role and role != self.own_role else ""
        try:
            raw = self._bounded(s, stmts, as_role, generic)
        finally:
            if generic:  # a prepared statement outlives the transaction it was made in
                with contextlib.suppress(DbError):
                    s.execute(f"DEALLOCATE {MARKER} dbdiag_plan")
        return StatementPlan(method=method, nodes=tuple(pg_plan_nodes(raw))), raw

    @staticmethod
    def _bounded(s: Session, stmts: list[str], as_role: str, generic: bool) -> Any:
        """The plan ``stmts`` print (the last one's row), run in a read-only transaction that is rolled back,
        under :data:`PLAN_TIMEOUT_MS` and :data:`SAFE_SEARCH_PATH`; through ``as_role`` (a pg_temp function)
        when given."""
        s.execute(f"BEGIN {MARKER} READ ONLY")
        try:
            s.execute(f"SET LOCAL {MARKER} statement_timeout = {int(PLAN_TIMEOUT_MS)}")
            s.execute(f"SET LOCAL {MARKER} search_path = {SAFE_SEARCH_PATH}")
            if generic:
                s.execute(f"SET LOCAL {MARKER} plan_cache_mode = force_generic_plan")
            if as_role:
                rows = s.query(f"SELECT {MARKER} {as_role}(%(stmts)s) AS plan", {"stmts": stmts})
            else:
                for sql in stmts[:-1]:
                    s.execute(sql)
                rows = s.query(stmts[-1])
        finally:
            s.execute(f"ROLLBACK {MARKER}")
        if not rows:
            raise DbError("the plan came back empty", kind="other")
        return next(iter(rows[0].values()))

    def _planner_as(self, s: Session, role: str) -> str:
        """The pg_temp function that plans as ``role`` (made once per session; --plan-others only)."""
        if role in self._as_role:
            return self._as_role[role]
        ok = s.query(f"SELECT {MARKER} pg_has_role(current_user, %(r)s::regrole, 'MEMBER') AS ok", {"r": role})
        if not ok or not ok[0]["ok"]:
            raise PlanNotMade(f"statement of role {role}: dbdiag's login {self.own_role} is not a member of it, "
                              f"so cannot plan as {role}")
        self._made += 1
        name = f"dbdiag_plan_as_{self._made}"
        s.execute(_AS_OWNER.format(marker=MARKER, name=name, path=SAFE_SEARCH_PATH))
        try:
            s.execute(f"ALTER FUNCTION {MARKER} pg_temp.{name}(text[]) OWNER TO {role}")
        except DbError as e:
            with contextlib.suppress(DbError):
                s.execute(f"DROP FUNCTION {MARKER} pg_temp.{name}(text[])")
            raise PlanNotMade(f"statement of role {role}: cannot plan as {role} ({e})") from None
        self._as_role[role] = f"pg_temp.{name}"
        return self._as_role[role]

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
