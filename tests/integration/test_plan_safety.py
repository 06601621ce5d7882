"""Looking never harms: planning another user's statement never runs their code with dbdiag's privileges.

The plant, on each session's throwaway server (pg_stat_statements / performance_schema loaded): a low-privilege
user runs statements that call a function with a visible side effect; the function writes who it ran as into a
log table, so a row with dbdiag's login (postgres / root) in it is the harm. The statement source is then driven
through one step as a run drives it (step_started, the statements, step_finished).

* PostgreSQL: ``plansafe_canary()`` is IMMUTABLE with no arguments, so the planner calls it at plan time (even
  for a generic plan), and so does any plan of ``plansafe_v``, a view over it. In a read-only transaction it
  raises "canary ran as <role>" instead of writing, so a plan made read-only says as whom it ran.
  ``plansafe_escape()`` first tries ``set_config('role', 'postgres')`` (a plain SET ROLE would let it) and
  carries on as whoever it is when refused.
* MariaDB: ``plansafe.canary(x)`` is a DETERMINISTIC SQL SECURITY INVOKER stored function; MariaDB's EXPLAIN
  runs it for a primary-key lookup on its value (found on 10.11: twice per EXPLAIN).

The pre-16 plan path (PREPARE under the statement's role) is checked on the machine's PostgreSQL 15.
Before this change both servers got the row (dbdiag's plans ran the functions as postgres / root).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from collectors.base import CollectorContext
from collectors.mysql.statements import MyStatementSource
from collectors.pg.statements import PgStatementSource
from diag.core.db import Session
from diag.core.errors import DbError
from diag.core.targets import Target
from workloads.steps.options import StepInfo

PG_SETUP = [
    "DROP VIEW IF EXISTS plansafe_v", "DROP TABLE IF EXISTS plansafe_log", "DROP TABLE IF EXISTS plansafe_t",
    "DO $$ BEGIN IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'plansafe_low') THEN DROP OWNED BY plansafe_low; "
    "END IF; END $$", "DROP ROLE IF EXISTS plansafe_low", "CREATE ROLE plansafe_low LOGIN",
    "DROP ROLE IF EXISTS plansafe_mon", "CREATE ROLE plansafe_mon LOGIN IN ROLE pg_read_all_stats",
    "CREATE TABLE plansafe_log (who text, at timestamptz DEFAULT now())",
    "GRANT INSERT, SELECT ON plansafe_log TO PUBLIC",
    "CREATE TABLE plansafe_t (id int PRIMARY KEY)", "GRANT SELECT ON plansafe_t TO PUBLIC",
    """CREATE OR REPLACE FUNCTION plansafe_note() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
       BEGIN
         IF current_setting('transaction_read_only') = 'on' THEN
           RAISE EXCEPTION 'canary ran as % in a read-only transaction', current_user;
         END IF;
         INSERT INTO plansafe_log (who) VALUES (current_user);
         RETURN 1;
       END $$""",
    """CREATE OR REPLACE FUNCTION plansafe_canary() RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
       BEGIN PERFORM plansafe_note(); RETURN 1; END $$""",
    """CREATE OR REPLACE FUNCTION plansafe_switch() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
       BEGIN
         BEGIN PERFORM set_config('role', 'postgres', true);
         EXCEPTION WHEN insufficient_privilege THEN NULL;  -- not allowed: carry on as who we are
         END;
         RETURN plansafe_note();
       END $$""",
    """CREATE OR REPLACE FUNCTION plansafe_escape() RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
       BEGIN PERFORM plansafe_switch(); RETURN 1; END $$""",
    "CREATE VIEW plansafe_v AS SELECT plansafe_canary() AS c", "GRANT SELECT ON plansafe_v TO PUBLIC",
]
PG_LOW = ["SELECT plansafe_canary()", "SELECT c FROM plansafe_v", "SELECT plansafe_escape()"]
PG_OWN = "SELECT count(*) FROM plansafe_t WHERE id > 0"

MY_SETUP = [
    "DROP DATABASE IF EXISTS plansafe", "DROP USER IF EXISTS 'plansafe_low'@'%'", "CREATE DATABASE plansafe",
    "CREATE TABLE plansafe.log (who varchar(200), at timestamp DEFAULT CURRENT_TIMESTAMP) ENGINE=InnoDB",
    "CREATE TABLE plansafe.t (id int PRIMARY KEY, v int)", "INSERT INTO plansafe.t VALUES (1, 1), (2, 2), (3, 3)",
    """CREATE FUNCTION plansafe.canary(x int) RETURNS int DETERMINISTIC SQL SECURITY INVOKER
       BEGIN INSERT INTO plansafe.log (who) VALUES (CURRENT_USER()); RETURN x; END""",
    "CREATE USER 'plansafe_low'@'%'",
    "GRANT SELECT, INSERT, EXECUTE ON plansafe.* TO 'plansafe_low'@'%'",
]
MY_LOW_FIRST = "SELECT v FROM plansafe.t WHERE id = plansafe.canary(2)"  # not its thread's last: seen by nobody
MY_LOW = "SELECT * FROM plansafe.t WHERE id = plansafe.canary(1)"
MY_OWN = "SELECT id FROM plansafe.t WHERE v > 0"
STEP_S = 1.2
# MariaDB: who runs what is sampled in the middle of the step; the plant's statements must be done by then
MY_STEP_S = 3.0
CALLS = 20


def _step(src: Any, target: Target, run_statements: Any, step_s: float = STEP_S) -> dict[str, Any]:
    """One step of ``step_s`` seconds of the statement source around ``run_statements(t_start)``; its statements
    record."""
    assert src.probe().ok
    src.start()
    try:
        info = StepInfo(target.label, "watched", 1, step_s, time.time(), ())
        src.step_started(info)
        run_statements(info.t_start)
        time.sleep(max(0.0, info.t_start + step_s - time.time()))
        return src.step_finished(info)["statements"]
    finally:
        src.stop()


def _by_text(rec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["text"]: s for s in rec["statements"]}


def _pg_run(pg: Target, plan_others: bool, tmp_path: Path, login: str = "postgres"
            ) -> tuple[dict[str, dict[str, Any]], list[str]]:
    low = pg.with_endpoint(pg.host, pg.port, None, "plansafe_low", pg.database)
    dbdiag = pg.with_endpoint(pg.host, pg.port, None, login, pg.database)

    with Session(pg) as s:
        s.execute("TRUNCATE plansafe_log")
    # The plant's sessions connect before the step starts: their set-up statements (version, statement_timeout)
    # are then outside the step's statement counts, which hold only the planted statements to rank and plan.
    with Session(low) as low_s, Session(pg) as own_s:

        def statements(_t0: float) -> None:
            for _ in range(CALLS):
                for sql in PG_LOW:
                    low_s.query(sql)
            for _ in range(CALLS):
                own_s.query(PG_OWN)

        rec = _step(PgStatementSource(CollectorContext(target=dbdiag, artifacts=tmp_path,
                                                       options={"plan_others": plan_others})), dbdiag, statements)
    with Session(pg) as s:
        who = [str(r["who"]) for r in s.query("SELECT who FROM plansafe_log")]
    return _by_text(rec), who


@pytest.fixture(scope="module")
def pg(pg_server) -> Target:
    t = pg_server.target()
    with Session(t) as s:
        for sql in PG_SETUP:
            s.execute(sql)
    return t


def test_postgres_plans_no_other_role_statement_by_default(pg, tmp_path) -> None:
    stmts, who = _pg_run(pg, False, tmp_path)
    assert "postgres" not in who, "a plan ran plansafe_canary() with dbdiag's privileges"
    # the low role's own calls (as many as its plans folded the canary: its driver prepares after 5 runs)
    assert set(who) == {"plansafe_low"}
    for text in ("SELECT plansafe_canary()", "SELECT c FROM plansafe_v", "SELECT plansafe_escape()"):
        plan = stmts[text]["plan"]
        assert plan["not_made"] == "statement of role plansafe_low; run with --plan-others to plan it as plansafe_low"
        assert not plan["nodes"] and not plan["error"]
    own = stmts[PG_OWN.replace("0", "$1")]["plan"]  # dbdiag's own role's statement is planned
    assert own["nodes"] and not own["error"] and not own["not_made"]


def test_postgres_plans_others_only_as_their_role(pg, tmp_path) -> None:
    stmts, who = _pg_run(pg, True, tmp_path)
    assert set(who) == {"plansafe_low"}
    # The plans were made (the planner called the canary) as plansafe_low, read only: the canary says so.
    for text in ("SELECT plansafe_canary()", "SELECT c FROM plansafe_v"):
        plan = stmts[text]["plan"]
        assert "canary ran as plansafe_low in a read-only transaction" in plan["error"] and not plan["not_made"]
    # A function that tries to become dbdiag's login again stays the statement's role (a plain SET ROLE would let
    # it become postgres; inside the security-definer planner PostgreSQL refuses).
    assert "canary ran as plansafe_low in a read-only" in stmts["SELECT plansafe_escape()"]["plan"]["error"]
    own = stmts[PG_OWN.replace("0", "$1")]["plan"]
    assert own["nodes"] and not own["error"]


def _my_run(my: Target, plan_others: bool, tmp_path: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    low = my.with_endpoint(my.host, my.port, None, "plansafe_low", "")
    held: list[Session] = []

    def statements(t0: float) -> None:
        # Both connections stay open over the middle of the step, where the source samples who runs what.
        s = Session(low)
        held.append(s)
        for sql in (MY_LOW_FIRST, MY_LOW, MY_LOW):
            s.query(sql)
        o = Session(my)
        held.append(o)
        o.query(MY_OWN)
        late = time.time() - (t0 + MY_STEP_S / 2)
        assert late < 0, (f"the plant's statements ended {late:.1f} s after the middle of the step, where the "
                          "source samples who runs what: the machine is too loaded for this plant")

    with Session(my) as s:
        s.execute("TRUNCATE plansafe.log")
    try:
        rec = _step(MyStatementSource(CollectorContext(target=my, artifacts=tmp_path,
                                                       options={"plan_others": plan_others})), my, statements,
                    MY_STEP_S)
    finally:
        for s in held:
            s.close()
    with Session(my) as s:
        who = [str(r["who"]) for r in s.query("SELECT who FROM plansafe.log")]
    return _by_text(rec), who


@pytest.fixture(scope="module")
def my(my_server) -> Target:
    t = my_server.target()
    with Session(t) as s:
        for sql in MY_SETUP:
            s.execute(sql)
    return t


def _my_stmt(stmts: dict[str, dict[str, Any]], needle: str) -> dict[str, Any]:
    def squeeze(t: str) -> str:  # digest texts space out names and operators: "plansafe . canary (?)"
        return "".join(t.split()).replace("`", "").lower()

    (hit,) = [v for k, v in stmts.items() if squeeze(needle) in squeeze(k)]
    return hit


def test_mariadb_plans_no_other_user_statement_by_default(my, tmp_path) -> None:
    stmts, who = _my_run(my, False, tmp_path)
    assert not [w for w in who if w.startswith("root@")], "EXPLAIN ran plansafe.canary() with dbdiag's privileges"
    assert set(who) == {"plansafe_low@%"}  # the low user's own calls (the optimiser calls it twice per run)
    seen = _my_stmt(stmts, "SELECT * FROM plansafe.t WHERE id")["plan"]
    assert seen["not_made"].startswith("statement of user plansafe_low; run with --plan-others")
    unseen = _my_stmt(stmts, "SELECT v FROM plansafe.t")["plan"]
    assert "does not say whose statement this is" in unseen["not_made"] and "plansafe_low" in unseen["not_made"]
    own = _my_stmt(stmts, "SELECT id FROM plansafe.t")["plan"]  # seen run by dbdiag's own user: planned
    assert own["nodes"] and not own["error"] and not own["not_made"], own


def test_mariadb_plans_others_when_asked_in_a_read_only_transaction(my, tmp_path) -> None:
    stmts, who = _my_run(my, True, tmp_path)
    # Asked for, the plan is made with dbdiag's privileges (MariaDB has no SET ROLE to another user), and
    # EXPLAIN calls the function; the read-only transaction stops its write.
    assert set(who) == {"plansafe_low@%"}
    plan = _my_stmt(stmts, "SELECT * FROM plansafe.t WHERE id")["plan"]
    assert "READ ONLY transaction" in plan["error"] and not plan["not_made"]


def test_postgres_does_not_plan_as_a_role_its_login_cannot_become(pg, tmp_path) -> None:
    # dbdiag logged in as a monitoring role (pg_read_all_stats: it sees every role's statements), not a member of
    # plansafe_low: even asked to, it cannot plan as plansafe_low, so it does not plan at all.
    stmts, who = _pg_run(pg, True, tmp_path, login="plansafe_mon")
    assert set(who) == {"plansafe_low"}
    plan = stmts["SELECT plansafe_canary()"]["plan"]
    assert plan["not_made"] == ("statement of role plansafe_low: dbdiag's login plansafe_mon is not a member of it, "
                                "so cannot plan as plansafe_low") and not plan["error"]


def test_postgres_before_16_plans_as_the_role_through_prepare(pg_service, tmp_path) -> None:
    """The pre-16 generic plan (PREPARE, EXPLAIN EXECUTE) inside the planner that runs as the statement's role, on
    the machine's PostgreSQL 15 (its own uniquely named role and schema, dropped after; no setting changed)."""
    tag = f"plansafe_{os.getpid()}"
    with Session(pg_service) as s:
        assert s.version_num < 160000, "this test needs the machine's PostgreSQL 15 (the pre-16 plan path)"
        path = s.query("SHOW search_path")[0]["search_path"]
        s.execute(f"CREATE ROLE {tag}")
        try:
            s.execute(f"CREATE SCHEMA {tag}")
            s.execute(f"CREATE TABLE {tag}.t (id int PRIMARY KEY, v int)")
            s.execute(f"""CREATE FUNCTION {tag}.canary(x int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
                          BEGIN RAISE EXCEPTION 'canary ran as %', current_user; END $$""")
            s.execute(f"GRANT USAGE ON SCHEMA {tag} TO {tag}")
            s.execute(f"GRANT SELECT ON {tag}.t TO {tag}")
            src = PgStatementSource(CollectorContext(target=pg_service, artifacts=tmp_path,
                                                     options={"plan_others": True}))
            src.own_role = str(s.query("SELECT current_user::regrole::text AS r")[0]["r"])
            plan, _ = src.explain(s, f"SELECT v FROM {tag}.t WHERE id = $1", f"1|{tag}")
            assert plan.method == "generic_prepared" and plan.nodes[0].table == f"{tag}.t"
            # the constant argument is folded at plan time: as the statement's role, never as postgres
            with pytest.raises(DbError, match=f"canary ran as {tag}"):
                src.explain(s, f"SELECT v FROM {tag}.t WHERE id = $1 AND v = {tag}.canary(7)", f"2|{tag}")
            assert s.query("SELECT count(*) AS n FROM pg_prepared_statements")[0]["n"] == 0
            assert s.query("SHOW search_path")[0]["search_path"] == path  # SET LOCAL: gone with the transaction
        finally:
            s.execute(f"DROP SCHEMA IF EXISTS {tag} CASCADE")
            s.execute(f"DROP OWNED BY {tag}")  # this session's pg_temp planner, owned by the role
            s.execute(f"DROP ROLE {tag}")
