"""PostgreSQL collectors against real servers: the throwaway PostgreSQL 18 (pg_server) and the
machine's PostgreSQL 15 service (pg_service, whose settings are never changed).

Each test makes its own scratch schema ``dbdiag_test_pgc_<pid>`` and drops it; roles and
extensions are only created on throwaway servers. Loads are a few hundred single-row
inserts over a few connections; lock waits are made by two sessions, one holding a row lock
in an open transaction and one UPDATE-ing the same row in a thread.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from collectors.base import Collector, CollectorContext
from collectors.pg import PG_COLLECTORS, PgSettingsCollector, PgStatsCollector, PgWaitsCollector
from collectors.pg.common import new_parts
from collectors.pg.settings import DURABILITY, PATH_NOTE
from collectors.pg.waits import HIDDEN_NOTE, profile
from collectors.rates import total_delta
from collectors.runner import CollectorRunner, probe_all
from diag.core import servers
from diag.core.bundle import BundleWriter, read_jsonl
from diag.core.db import Session, connect
from diag.core.errors import DbError
from diag.core.targets import Target

SCHEMA = f"dbdiag_test_pgc_{os.getpid()}"
N_INSERTS = 300
LOAD_THREADS = 3
FLUSH_WAIT_S = 4.0  # PostgreSQL 15+ backends flush their counters at most once a second


# -- fixtures and helpers ------------------------------------------------------------------------

@pytest.fixture(params=["pg18_throwaway", "pg15_service"])
def target(request: pytest.FixtureRequest) -> Target:
    """Each test runs on both servers."""
    if request.param == "pg18_throwaway":
        return request.getfixturevalue("pg_server").target()
    return request.getfixturevalue("pg_service")


@pytest.fixture(scope="module")
def plain_server() -> Iterator[servers.ThrowawayServer]:
    """A throwaway server without the default instrumentation (no pg_stat_statements loaded or created)."""
    srv = servers.start_postgres(instrument=False)
    yield srv
    srv.stop()


def ctx(t: Target, tmp_path: Path, **options: Any) -> CollectorContext:
    return CollectorContext(target=t, artifacts=tmp_path, options=options)


@contextlib.contextmanager
def scratch(t: Target) -> Iterator[str]:
    """Schema SCHEMA with table ``t(id int primary key, v int)`` holding row id=1; dropped afterwards."""
    with Session(t) as s:
        s.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        s.execute(f"CREATE SCHEMA {SCHEMA}")
        s.execute(f"CREATE TABLE {SCHEMA}.t (id int PRIMARY KEY, v int NOT NULL)")
        s.execute(f"INSERT INTO {SCHEMA}.t VALUES (1, 0)")
    try:
        yield f"{SCHEMA}.t"
    finally:
        with Session(t) as s:
            s.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


def insert_load(t: Target, table: str, n: int, threads: int = LOAD_THREADS) -> None:
    """``n`` single-row autocommit INSERTs over ``threads`` connections (ids 1000...)."""
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            conn = connect(t, application_name="dbdiag-test-load")
            try:
                cur = conn.cursor()
                for i in range(k, n, threads):
                    cur.execute(f"INSERT INTO {table} (id, v) VALUES (%s, %s)", (1000 + i, i))
            finally:
                conn.close()
        except BaseException as e:  # surfaced in the test thread below
            errors.append(e)

    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join(60)
    assert not errors, errors


def _capture(errors: list[BaseException], fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except BaseException as e:  # re-raised by the test thread
        errors.append(e)


def poll_until(fn: Callable[[], bool], timeout_s: float, step_s: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(step_s)
    return fn()


@contextlib.contextmanager
def row_lock_wait(t: Target, table: str) -> Iterator[int]:
    """One session holds row id=1 in an open transaction; a second one's UPDATE of it waits.

    Yields the waiting backend's pid once pg_stat_activity shows it waiting on a lock.
    """
    hold = connect(t, autocommit=False, application_name="dbdiag-test-holder")
    waiter = connect(t, application_name="dbdiag-test-waiter")
    th: threading.Thread | None = None
    done = threading.Event()
    try:
        hold.cursor().execute(f"UPDATE {table} SET v = v + 1 WHERE id = 1")
        wcur = waiter.cursor()
        wcur.execute("SELECT pg_backend_pid()")
        wpid = int(wcur.fetchone()[0])

        def update() -> None:
            wcur.execute(f"UPDATE {table} SET v = v + 10 WHERE id = 1")
            done.set()

        th = threading.Thread(target=update)
        th.start()
        with Session(t) as s:
            assert poll_until(lambda: s.query("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                                              (wpid,))[0]["wait_event_type"] == "Lock", 5.0, 0.05)
        yield wpid
        hold.commit()
        th.join(10)
        assert done.is_set(), "the waiting UPDATE did not finish after the holder committed"
    finally:
        hold.close()  # a failed test rolls back here, which lets the waiter finish
        if th is not None:
            th.join(10)
        waiter.close()


def run_for(c: Collector, seconds: float) -> list[dict[str, Any]]:
    """Call sample() on the collector's own interval for ``seconds``; the records it returned."""
    out: list[dict[str, Any]] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        rec = c.sample()
        if rec is not None:
            out.extend(rec if isinstance(rec, list) else [rec])
        time.sleep(c.interval_s)
    return out


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# -- pg_stats ------------------------------------------------------------------------------------

