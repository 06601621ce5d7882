"""MariaDB's blocking sampler with performance_schema OFF (MariaDB's default, and the machine's service).

A throwaway MariaDB started without instrumentation. The sampler (collectors.mysql.blocking, driven here
directly, records as it writes them) must then:

* name a row lock's blocker (INNODB_LOCK_WAITS + INNODB_TRX) as idle in a transaction, with no statement
  (nothing records an idle thread's last statement without performance_schema);
* say that a LOCK TABLES ... WRITE waiter has no holder it can see, and why;
* name the LOCK TABLES holder once MariaDB's metadata_lock_info plugin is installed, by the lock mode only
  LOCK TABLES ... WRITE takes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collectors.base import CollectorContext
from collectors.mysql.blocking import NO_MDL_SOURCE, MyBlockingCollector
from diag.core import servers
from diag.core.db import Session
from diag.core.schema.blocking import BlockingWindow

HOLD_S = 1.0


@pytest.fixture(scope="module")
def plain_mariadb() -> Iterator[servers.ThrowawayServer]:
    srv = servers.start_mysql({"performance_schema": "OFF"}, instrument=False)
    try:
        with Session(srv.target(), statement_timeout_ms=0) as s:
            s.execute("CREATE DATABASE dbdiag")
            s.execute("CREATE TABLE dbdiag.blk (id int PRIMARY KEY, n int NOT NULL)")
            s.execute("INSERT INTO dbdiag.blk SELECT seq, 0 FROM dbdiag.seq_1_to_100")
        yield srv
    finally:
        srv.stop()


def sample_while(srv: servers.ThrowawayServer, hold: list[str], release: str, waiter_sql: str
                 ) -> tuple[list[BlockingWindow], int, Any]:
    """Run the sampler while an outside session holds a lock for HOLD_S and another waits for it."""
    c = MyBlockingCollector(CollectorContext(target=srv.target(), artifacts=Path("/nonexistent")))
    probe = c.probe()
    c.start()
    holder = Session(srv.target(), statement_timeout_ms=0, application_name="holder")
    pid = int(holder.query("SELECT CONNECTION_ID() AS pid")[0]["pid"])
    for sql in hold:
        holder.execute(sql)

    def wait() -> None:
        with Session(srv.target(), statement_timeout_ms=0) as w:
            w.execute(waiter_sql)

    waiter = threading.Thread(target=wait)
    waiter.start()
    recs = []
    t_end = time.monotonic() + HOLD_S
    try:
        while time.monotonic() < t_end:
            r = c.sample()
            if r:
                recs.append(BlockingWindow.from_dict(r))
            time.sleep(c.interval_s)
    finally:
        holder.execute(release)
        holder.close()
        waiter.join(5)
        recs += [BlockingWindow.from_dict(r) for r in c.stop() or []]
    return recs, pid, probe


def test_row_lock_blocker_named_without_performance_schema(plain_mariadb) -> None:
    recs, pid, probe = sample_while(plain_mariadb, ["BEGIN", "UPDATE dbdiag.blk SET n = n + 1 WHERE id = 7"],
                                    "COMMIT", "UPDATE dbdiag.blk SET n = n + 1 WHERE id = 7")
    assert probe.ok and any(m.startswith("last_statements: performance_schema is OFF") for m in probe.missing)
    blockers = [b for r in recs for b in r.blockers]
    assert blockers and {b.pid for b in blockers} == {pid}, recs
    b = blockers[-1]
    assert b.state == "Sleep (idle in transaction)" and b.statement == "" and b.xact_s is not None
    assert "record lock on `dbdiag`.`blk`" in b.lock


def test_lock_tables_without_holder_source_says_so_then_plugin_names_it(plain_mariadb) -> None:
    recs, pid, probe = sample_while(plain_mariadb, ["LOCK TABLES dbdiag.blk WRITE"], "UNLOCK TABLES",
                                    "UPDATE dbdiag.blk SET n = n + 1 WHERE id = 8")
    assert any(m.startswith("metadata lock holders (LOCK TABLES, DDL) not visible: performance_schema is OFF")
               for m in probe.missing), probe
    assert not [b for r in recs for b in r.blockers], recs
    assert sum(r.unattributed_s for r in recs) >= 0.5 * HOLD_S, recs
    assert {r.unattributed for r in recs if r.unattributed_s} == {
        f"{NO_MDL_SOURCE}: performance_schema is OFF, and the metadata_lock_info plugin is not installed"}
    with Session(plain_mariadb.target()) as s:
        s.execute("INSTALL SONAME 'metadata_lock_info'")
    try:
        recs, pid, probe = sample_while(plain_mariadb, ["LOCK TABLES dbdiag.blk WRITE"], "UNLOCK TABLES",
                                        "UPDATE dbdiag.blk SET n = n + 1 WHERE id = 8")
    finally:
        with Session(plain_mariadb.target()) as s:
            s.execute("UNINSTALL SONAME 'metadata_lock_info'")
    assert not any(m.startswith("metadata lock holders") for m in probe.missing), probe
    blockers = [b for r in recs for b in r.blockers]
    assert blockers and {b.pid for b in blockers} == {pid}, recs
    assert "MDL_SHARED_NO_READ_WRITE = LOCK TABLES ... WRITE" in blockers[-1].lock
    assert blockers[-1].state == "Sleep"
