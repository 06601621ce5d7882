"""MySQL / MariaDB's half of the per-step statement source: events_statements_summary_by_digest, EXPLAIN.

Needs performance_schema=ON (a restart), its ``statements_digest`` consumer and
SELECT on performance_schema. The digest counts rows examined, sent and affected per
statement, so rows examined are the server's own (``examined_from`` "server"); ``rows`` is sent plus affected,
as PostgreSQL's ``rows`` (retrieved or affected): an INSERT ... SELECT of 1,000 rows returns 0 rows but is not a
statement examining 1,000 rows per row it gives.

Statements of the binary protocol (prepared) are read from prepared_statements_instances,
summed per text (MariaDB 10.5+ does not digest them; MySQL does, so there only the digests); a connection takes its counts with it when it closes, so
the end snapshot is taken :attr:`end_early_s` before the step ends, while the clients are connected.

Plans: ``EXPLAIN FORMAT=JSON`` of a statement text with literals: one sampled in
the middle of the step from events_statements_history (when that consumer is on;
throwaway servers leave it off), else the digest or prepared statement's text. Where a text has ``?`` (prepared statements, digests) each
becomes the string literal ``'1'``, which MySQL compares as a number to a numeric
column (an index on it stays usable) and as a string to a string column; ``LIMIT
?`` becomes ``LIMIT 1`` (``method`` "parameters_substituted").

Own statements: a digest text drops comments, so the ``/* dbdiag */`` marker is
only seen in a sampled text; dbdiag's catalog statements are also told by what
they are (SHOW, SET, EXPLAIN, reads of performance_schema and information_schema,
``SELECT @@...``): a workload's own such statements are left out with them.

Whose plan: there is no SET ROLE to another account, and MariaDB's EXPLAIN runs
stored functions whose value it needs (an ``SQL SECURITY INVOKER`` one with
dbdiag's privileges), so without ``--plan-others`` only statements of dbdiag's own
user are planned. A digest carries no user; a statement counts as dbdiag's user's
when that user alone ran statements in the step (the per-user statement counts of
events_statements_summary_by_user_by_event_name, read with the digests), or when
every thread seen running it (events_statements_current and _history in the
middle of the step; a prepared statement's owner thread) was that user's. Plans
are made in a transaction that is rolled back, ``READ ONLY`` for reads (MariaDB
refuses to EXPLAIN a write or a locking read in a read-only transaction), in the
statement's schema, under a statement timeout of
:data:`collectors.plansafety.PLAN_TIMEOUT_MS` (MySQL bounds only SELECTs).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from collectors.mysql.common import GRANT_PS, current_user, open_session, query_named, to_number
from collectors.mysql.waits import PS_OFF_HINT
from collectors.plans import decode, my_plan_nodes
from collectors.plansafety import PLAN_OTHERS_OPTION, PLAN_TIMEOUT_MS
from collectors.sql import MARKER, SqlUnavailable
from collectors.statements import SNAPSHOT_TIMEOUT_MS, Snapshot, StatementSource
from diag.core.db import Session
from diag.core.errors import DbError
from diag.core.schema import StatementPlan

_OWN = re.compile(r"^\s*(?:SHOW|SET|EXPLAIN|USE|SELECT\s+@@|SELECT\s+VERSION\s*\(|SELECT\s+CURRENT_USER\s*\()"
                  r"|`?(?:performance_schema|information_schema)`?\s*\.", re.IGNORECASE)
_LIMIT = re.compile(r"\b(LIMIT|OFFSET)\s+\?", re.IGNORECASE)
_ELLIPSIS_LIST = re.compile(r"\(\s*\.\.\.\s*\)")
_CALL_SPACE = re.compile(r"\b([A-Za-z_]\w*) \(")
# Statements MariaDB will not EXPLAIN in a READ ONLY transaction: writes and locking reads.
_WRITES = re.compile(r"^\W*(?:INSERT|UPDATE|DELETE|REPLACE)\b"
                     r"|\bFOR\s+UPDATE\b|\bFOR\s+SHARE\b|\bLOCK\s+IN\s+SHARE\s+MODE\b", re.IGNORECASE)
CONSUMER_FIX = ("UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME = '{name}' (or "
                "performance-schema-consumer-{option}=ON in my.cnf)")


def substitute(text: str) -> tuple[str, bool]:
    """``text`` with each ``?`` parameter as a literal (see the module docstring); whether anything changed.

    A digest text (no quotes: its literals are ``?``) spaces a call out, ``COUNT ( * )``, which MariaDB does not
    parse as a built-in function without IGNORE_SPACE; the space before ``(`` goes (a keyword followed directly
    by a parenthesis parses the same).
    """
    out = _ELLIPSIS_LIST.sub("('1')", _LIMIT.sub(r"\1 1", text))
    changed = out != text
    before = out
    out = re.sub(r"(?<![\w'`])\?(?![\w'`])", "'1'", out)
    changed = changed or out != before
    if "'" not in text and '"' not in text:
        out = _CALL_SPACE.sub(r"\1(", out)
    return out, changed


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else ("" if v is None else str(v))


class MyStatementSource(StatementSource):
    """events_statements_summary_by_digest per step, with EXPLAIN FORMAT=JSON of the top statements."""

    view = "events_statements_summary_by_digest"
    counters = ("calls", "total_ms", "rows", "rows_examined", "no_index_used")
    mid_step_texts = True
    end_early_s = 0.25
    mysql_dialect = True

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.history = False
        self.own_user = ""  # the login's user name, as performance_schema names a thread's user
        self._prepared_users: dict[str, set[str]] = {}  # prepared statement key -> its owner threads' users

    def open(self) -> Session:
        return open_session(self.ctx.target, self.name, SNAPSHOT_TIMEOUT_MS)

    def check(self, s: Session) -> tuple[str, str, list[str]]:
        try:
            row = query_named(s, "digest_consumers")[0]
        except DbError as e:
            return f"performance_schema: {e}", GRANT_PS.format(user=current_user(s)), []
        if not to_number(row.get("ps")):
            return "performance_schema is OFF", PS_OFF_HINT, []
        if _text(row.get("digest")).upper() != "YES":
            return ("the statements_digest consumer of performance_schema is off",
                    CONSUMER_FIX.format(name="statements_digest", option="statements-digest"), [])
        try:
            s.query(f"{MARKER} SELECT 1 FROM performance_schema.events_statements_summary_by_digest LIMIT 1")
        except DbError as e:
            if e.kind == "privilege":
                return (f"performance_schema: {e}", GRANT_PS.format(user=current_user(s)), [])
            raise
        # Without the history consumer (off on throwaway servers: BENCHMARKS.md) plans come from the digest or
        # prepared texts with their parameters substituted; nothing is missing, so nothing to say.
        self.history = _text(row.get("history")).upper() == "YES"
        self.own_user = _text(s.query(f"{MARKER} SELECT SUBSTRING_INDEX(USER(), '@', 1) AS u")[0]["u"])
        return "", "", []

    def snapshot(self, s: Session, texts: bool) -> Snapshot:
        out: Snapshot = {}
        rows = query_named(s, "step_digests")
        with contextlib.suppress(SqlUnavailable):  # MySQL digests its prepared statements' executions itself
            rows += query_named(s, "prepared_statements")
        for r in rows:
            key = _text(r.pop("key"))
            users = _text(r.pop("users", None))
            if users:
                self._prepared_users.setdefault(key, set()).update(users.split(","))
            out[key] = {"text": _text(r.pop("text")), **{k: to_number(v) for k, v in r.items()}}
        return out

    def actors(self, s: Session) -> dict[str, float] | None:
        return {_text(r["user"]): float(to_number(r["calls"]) or 0) for r in query_named(s, "statement_actors")}

    def sample_users(self, s: Session) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for r in query_named(s, "statement_users"):
            out.setdefault(_text(r["key"]), set()).add(_text(r["user"]))
        return out

    def not_planned(self, key: str, active: set[str] | None, seen: dict[str, set[str]]) -> str:
        if self.plan_others:
            return ""
        users = seen.get(key, set()) | self._prepared_users.get(key, set())
        others = sorted(users - {self.own_user})
        if others:
            return (f"statement of user {', '.join(others)}; run with {PLAN_OTHERS_OPTION} to plan it "
                    f"(with dbdiag's privileges: MySQL cannot plan as another user)")
        if users or (active is not None and active <= {self.own_user}):
            return ""
        who = "who ran statements in this step is not known" if active is None else \
            f"users {', '.join(sorted(active - {self.own_user}))} also ran statements in this step"
        return (f"performance_schema does not say whose statement this is and {who}; run with "
                f"{PLAN_OTHERS_OPTION} to plan it with dbdiag's privileges")

    def sample_texts(self, s: Session) -> dict[str, str]:
        if not self.history:
            return {}
        out: dict[str, str] = {}
        for r in query_named(s, "statement_samples"):
            out.setdefault(_text(r["key"]), _text(r["text"]))
        return out

    def is_own(self, key: str, text: str) -> bool:
        return text.lstrip().startswith(MARKER) or bool(_OWN.search(text))

    def explain(self, s: Session, text: str, key: str = "") -> tuple[StatementPlan, Any]:
        if text.rstrip().endswith("..."):
            return StatementPlan(error="the statement text is cut short (max_digest_length)"), None
        sql, changed = substitute(text)
        schema = key.rsplit("|", 1)[-1] if "|" in key and not key.startswith("prepared|") else ""
        if schema:  # the statement's default database, for names it does not qualify
            s.execute(f"{MARKER} USE `{schema.replace('`', '``')}`")
        s.set_statement_timeout(PLAN_TIMEOUT_MS)
        try:
            s.execute(f"{MARKER} START TRANSACTION" + ("" if _WRITES.search(sql) else " READ ONLY"))
            try:
                rows = s.query(f"{MARKER} EXPLAIN FORMAT=JSON {sql}")
            finally:
                s.execute(f"{MARKER} ROLLBACK")
        finally:
            s.set_statement_timeout(SNAPSHOT_TIMEOUT_MS)
        raw = decode(_text(next(iter(rows[0].values()))))
        method = "parameters_substituted" if changed else "explain"
        return StatementPlan(method=method, nodes=tuple(my_plan_nodes(raw))), raw
