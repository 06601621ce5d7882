"""MySQL / MariaDB collectors against real servers: the machine's MariaDB service and a throwaway one.

The service (``my_service``, performance_schema OFF as MariaDB ships) is only
read, plus a scratch database ``dbdiag_test_x_<pid>`` created and dropped here;
its settings are never changed. Everything that needs a server setting,
a consumer switched on or test users runs on a throwaway server started with
performance_schema=ON.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from collectors.base import CollectorContext
from collectors.mysql import MYSQL_COLLECTORS, MyBlockingCollector, MySettingsCollector, MyStatementSource, \
    MyStatusCollector, MyWaitsCollector
from collectors.mysql.waits import TICK_S
from collectors.oldest import OldestTransaction
from collectors.rates import total_delta
from collectors.runner import CollectorRunner, collector_key, probe_all
from diag.core import servers
from diag.core.bundle import BundleWriter, read_jsonl, safe_name
from diag.core.db import Session
from diag.core.errors import DbError
from diag.core.targets import Target

N_INSERTS = 300


def _ctx(target: Target, tmp_path: Path) -> CollectorContext:
    return CollectorContext(target=target, artifacts=tmp_path / "artifacts")


def _wait_for(cond: Callable[[], Any], timeout_s: float, what: str, every_s: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


@contextlib.contextmanager
def scratch_db(target: Target) -> Iterator[str]:
    """A scratch database with table t(id, v) holding row (1, 0); dropped afterwards."""
    db = f"dbdiag_test_x_{os.getpid()}"
    with Session(target) as s:
        s.execute(f"DROP DATABASE IF EXISTS {db}")
        s.execute(f"CREATE DATABASE {db}")
        s.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB")
        s.execute(f"INSERT INTO {db}.t VALUES (1, 0)")
        s.execute(f"CREATE TABLE {db}.load (id INT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB")
        try:
            yield db
        finally:
            s.execute(f"DROP DATABASE IF EXISTS {db}")


def insert_load(target: Target, db: str, n: int = N_INSERTS) -> None:
    """``n`` single-row autocommit inserts from one connection."""
    with Session(target) as s:
        for i in range(n):
            s.execute(f"INSERT INTO {db}.load (v) VALUES (%s)", (i,))


@contextlib.contextmanager
def row_lock_wait(target: Target, db: str) -> Iterator[tuple[int, int]]:
    """Session A holds row 1 FOR UPDATE in an open transaction; session B's UPDATE of it waits.

    Yields (A's, B's) connection ids once INNODB_TRX shows B in LOCK WAIT.
    """
    holder = Session(target)
    holder.execute("BEGIN")
    holder.query(f"SELECT * FROM {db}.t WHERE id = 1 FOR UPDATE")
    ids: dict[str, int] = {"a": int(holder.query("SELECT CONNECTION_ID() AS i")[0]["i"])}
    outcome: list[str] = []

    def blocked() -> None:
        with Session(target, statement_timeout_ms=0) as b:
            ids["b"] = int(b.query("SELECT CONNECTION_ID() AS i")[0]["i"])
            b.execute("SET SESSION innodb_lock_wait_timeout = 5")
            try:
                b.execute(f"UPDATE {db}.t SET v = v + 1 WHERE id = 1")
                outcome.append("updated")
            except DbError as e:
                outcome.append(e.kind)

    th = threading.Thread(target=blocked, daemon=True)
    th.start()
    try:
        with Session(target) as watch:
            _wait_for(lambda: "b" in ids and watch.query(
                "SELECT 1 FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' "
                "AND trx_mysql_thread_id = %s", (ids["b"],)), 5, "session B to wait for the row lock",
                every_s=0.25)  # INNODB_TRX refreshes only after 100 ms without readers
        yield ids["a"], ids["b"]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        th.join(10)
    assert outcome == ["updated"], f"session B should get the row once A rolled back, got {outcome}"


def one_record(c: MyWaitsCollector, timeout_s: float = 3.0) -> dict[str, Any]:
    """Tick the sampler at 10 Hz until it emits its per-second record."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rec = c.sample()
        if rec is not None:
            return rec
        time.sleep(TICK_S)
    raise AssertionError("the wait sampler gave no record within 3 s")


def _series(bundle: BundleWriter, c: Any) -> Path:
    return bundle.path / "series" / f"{safe_name(collector_key(c))}.jsonl"


# --- the machine's MariaDB service -------------------------------------------------------------


