"""The wait samplers leave out every session dbdiag opens for itself, by one rule, and count the workload's.

One session of each kind dbdiag names for itself (each collector of the engine, the run's identify, data
loads, the step-end probe, a Dask worker's, the throwaway server's set-up, the fsync test's) and one
workload client sit idle in an open transaction, a state the samplers count every tick (PostgreSQL
``Client:ClientRead``; MariaDB ``ClientRead``, from INNODB_TRX). One window of the sampler must count the
workload's session on each tick and none of the others. Session servers; the collectors driven directly.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from collectors.base import Collector, CollectorContext
from collectors.mysql import MYSQL_COLLECTORS
from collectors.mysql.waits import MyWaitsCollector
from collectors.pg import PG_COLLECTORS
from collectors.pg.waits import PgWaitsCollector
from diag.core import servers
from diag.core.db import Session, own_app_name
from workloads.clients.clientbase import APP_NAME

# The sessions dbdiag opens that are not a collector's (diag/run.py, workloads/, diag/core/servers/, fsync-test)
OTHER_KINDS = ("run", "load", "probe", "worker", "server", "fsync-test", "watch", "room")


def one_window(c: Collector) -> dict[str, Any]:
    """Start ``c``, tick it at its rate until its first record, stop it."""
    c.start()
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            rec = c.sample()
            if rec is not None:
                return rec  # type: ignore[return-value]
            time.sleep(c.interval_s)
        raise AssertionError(f"{c.name} gave no record within 5 s")
    finally:
        c.stop()


@contextmanager
def idle_in_transaction(srv: servers.ThrowawayServer, names: list[str],
                        begin: Callable[[Session, int], None]) -> Iterator[list[Session]]:
    """One session per application name, each left inside an open transaction by ``begin(session, i)``."""
    with ExitStack() as stack:
        sessions = []
        for i, name in enumerate(names):
            s = stack.enter_context(Session(srv.target(), statement_timeout_ms=0, application_name=name))
            s.execute("BEGIN")
            stack.callback(s.execute, "ROLLBACK")
            begin(s, i)
            sessions.append(s)
        yield sessions


def _own_names(collectors: tuple[type[Collector], ...]) -> list[str]:
    return [own_app_name(k) for k in (*(c.name for c in collectors), *OTHER_KINDS)]


def test_pg_waits_leaves_out_every_own_session_and_counts_the_workload(pg_server) -> None:
    own = _own_names(PG_COLLECTORS)
    with idle_in_transaction(pg_server, [*own, APP_NAME], lambda s, _i: s.execute("SELECT 1")), \
            Session(pg_server.target()) as look:
        rows = look.query("SELECT application_name AS app FROM pg_stat_activity WHERE state = 'idle in transaction'")
        assert sorted(r["app"] for r in rows) == sorted([*own, APP_NAME]), rows  # all there to be counted
        rec = one_window(PgWaitsCollector(CollectorContext(target=pg_server.target(), artifacts=Path("/nonexistent"))))
    assert rec["ticks"] >= 5 and rec["waits"].get("Client:ClientRead") == rec["ticks"], rec  # the workload's only


def test_my_waits_leaves_out_every_own_session_and_counts_the_workload(my_server) -> None:
    own = _own_names(MYSQL_COLLECTORS)
    names = [*own, APP_NAME]
    with Session(my_server.target(), statement_timeout_ms=0) as s:
        s.execute("CREATE DATABASE IF NOT EXISTS dbdiag_own")
        s.execute("CREATE OR REPLACE TABLE dbdiag_own.t (id int PRIMARY KEY, n int NOT NULL)")
        s.execute("INSERT INTO dbdiag_own.t SELECT seq, 0 FROM dbdiag_own.seq_0_to_99")
        try:
            # each on its own row: an InnoDB transaction (INNODB_TRX) that waits for nobody
            with idle_in_transaction(my_server, names, lambda w, i: w.execute(
                    "UPDATE dbdiag_own.t SET n = n + 1 WHERE id = %s", (i,))):
                attrs = s.query("SELECT ATTR_VALUE AS app FROM performance_schema.session_connect_attrs "
                                "WHERE ATTR_NAME = 'program_name'")
                assert set(names) <= {r["app"] for r in attrs}, attrs  # the attribute the sampler goes by
                rec = one_window(MyWaitsCollector(CollectorContext(target=my_server.target(),
                                                                   artifacts=Path("/nonexistent"))))
        finally:
            s.execute("DROP DATABASE dbdiag_own")
    assert rec["ticks"] >= 5 and rec["waits"].get("ClientRead") == rec["ticks"], rec  # the workload's only
    assert "own_sessions" not in rec.get("parts_off", {}), rec  # the attributes were readable
