"""The blocking samplers read their server only after the wait sampler saw a lock wait (collectors/lockgate.py),
on real servers (session fixtures, samplers driven directly, as a run drives them: wait sampler first).

With nobody waiting, the blocking sampler makes no query after the wait sampler's first tick. Then an outside
session holds a row lock for :data:`HOLD_S` and another waits for it: the blocker is named, and the waiting time
(counted from the server's own wait start on the first read after skipped ticks) is within a sample period or
two of the hold the test measured.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from collectors.base import CollectorContext
from collectors.lockgate import LockGate
from collectors.mysql.blocking import MyBlockingCollector
from collectors.mysql.waits import MyWaitsCollector
from collectors.pg.blocking import PgBlockingCollector
from collectors.pg.waits import PgWaitsCollector
from diag.core.db import Session
from diag.core.schema.blocking import BlockingWindow

HOLD_S = 1.2
QUIET_S = 0.8
# The gate opens one wait-sampler tick after the wait starts (0.3 s for InnoDB row locks, read at the
# INNODB_TRX rate), the catch-up counts back to the wait's start; the end is off by a sample period.
SAMPLED_BY_S = 0.5
PID_SQL = {"postgres": "SELECT pg_backend_pid() AS p", "mysql": "SELECT CONNECTION_ID() AS p"}
CLASSES = {"postgres": (PgWaitsCollector, PgBlockingCollector), "mysql": (MyWaitsCollector, MyBlockingCollector)}


def _table(srv: Any) -> str:
    name = "public.blk_gated" if srv.engine == "postgres" else "dbdiag_gated.blk"
    with Session(srv.target(), statement_timeout_ms=0) as s:
        if srv.engine == "mysql":
            s.execute("CREATE DATABASE IF NOT EXISTS dbdiag_gated")
        s.execute(f"DROP TABLE IF EXISTS {name}")
        s.execute(f"CREATE TABLE {name} (id int PRIMARY KEY, n int NOT NULL)")
        s.execute(f"INSERT INTO {name} VALUES (1, 0)")
    return name


def _drive(waits: Any, blocking: Any, seconds: float, recs: list[BlockingWindow]) -> None:
    """Each sampler on its own cadence, as the run's runner ticks them (the blocking one slows while quiet)."""
    now = time.monotonic()
    t_end, due = now + seconds, {id(waits): now, id(blocking): now}
    while time.monotonic() < t_end:
        for c in (waits, blocking):
            if time.monotonic() >= due[id(c)]:
                r = c.sample()
                if r and c is blocking:
                    recs.append(BlockingWindow.from_dict(r))
                due[id(c)] = time.monotonic() + c.interval_s
        time.sleep(max(0.0, min(due.values()) - time.monotonic()))


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_blocking_reads_only_after_a_lock_wait(engine: str, pg_server, my_server) -> None:
    srv = pg_server if engine == "postgres" else my_server
    table = _table(srv)
    ctx = CollectorContext(target=srv.target(), artifacts=Path("/nonexistent"), lock_gate=LockGate())
    waits_cls, blocking_cls = CLASSES[engine]
    waits, blocking = waits_cls(ctx), blocking_cls(ctx)
    assert waits.probe().ok and blocking.probe().ok
    waits.start()
    blocking.start()
    reads: list[str] = []
    real_query = blocking.session.query

    def counted(sql: str, params: Any = None) -> list[dict[str, Any]]:
        reads.append(sql)
        return real_query(sql, params)

    blocking.session.query = counted  # a spy: every read still goes to the server
    recs: list[BlockingWindow] = []
    holder = Session(srv.target(), statement_timeout_ms=0, application_name="gated-holder")
    waiter_done = threading.Event()
    try:
        _drive(waits, blocking, QUIET_S, recs)
        assert reads == [], reads  # nobody waited: no chain query
        pid = int(holder.query(PID_SQL[engine])[0]["p"])
        holder.execute("BEGIN")
        holder.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 1")

        def wait() -> None:
            with Session(srv.target(), statement_timeout_ms=0) as w:
                w.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 1")
            waiter_done.set()

        th = threading.Thread(target=wait)
        t0 = time.monotonic()
        th.start()
        _drive(waits, blocking, HOLD_S, recs)
        holder.execute("COMMIT")
        held = time.monotonic() - t0
        th.join(5)
        _drive(waits, blocking, 0.3, recs)
    finally:
        holder.close()
        waits.stop()
        recs += [BlockingWindow.from_dict(r) for r in blocking.stop() or []]
    assert waiter_done.is_set()
    assert reads, "the lock wait never opened the gate"
    blockers = [b for r in recs for b in r.blockers]
    assert blockers and {b.pid for b in blockers} == {pid}, recs
    waited = sum(r.waiting_s for r in recs)
    assert held - SAMPLED_BY_S <= waited <= held + SAMPLED_BY_S, (waited, held, recs)