def test_insert_load_gives_plausible_deltas(my_service: Target, tmp_path: Path) -> None:
    """All three collectors in their own processes while 300 autocommit inserts run."""
    bundle = BundleWriter(tmp_path / "run")
    ctx = CollectorContext(target=my_service, artifacts=bundle.path / "artifacts")
    cols = [cls(ctx) for cls in (MyStatusCollector, MyWaitsCollector, MySettingsCollector)]
    probes = probe_all(cols)
    assert all(p.ok for p in probes.values()), probes
    # The other collectors on this server: the statement source needs performance_schema (OFF as MariaDB ships,
    # and the service is never reconfigured), so it says why it cannot run; the blocking sampler runs without it.
    others = {cls.name: cls(ctx).probe() for cls in MYSQL_COLLECTORS if cls not in {type(c) for c in cols}}
    assert set(others) == {MyStatementSource.name, MyBlockingCollector.name, OldestTransaction.name}, others
    assert others[MyBlockingCollector.name].ok and others[OldestTransaction.name].ok, others  # root has PROCESS
    if Session(my_service).query("SELECT @@performance_schema AS p")[0]["p"] not in (1, "1", "ON"):
        stmt = others[MyStatementSource.name]
        assert not stmt.ok and "performance_schema" in stmt.reason and "performance_schema=ON" in stmt.hint, stmt
    status_file, waits_file, settings_file = (_series(bundle, c) for c in cols)
    with scratch_db(my_service) as db:
        # One runner per collector, each started once the previous child has opened its series: children
        # that open BundleWriter at the same instant race on its shared ".write-test" file (reported).
        runners = []
        for c, f in zip(cols, (status_file, waits_file, settings_file)):
            runners.append(CollectorRunner(bundle, [c]))
            runners[-1].start()
            _wait_for(f.exists, 10, f"{f.name} to be opened")
        try:
            _wait_for(lambda: status_file.exists() and read_jsonl(status_file), 10, "a first status record")
            insert_load(my_service, db)
            done = time.time()
            for f in (status_file, waits_file):
                _wait_for(lambda: any(r["t"] > done for r in read_jsonl(f)), 10, f"a record in {f.name} after the load")
        finally:
            for r in runners:
                r.stop()
    assert not (bundle.path / "events.jsonl").exists() or not read_jsonl(bundle.path / "events.jsonl")

    recs = read_jsonl(status_file)
    settings = read_jsonl(settings_file)
    assert len(settings) == 1 and settings[0]["snapshot"] == "start"
    sync_commit = settings[0]["durability"]["innodb_flush_log_at_trx_commit"] == "1"

    def delta(field: str) -> float:
        d = total_delta([r.get(field) for r in recs])
        assert d is not None, f"{field} missing"
        return d

    assert delta("status.Com_insert") >= N_INSERTS  # the service may have other clients: at least ours
    fsync_counter = recs[0]["log_fsync_counter"]
    assert fsync_counter == "status.Innodb_data_fsyncs"  # MariaDB 10.8+ has no Innodb_os_log_fsyncs
    # One redo fsync per commit at innodb_flush_log_at_trx_commit=1 (a single client: no group commit).
    assert delta(fsync_counter) >= (N_INSERTS * 0.9 if sync_commit else 1)
    assert delta("status.Innodb_log_writes") >= (N_INSERTS * 0.9 if sync_commit else 1)
    # Each single-row insert writes some tens to hundreds of bytes of redo.
    assert N_INSERTS * 50 <= delta("innodb.log.lsn") <= N_INSERTS * 100_000
    assert delta("status.Innodb_os_log_written") >= N_INSERTS * 50
    assert "innodb.buffer_pool.total_pages" in recs[-1]

    art = bundle.path / recs[0]["innodb_status_file"]
    text = art.read_text()
    assert text.startswith("==== dbdiag ") and "END OF INNODB MONITOR OUTPUT" in text

    waits = read_jsonl(waits_file)
    full_windows = [w["ticks"] for w in waits[:-1]]  # the last one (from stop) may be partial
    # 10 Hz over 1 s windows: never more ticks than the clock allows; on a loaded 2-vCPU machine a sampler
    # that waits for the CPU takes fewer, so the floor is half the rate (CI saw a mean of 7 at load 7).
    assert full_windows and all(1 <= n <= 14 for n in full_windows) and sum(full_windows) / len(full_windows) >= 5
    assert sum(w["samples"] + w["idle"] for w in waits) >= 1  # the load's connection was seen
    if any(m.startswith("performance_schema: OFF") for m in probes[collector_key(cols[1])].missing):
        assert {w["source"] for w in waits} == {"processlist"}


