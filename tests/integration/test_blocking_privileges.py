"""Blocking samplers as least-privilege users degrade with reasons (session servers, collectors driven directly).

* PostgreSQL, a role without pg_read_all_stats: its own session waits behind a superuser's LOCK TABLE; the
  blocker is still named by PID and user (pg_blocking_pids and pg_stat_activity show those to every role),
  its state is said to be not visible, and the probe says what is missing and the fix.
* MariaDB, a user without PROCESS: InnoDB's lock tables are refused, which the probe says with the GRANT
  that fixes it; the user's own LOCK TABLES wait is still counted, with no holder named.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors.base import Collector, CollectorContext
from collectors.mysql.blocking import NO_MDL_SOURCE, MyBlockingCollector
from collectors.pg.blocking import HIDDEN_NOTE, NOT_VISIBLE, PgBlockingCollector
from diag.core import servers
from diag.core.db import Session
from diag.core.schema.blocking import BlockingWindow
from diag.core.targets import Target, parse_target

HOLD_S = 1.0
USER, PASSWORD = "dbdiag_low_blk", "low-pw-1"
TABLE = "(id int PRIMARY KEY, n int NOT NULL)"


def as_user(srv: servers.ThrowawayServer) -> Target:
    dbms = srv.dbms
    return parse_target(f"low={dbms.schemes[0]}://{USER}:{PASSWORD}@127.0.0.1:{srv.port}/{dbms.default_database}")


def sample_during(c: Collector, hold: Session, hold_sql: list[str], release: str, waiter: Session,
                  wait_sql: str) -> list[BlockingWindow]:
    """Sample while ``hold`` holds a lock for HOLD_S seconds and ``waiter`` waits for it."""
    c.start()
    for sql in hold_sql:
        hold.execute(sql)
    th = threading.Thread(target=lambda: waiter.execute(wait_sql))
    th.start()
    recs: list[BlockingWindow] = []
    t_end = time.monotonic() + HOLD_S
    try:
        while time.monotonic() < t_end:
            r = c.sample()
            if r:
                recs.append(BlockingWindow.from_dict(r))
            time.sleep(c.interval_s)
    finally:
        hold.execute(release)
        th.join(5)
        recs += [BlockingWindow.from_dict(r) for r in c.stop() or []]
    return recs


@contextlib.contextmanager
def low_user(srv: servers.ThrowawayServer, drop: list[str], create: list[str]) -> Iterator[Target]:
    """USER on ``srv`` with a one-row table it may write (``create``); ``drop`` undoes it, before too (a
    leftover of a run cut short)."""
    def run(statements: list[str]) -> None:
        with Session(srv.target(), statement_timeout_ms=0) as s:
            for sql in statements:
                s.execute(sql)
    run([*drop, *create])
    try:
        yield as_user(srv)
    finally:
        run(drop)


@pytest.fixture()
def pg_low(pg_server) -> Iterator[Target]:
    with low_user(pg_server, ["DROP TABLE IF EXISTS public.blk_low", f"DROP ROLE IF EXISTS {USER}"],
                  [f"CREATE TABLE public.blk_low {TABLE}", "INSERT INTO public.blk_low VALUES (1, 0)",
                   f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'", f"GRANT ALL ON public.blk_low TO {USER}"]) as t:
        yield t


def test_pg_blocker_of_another_role_named_by_pid_state_not_visible(pg_server, pg_low) -> None:
    c = PgBlockingCollector(CollectorContext(target=pg_low, artifacts=Path("/nonexistent")))
    probe = c.probe()
    assert probe.ok and probe.missing == (HIDDEN_NOTE,) and "pg_monitor" in probe.hint
    with Session(pg_server.target(), statement_timeout_ms=0) as hold, Session(pg_low, statement_timeout_ms=0) as w:
        pid = int(hold.query("SELECT pg_backend_pid() AS p")[0]["p"])
        recs = sample_during(c, hold, ["BEGIN", "LOCK TABLE public.blk_low IN EXCLUSIVE MODE"], "COMMIT", w,
                             "UPDATE public.blk_low SET n = n + 1")
    blockers = [b for r in recs for b in r.blockers]
    assert blockers and {b.pid for b in blockers} == {pid}, recs
    b = blockers[-1]
    assert (b.user, b.state, b.statement) == ("postgres", NOT_VISIBLE, "")
    assert b.lock == "RowExclusiveLock on relation blk_low (held: ExclusiveLock)"  # pg_locks: every role


@pytest.fixture()
def my_low(my_server) -> Iterator[Target]:
    with low_user(my_server, ["DROP DATABASE IF EXISTS dbdiag_low", f"DROP USER IF EXISTS '{USER}'@'%'"],
                  ["CREATE DATABASE dbdiag_low", f"CREATE TABLE dbdiag_low.blk {TABLE}",
                   "INSERT INTO dbdiag_low.blk VALUES (1, 0)", f"CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'",
                   f"GRANT ALL ON dbdiag_low.* TO '{USER}'@'%'"]) as t:
        yield t


def test_my_without_process_says_which_grant(my_server, my_low) -> None:
    c = MyBlockingCollector(CollectorContext(target=my_low, artifacts=Path("/nonexistent")))
    probe = c.probe()
    assert probe.ok, probe
    refused = [m for m in probe.missing if m.startswith("lock_waits:")]
    assert refused and "GRANT PROCESS ON *.* TO" in refused[0], probe
    # its own sessions: one holds LOCK TABLES, the other waits; without PROCESS a user still sees its own threads
    with Session(my_low, statement_timeout_ms=0) as hold, Session(my_low, statement_timeout_ms=0) as w:
        recs = sample_during(c, hold, ["LOCK TABLES dbdiag_low.blk WRITE"], "UNLOCK TABLES", w,
                             "UPDATE dbdiag_low.blk SET n = n + 1")
    assert sum(r.waiting_s for r in recs) >= 0.5 * HOLD_S, recs
    assert not [b for r in recs for b in r.blockers], recs  # no source of metadata lock holders for this user
    assert sum(r.unattributed_s for r in recs) == pytest.approx(sum(r.waiting_s for r in recs))
    said = {r.unattributed for r in recs if r.unattributed_s}
    assert len(said) == 1 and said.pop().startswith(f"{NO_MDL_SOURCE}: "), recs  # and says why