def test_a_prepared_read_answers_as_a_query_does(target: Target) -> None:
    """Session.prepared (the 10 Hz samplers' reads: prepared once, parameters bound in) gives the rows a query
    gives, quotes its parameters, and its errors are DbErrors of the same kinds (a statement timeout)."""
    sql = "SELECT %(a)s::int AS a, %(b)s AS b, NULL::text AS c, %(d)s::text[] AS d, %(e)s AS e"
    params = {"a": 7, "b": "it's -- not a comment", "d": ["x'y", ""], "e": True}
    with Session(target, statement_timeout_ms=300) as s:
        read = s.prepared(sql, params)
        want = [{"a": 7, "b": "it's -- not a comment", "c": None, "d": ["x'y", ""], "e": True}]
        assert s.query(sql, params) == want
        assert read() == want and read() == want
        slow = s.prepared("SELECT pg_sleep(2)")
        with pytest.raises(DbError) as err:
            slow()
        assert err.value.kind == "timeout", err.value
        assert read() == want  # the session goes on after the error


def test_pg_stats_counts_a_write_load(target: Target, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    with Session(target, statement_timeout_ms=0) as s:
        vnum = s.version_num
    c = PgStatsCollector(ctx(target, tmp_path))
    pr = c.probe()
    assert pr.ok, pr
    c.start()
    try:
        first = c.sample()
        records = [first]
        with scratch(target) as table:
            failed: list[BaseException] = []
            load = threading.Thread(target=lambda: _capture(failed, insert_load, target, table, N_INSERTS))
            load.start()
            while load.is_alive():  # sample while the load runs, as the runner would
                records.append(c.sample())
                time.sleep(0.2)
            load.join()
            assert not failed, failed

            def flushed() -> bool:
                # counters of the load's backends reach shared memory within about a second
                records.append(c.sample())
                return records[-1]["db.tup_inserted"] - first["db.tup_inserted"] >= N_INSERTS

            poll_until(flushed, FLUSH_WAIT_S, 0.3)
        records.extend(c.stop() or [])
    finally:
        if c.session is not None:
            c.session.close()
    counters = [r for r in records if r.get("kind") is None]
    last = counters[-1]
    assert all(is_number(v) for r in counters for k, v in r.items() if k != "off"), "raw numbers only"

    def delta(key: str) -> float:
        d = total_delta(r.get(key) for r in counters)
        assert d is not None, key
        return d

    assert delta("db.xact_commit") >= N_INSERTS
    assert delta("db.tup_inserted") >= N_INSERTS
    assert delta("alldb.xact_commit") >= delta("db.xact_commit")
    assert delta("wal.wal_bytes") > N_INSERTS * 50  # a heap insert plus a commit record each
    assert delta("wal.lsn_bytes") > N_INSERTS * 50
    assert delta("wal.wal_records") >= 2 * N_INSERTS
    assert delta("wal.wal_write") > 0 and delta("wal.wal_sync") > 0  # fsync on: commits flush WAL
    assert "checkpointer.num_timed" in last and "bgwriter.buffers_alloc" in last
    assert last["locks.waiting"] == sum(v for k, v in last.items() if k.startswith("locks.waiting."))
    io_keys = [k for k in last if k.startswith("io.")]
    if vnum >= 160000:
        assert delta("io.client backend.relation.normal.hits") > 0
        # 300 rows of (int, int), ~36 bytes each with the line pointer, fill more than the table's first 8 kB page
        assert delta("io.client backend.relation.normal.extends") > 0
        if vnum >= 180000:
            assert delta("io.client backend.wal.normal.writes") > 0
    else:
        assert io_keys == []
        assert any(m.startswith("pg_stat_io: needs PostgreSQL 16") for m in pr.missing), pr.missing
    stmts = [r for r in records if r.get("kind") == "statements"]
    if request.node.callspec.params["target"] == "pg18_throwaway":  # instrumented, as throwaways are by default
        assert not any(m.startswith("pg_stat_statements") for m in pr.missing), pr.missing
        assert len(stmts) == 1 and stmts[0]["calls"] >= N_INSERTS, stmts
    else:  # the service: no pg_stat_statements
        assert any(m.startswith("pg_stat_statements: not installed") for m in pr.missing), pr.missing
        assert stmts == []


# -- pg_waits and pg_locks -----------------------------------------------------------------------

def test_a_row_lock_wait_shows_in_the_wait_profile(target: Target, tmp_path: Path) -> None:
    waits = PgWaitsCollector(ctx(target, tmp_path))
    stats = PgStatsCollector(ctx(target, tmp_path))
    assert waits.probe().ok
    with scratch(target) as table:
        waits.start()
        stats.start()
        try:
            with row_lock_wait(target, table):
                recs = run_for(waits, 1.15)
                during = stats.sample()
            tail = waits.stop() or []
        finally:
            stats.stop()
    assert recs, "one record a second"
    rec = recs[0]
    # 10 Hz, but a busy machine may miss ticks: the waits below are checked against the ticks it took.
    assert 1 <= rec["ticks"] <= 12, rec
    lock = rec["waits"].get("Lock:transactionid", 0) + rec["waits"].get("Lock:tuple", 0)
    assert lock >= rec["ticks"] - 1, rec  # the waiter waited through the whole window
    assert rec["waits"].get("Client:ClientRead", 0) >= rec["ticks"] - 1, rec  # the holder, idle in transaction
    assert rec["samples"] >= lock + rec["waits"]["Client:ClientRead"]
    shares = profile(recs + tail)
    assert 0 < shares.get("Lock:transactionid", 0) + shares.get("Lock:tuple", 0) < 1
    assert during["locks.waiting.transactionid"] + during["locks.waiting.tuple"] >= 1
    assert during["locks.waiting"] >= 1


# -- pg_settings ---------------------------------------------------------------------------------

def test_pg_settings_snapshot(target: Target, tmp_path: Path) -> None:
    c = PgSettingsCollector(ctx(target, tmp_path))
    pr = c.probe()
    assert pr.ok and pr.missing == (), pr
    c.start()
    rec = c.sample()
    assert c.sample() is None, "one snapshot, not one a second"
    assert c.stop() is None, "nothing changed during the run"
    assert rec is not None and rec["kind"] == "settings"
    assert set(rec["durability"]) >= set(DURABILITY) - {"track_wal_io_timing"}
    assert rec["durability"]["fsync"]["value"] in ("on", "off")
    assert rec["durability"]["shared_buffers"]["unit"] == "8kB"
    assert rec["server_version_num"] >= 150000 and rec["server_version"].split(".")[0].isdigit()
    assert rec["data_directory"]
    assert "application_name" not in rec["settings"] and "statement_timeout" not in rec["settings"]
    assert all(v["source"] != "default" for v in rec["settings"].values())
    if target.port != 5432:  # the throwaway: started with -c max_connections=200
        assert rec["settings"]["max_connections"] == {"value": "200", "unit": None, "source": "command line"}
        assert rec["data_directory"].endswith("/data")


# -- pg_stat_statements --------------------------------------------------------------------------

def test_pg_stat_statements_top_statements(pg_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    # pg_server is instrumented as every throwaway by default: pg_stat_statements preloaded and created
    t = pg_server.target()
    c = PgStatsCollector(ctx(t, tmp_path))
    pr = c.probe()
    assert pr.ok and pr.missing == (), pr
    with scratch(t) as table:
        c.start()
        try:
            insert_load(t, table, N_INSERTS)
            out = c.stop() or []
        finally:
            if c.session is not None:
                c.session.close()
    stmts = [r for r in out if r.get("kind") == "statements"]
    assert len(stmts) == 1
    rec = stmts[0]
    assert rec["calls"] >= N_INSERTS and rec["total_exec_time"] > 0
    top = rec["top"]
    inserts = [s for s in top if s["query"] and s["query"].startswith(f"INSERT INTO {table}")]
    assert len(inserts) == 1, top
    ins = inserts[0]
    assert ins["calls"] == N_INSERTS and ins["rows"] == N_INSERTS
    assert ins["wal_bytes"] > 0 and ins["total_exec_time"] > 0 and ins["role"] == "postgres"
    assert top[0]["total_exec_time"] >= top[-1]["total_exec_time"]
    # Our own queries are left out: told by their queryid (the stored texts are fingerprints, without comments)
    with Session(t) as s:  # ... which ran, and kept their marker in pg_stat_statements
        ours = s.query("SELECT queryid::text AS q FROM pg_stat_statements WHERE query LIKE %s", ("%/* dbdiag */%",))
    assert len(ours) >= 5
    assert not {r["q"] for r in ours} & {str(s["queryid"]) for s in top}, "our own queries left out"


def test_pg_stat_statements_of_other_roles_need_pg_read_all_stats(pg_server: servers.ThrowawayServer,
                                                                   tmp_path: Path) -> None:
    role = f"dbdiag_test_nostats_{os.getpid()}"
    with Session(pg_server.target()) as s:
        s.execute(f"CREATE ROLE {role} LOGIN")
    try:
        pr = PgStatsCollector(ctx(replace(pg_server.target(), user=role), tmp_path)).probe()
        assert pr.ok
        assert pr.missing == ("pg_stat_statements of other roles: needs pg_monitor or pg_read_all_stats",)
        assert "pg_monitor" in pr.hint
    finally:
        with Session(pg_server.target()) as s:
            s.execute(f"DROP ROLE {role}")


def test_pg_stat_statements_installed_but_not_loaded(plain_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    """The extension created in a database of a server that did not preload its library."""
    db = f"dbdiag_test_pss_{os.getpid()}"
    with Session(plain_server.target()) as s:
        s.execute(f"CREATE DATABASE {db}")
    try:
        t = replace(plain_server.target(), database=db)
        with Session(t) as s:
            s.execute("CREATE EXTENSION pg_stat_statements")
        pr = PgStatsCollector(ctx(t, tmp_path)).probe()
        assert pr.ok
        assert "pg_stat_statements: installed but not loaded" in pr.missing
        assert "shared_preload_libraries" in pr.hint
    finally:
        with Session(plain_server.target()) as s:
            s.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


# -- privileges ----------------------------------------------------------------------------------

@pytest.fixture
def roles(pg_server: servers.ThrowawayServer) -> Iterator[dict[str, Target]]:
    """Two login roles on the throwaway: one with only pg_monitor, one with nothing."""
    mon, plain = f"dbdiag_test_mon_{os.getpid()}", f"dbdiag_test_plain_{os.getpid()}"
    base = pg_server.target()
    with Session(base) as s:
        for r in (mon, plain):
            s.execute(f"DROP ROLE IF EXISTS {r}")
            s.execute(f"CREATE ROLE {r} LOGIN")
        s.execute(f"GRANT pg_monitor TO {mon}")
    try:
        yield {"monitor": replace(base, user=mon), "plain": replace(base, user=plain)}
    finally:
        with Session(base) as s:
            for r in (mon, plain):
                s.execute(f"DROP ROLE IF EXISTS {r}")


def test_a_pg_monitor_role_runs_everything(roles: dict[str, Target], tmp_path: Path) -> None:
    t = roles["monitor"]
    probes = {cls.name: cls(ctx(t, tmp_path)).probe() for cls in PG_COLLECTORS}
    assert all(p.ok for p in probes.values()), probes
    assert probes["pg_waits"].missing == ()
    assert probes["pg_settings"].missing == ()
    # nothing for want of privileges (pg_server is instrumented: pg_stat_statements is there to read)
    assert probes["pg_stats"].missing == ()
    assert probes["statements"].missing == () and probes["pg_blocking"].missing == ()
    settings = PgSettingsCollector(ctx(t, tmp_path))
    settings.start()
    rec = settings.sample()
    settings.stop()
    assert rec is not None and rec["data_directory"] and "missing" not in rec


def test_a_role_without_pg_monitor_gets_the_missing_parts_named(roles: dict[str, Target], tmp_path: Path,
                                                                pg_server: servers.ThrowawayServer) -> None:
    t = roles["plain"]
    probes = {cls.name: cls(ctx(t, tmp_path)).probe() for cls in PG_COLLECTORS}
    assert all(p.ok for p in probes.values()), probes
    assert probes["pg_waits"].missing == (HIDDEN_NOTE,)
    assert "pg_monitor" in probes["pg_waits"].hint
    assert probes["pg_settings"].missing == (PATH_NOTE,)
    settings = PgSettingsCollector(ctx(t, tmp_path))
    settings.start()
    rec = settings.sample()
    settings.stop()
    assert rec is not None and rec["data_directory"] is None and rec["missing"] == [PATH_NOTE]
    assert rec["durability"]["fsync"]["value"] == "on"  # ordinary settings stay visible
    # In action: the same lock wait, made by the superuser's sessions, is hidden from the plain
    # role but seen by the pg_monitor role.
    seen: dict[str, dict[str, Any]] = {}
    with scratch(pg_server.target()) as table:
        with row_lock_wait(pg_server.target(), table):
            for who in ("plain", "monitor"):
                w = PgWaitsCollector(ctx(roles[who], tmp_path))
                w.start()
                seen[who] = run_for(w, 1.05)[0]
                w.stop()
    assert seen["plain"]["hidden"] >= 2 * (seen["plain"]["ticks"] - 1), seen
    assert "Lock:transactionid" not in seen["plain"]["waits"] and "Lock:tuple" not in seen["plain"]["waits"]
    assert seen["monitor"]["hidden"] == 0
    assert seen["monitor"]["waits"].get("Lock:transactionid", 0) + seen["monitor"]["waits"].get("Lock:tuple", 0) > 0


def test_a_part_that_lacks_a_privilege_goes_off_once(roles: dict[str, Target], pg_server: servers.ThrowawayServer
                                                     ) -> None:
    with scratch(pg_server.target()) as table, Session(roles["plain"]) as s:
        parts = new_parts()
        assert parts.query("secret", s, f"SELECT * FROM {table}") is None
        assert "permission denied" in parts.off["secret"] and "pg_monitor" in parts.off["secret"]
        assert parts.unsaid() == {"secret": parts.off["secret"]}
        assert parts.query("secret", s, f"SELECT * FROM {table}") is None  # not tried again
        assert parts.unsaid() == {}
        assert parts.query("fine", s, "SELECT 1 AS one") == [{"one": 1}]


def test_an_unreachable_server_fails_every_probe_with_a_hint(pg_server: servers.ThrowawayServer,
                                                            tmp_path: Path) -> None:
    t = replace(pg_server.target(), port=servers.free_port())
    for cls in PG_COLLECTORS:
        pr = cls(ctx(t, tmp_path)).probe()
        assert not pr.ok and "DSN" in pr.hint, (cls.name, pr)


# -- through the runner --------------------------------------------------------------------------

def test_the_runner_writes_each_collectors_series(pg_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    t = pg_server.target()
    bundle = BundleWriter(tmp_path / "run")
    cols: list[Collector] = [cls(ctx(t, tmp_path)) for cls in PG_COLLECTORS]
    probes = probe_all(cols)
    assert all(p.ok for p in probes.values()), probes
    runner = CollectorRunner(bundle, cols)
    with scratch(t) as table:
        runner.start()
        try:
            insert_load(t, table, 100, threads=2)
            time.sleep(1.2)
        finally:
            runner.stop()
    events = read_jsonl(tmp_path / "run" / "events.jsonl")
    assert not [e for e in events if e["kind"] == "collector_off"], events
    series = {p.name.split("--")[0]: read_jsonl(p) for p in (tmp_path / "run" / "series").glob("*.jsonl")}
    # the step sources (statements, pg_tables, oldest_xact) have files too: they run in the run's process
    assert set(series) == {"pg_stats", "pg_waits", "pg_settings", "statements", "pg_blocking", "pg_tables",
                           "oldest_xact"}
    assert len(series["pg_stats"]) >= 2 and all("t" in r for r in series["pg_stats"])
    assert total_delta(r.get("db.xact_commit") for r in series["pg_stats"]) > 0
    assert series["pg_waits"] and all(r["ticks"] >= 1 for r in series["pg_waits"])
    assert sum(r["ticks"] for r in series["pg_waits"]) >= 10
    assert [r["kind"] for r in series["pg_settings"]] == ["settings"]
    assert series["pg_blocking"] and all(r["ticks"] >= 1 for r in series["pg_blocking"])