def test_row_lock_wait_shows_in_wait_profile(my_service: Target, tmp_path: Path) -> None:
    """Without performance_schema (the service's default) processlist + INNODB_TRX still show the lock wait."""
    waits = MyWaitsCollector(_ctx(my_service, tmp_path))
    status = MyStatusCollector(_ctx(my_service, tmp_path))
    probe = waits.probe()
    assert probe.ok
    ps_on = Session(my_service).query("SELECT @@performance_schema AS p")[0]["p"] in (1, "1", "ON")
    if not ps_on:
        assert probe.missing[0].startswith("performance_schema: OFF")
        assert "performance_schema=ON in my.cnf, restart" in probe.hint
    with scratch_db(my_service) as db:
        status.start()
        before = status.sample()
        with row_lock_wait(my_service, db):
            waits.start()
            rec = one_record(waits)
            during = status.sample()
        waits.stop()
        after = status.sample()
        status.stop()
    # Ticks missed on a busy machine are not the point: every tick taken must see both sessions.
    assert 1 <= rec["ticks"] <= 12, rec
    assert rec["waits"].get("Lock:row", 0) >= rec["ticks"] - 1, rec  # B waited through the whole second
    assert rec["waits"].get("ClientRead", 0) >= rec["ticks"] - 1, rec  # A sat idle inside its transaction
    if not ps_on:
        assert rec["source"] == "processlist"
    assert during["status.Innodb_row_lock_current_waits"] >= 1
    assert after["status.Innodb_row_lock_waits"] - before["status.Innodb_row_lock_waits"] >= 1


def test_wait_sampler_makes_no_disk_temporary_tables(my_service: Target, tmp_path: Path) -> None:
    """A second of wait sampling creates no temporary table on disk in the server. It read
    information_schema.PROCESSLIST, which MariaDB 10.11 fills into an on-disk temporary table at every read: one a
    tick (issue 25); it reads SHOW PROCESSLIST now. Counted in the sampler's own session (SHOW SESSION STATUS),
    so other sessions' tables do not count."""
    waits = MyWaitsCollector(_ctx(my_service, tmp_path))
    waits.start()
    s = waits.session
    assert s is not None

    def disk_tables() -> int:
        return int(s.query("SHOW SESSION STATUS LIKE 'Created_tmp_disk_tables'")[0]["Value"])

    before = disk_tables()
    rec = one_record(waits)
    after = disk_tables()
    waits.stop()
    assert rec["ticks"] >= 5, rec
    assert after - before == 0, f"{after - before} on-disk temporary tables in {rec['ticks']} ticks ({rec['source']})"


def test_blocking_sampler_reading_a_row_lock_wait_makes_no_disk_temporary_tables(my_service: Target,
                                                                                  tmp_path: Path) -> None:
    """The blocking sampler, reading every tick while a session waits for a row lock (no lock gate here: it reads
    as when the gate is open), names the holder and makes no temporary table on disk. Its thread read was
    information_schema.PROCESSLIST at every tick: one on-disk temporary table each on MariaDB, 10 a second
    while a read-write load's row-lock waits kept the gate open (issue 25); SHOW FULL PROCESSLIST now, with the
    information_schema read kept for metadata and table lock waits, which it dates to the millisecond."""
    blocking = MyBlockingCollector(_ctx(my_service, tmp_path))
    assert blocking.probe().ok
    with scratch_db(my_service) as db:
        with row_lock_wait(my_service, db) as (holder, _waiter):
            blocking.start()
            s = blocking.session
            assert s is not None

            def disk_tables() -> int:
                return int(s.query("SHOW SESSION STATUS LIKE 'Created_tmp_disk_tables'")[0]["Value"])

            before = disk_tables()
            recs: list[dict[str, Any]] = []
            deadline = time.monotonic() + 1.2
            while time.monotonic() < deadline:
                rec = blocking.sample()
                if rec:
                    recs.append(rec)
                time.sleep(TICK_S)
            after = disk_tables()
            recs += blocking.stop() or []
    blockers = {b["pid"] for r in recs for b in r.get("blockers", [])}
    assert holder in blockers, recs
    assert after - before == 0, f"{after - before} on-disk temporary tables in 1.2 s of blocking reads"


def test_settings_snapshot_on_the_service(my_service: Target, tmp_path: Path) -> None:
    c = MySettingsCollector(_ctx(my_service, tmp_path))
    probe = c.probe()
    assert probe.ok and probe.missing == (), probe
    c.start()
    try:
        rec = c.sample()
        assert c.sample() is None  # nothing changed: no second record
    finally:
        c.stop()
    assert rec is not None and rec["product"] == "mariadb" and rec["version_num"] >= 101100
    for name in ("innodb_flush_log_at_trx_commit", "sync_binlog", "log_bin", "innodb_doublewrite",
                 "innodb_flush_method", "innodb_buffer_pool_size", "innodb_log_file_size", "innodb_io_capacity",
                 "performance_schema", "thread_handling"):
        assert rec["durability"].get(name) not in (None, ""), name
    assert rec["changed_known"] is True
    for v in rec["changed"].values():
        assert set(v) == {"value", "default", "origin"} and v["origin"] != "COMPILE-TIME"


# --- a throwaway server with performance_schema=ON --------------------------------------------


@pytest.fixture(scope="module")
def ps_server() -> Iterator[servers.ThrowawayServer]:
    srv = servers.start_mysql({"performance_schema": "ON"})
    yield srv
    srv.stop()


def _set_wait_consumer(srv: servers.ThrowawayServer, on: bool) -> None:
    with Session(srv.target()) as s:
        yes = "YES" if on else "NO"
        s.execute("UPDATE performance_schema.setup_consumers SET ENABLED = %s WHERE NAME = 'events_waits_current'",
                  (yes,))
        if on:
            s.execute("UPDATE performance_schema.setup_instruments SET ENABLED = 'YES', TIMED = 'YES' "
                      "WHERE NAME LIKE 'wait/%'")


@contextlib.contextmanager
def made_user(srv: servers.ThrowawayServer, name: str, grants: list[str]) -> Iterator[Target]:
    """A user on the throwaway server with exactly ``grants``; dropped afterwards."""
    pw = f"pw-{name}-1"
    with Session(srv.target()) as s:
        s.execute(f"DROP USER IF EXISTS '{name}'@'%'")
        s.execute(f"CREATE USER '{name}'@'%' IDENTIFIED BY '{pw}'")
        for g in grants:
            s.execute(f"GRANT {g} TO '{name}'@'%'")
        try:
            yield dataclasses.replace(srv.target(), user=name, password=pw)
        finally:
            s.execute(f"DROP USER IF EXISTS '{name}'@'%'")


def test_consumer_off_is_named_and_processlist_used(ps_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    _set_wait_consumer(ps_server, False)
    c = MyWaitsCollector(_ctx(ps_server.target(), tmp_path))
    probe = c.probe()
    assert probe.ok
    assert len(probe.missing) == 1 and "events_waits_current off" in probe.missing[0], probe
    assert "setup_consumers" in probe.hint
    c.start()
    try:
        rec = one_record(c)
    finally:
        c.stop()
    assert rec["source"] == "processlist"
    assert rec["summary"] and rec["summary_full"] is True  # the summaries need no consumer


def test_performance_schema_summaries_and_wait_events(ps_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    _set_wait_consumer(ps_server, True)
    target = ps_server.target()
    c = MyWaitsCollector(_ctx(target, tmp_path))
    assert c.probe().missing == ()
    with scratch_db(target) as db:
        c.start()
        try:
            first = one_record(c)
            insert_load(target, db, 100)
            with row_lock_wait(target, db):
                after_load = one_record(c)  # the window that spanned the inserts
                second = one_record(c)  # a whole second inside the lock wait
        finally:
            c.stop()
    assert first["source"] == second["source"] == "performance_schema"
    assert first["summary_full"] is True and len(first["summary"]) >= 10
    assert all(v["count"] > 0 and v["sum_ps"] >= 0 for v in first["summary"].values())
    # The next record lists only what moved since the first: the inserts' waits did.
    assert after_load["summary_full"] is False and after_load["summary"]
    moved = after_load["summary"]
    assert any(ev.startswith("wait/io/table/sql/handler") or ev.startswith("wait/synch/") for ev in moved), moved
    for ev, v in moved.items():
        assert v["count"] > first["summary"].get(ev, {"count": -1})["count"]
    assert second["waits"].get("Lock:row", 0) >= 5, second
    assert second["waits"].get("ClientRead", 0) >= 5, second


def test_settings_changed_from_defaults(ps_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    c = MySettingsCollector(_ctx(ps_server.target(), tmp_path))
    c.start()
    try:
        rec = c.sample()
        assert rec is not None
        changed = rec["changed"]
        # Set on the command line by diag.core.servers.start_mysql.
        assert changed["max_connections"] == {"value": "300", "default": "151", "origin": "COMMAND-LINE"}
        assert changed["performance_schema"]["value"] == "ON" and changed["performance_schema"]["default"] == "OFF"
        assert rec["durability"]["performance_schema"] == "ON"
        with Session(ps_server.target()) as s:
            old = s.query("SELECT @@global.innodb_io_capacity AS v")[0]["v"]
            s.execute("SET GLOBAL innodb_io_capacity = 321")
            try:
                again = c.sample()
            finally:
                s.execute(f"SET GLOBAL innodb_io_capacity = {int(old)}")
    finally:
        c.stop()
    assert again is not None and again["snapshot"] == "change" and again["changed_now"] == ["innodb_io_capacity"]
    assert again["durability"]["innodb_io_capacity"] == "321"
    assert again["changed"]["innodb_io_capacity"]["origin"] == "SQL"


def test_process_only_user(ps_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    """PROCESS alone: INNODB STATUS and other threads visible; performance_schema parts named as missing."""
    _set_wait_consumer(ps_server, True)
    with made_user(ps_server, "dbdiag_proc", ["PROCESS ON *.*"]) as proc:
        st, wt, se = (cls(_ctx(proc, tmp_path)) for cls in (MyStatusCollector, MyWaitsCollector, MySettingsCollector))
        st_probe, wt_probe, se_probe = st.probe(), wt.probe(), se.probe()
        # performance_schema unreadable: the statement source cannot run and names the grant; the blocking
        # sampler runs and names what it does not see
        stmt_probe = MyStatementSource(_ctx(proc, tmp_path)).probe()
        assert not stmt_probe.ok and "GRANT SELECT ON performance_schema.* TO 'dbdiag_proc'@'%'" in stmt_probe.hint
        blk_probe = MyBlockingCollector(_ctx(proc, tmp_path)).probe()
        assert blk_probe.ok and any(m.startswith("last_statements:") for m in blk_probe.missing), blk_probe
        assert st_probe.ok and not any(m.startswith(("innodb_status", "innodb_metrics")) for m in st_probe.missing)
        assert se_probe.ok and se_probe.missing == ()
        assert wt_probe.ok
        named = {m.split(":")[0] for m in wt_probe.missing}
        assert {"waits_current", "waits_summary"} <= named and "innodb_trx" not in named, wt_probe
        assert "GRANT SELECT ON performance_schema.* TO 'dbdiag_proc'@'%'" in wt_probe.hint

        st.start()
        rec = st.sample()
        st.stop()
        assert rec["innodb.log.lsn"] > 0 and "parts_off" not in rec

        # The documented minimum, PROCESS + SELECT on performance_schema, has nothing missing.
        with Session(ps_server.target()) as s:
            s.execute("GRANT SELECT ON performance_schema.* TO 'dbdiag_proc'@'%'")
        full = MyWaitsCollector(_ctx(proc, tmp_path))
        assert full.probe().missing == ()
        for cls in (MyStatementSource, MyBlockingCollector):
            pr = cls(_ctx(proc, tmp_path)).probe()
            assert pr.ok and pr.missing == (), (cls.name, pr)
        with scratch_db(ps_server.target()) as db, row_lock_wait(ps_server.target(), db):
            full.start()
            try:
                wrec = one_record(full)
            finally:
                full.stop()
        assert wrec["source"] == "performance_schema" and wrec["waits"].get("Lock:row", 0) >= 5, wrec


def test_user_without_process(ps_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    with made_user(ps_server, "dbdiag_noproc", []) as user:
        st = MyStatusCollector(_ctx(user, tmp_path))
        probe = st.probe()
        assert probe.ok
        assert any(m.startswith("innodb_status:") and "PROCESS" in m for m in probe.missing), probe
        assert "GRANT PROCESS ON *.* TO 'dbdiag_noproc'@'%'" in probe.hint
        st.start()
        try:
            first, second = st.sample(), st.sample()
        finally:
            st.stop()
        assert first["status.Uptime"] > 0 and not any(k.startswith("innodb.") for k in first)
        assert set(first["parts_off"]) == {"innodb_status", "innodb_metrics"}
        assert "parts_off" not in second  # said once

        wt = MyWaitsCollector(_ctx(user, tmp_path)).probe()
        named = {m.split(":")[0] for m in wt.missing}
        assert {"innodb_trx", "processlist"} <= named, wt
        assert any("only this user's own threads" in m for m in wt.missing)
