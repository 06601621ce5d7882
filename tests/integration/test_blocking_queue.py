"""A queue for one row on real servers (session fixtures, samplers driven directly): the session holding the row
is named, not the first waiter, and every waiter counts once behind it.

An outside session updates row 1 without committing; three more update the same row, one after another.
PostgreSQL queues them on the row's tuple lock (pg_blocking_pids names the first waiter for the others);
InnoDB names the holder and every waiter ahead. Either way the chains must end at the holder, the longest
one the whole queue, and the rule's evidence must name the holder with three sessions behind it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from collectors.base import CollectorContext
from collectors.mysql.blocking import MyBlockingCollector
from collectors.pg.blocking import PgBlockingCollector
from diag.core.bundle import Bundle
from diag.core.db import Session
from reports.model.steps import steps
from reports.rules.blocking import blocking_evidence

HOLD_S = 1.2
WAITERS = 3
PID_SQL = {"postgres": "SELECT pg_backend_pid() AS p", "mysql": "SELECT CONNECTION_ID() AS p"}


def _table(srv: Any) -> str:
    with Session(srv.target(), statement_timeout_ms=0) as s:
        if srv.engine == "postgres":
            s.execute("DROP TABLE IF EXISTS public.blk_queue")
            s.execute("CREATE TABLE public.blk_queue (id int PRIMARY KEY, n int NOT NULL)")
            s.execute("INSERT INTO public.blk_queue VALUES (1, 0)")
            return "public.blk_queue"
        s.execute("CREATE DATABASE IF NOT EXISTS dbdiag_queue")
        s.execute("DROP TABLE IF EXISTS dbdiag_queue.blk")
        s.execute("CREATE TABLE dbdiag_queue.blk (id int PRIMARY KEY, n int NOT NULL)")
        s.execute("INSERT INTO dbdiag_queue.blk VALUES (1, 0)")
        return "dbdiag_queue.blk"


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_queue_for_one_row_names_its_holder(engine: str, pg_server, my_server) -> None:
    srv = pg_server if engine == "postgres" else my_server
    table = _table(srv)
    cls = PgBlockingCollector if engine == "postgres" else MyBlockingCollector
    c = cls(CollectorContext(target=srv.target(), artifacts=Path("/nonexistent")))
    assert c.probe().ok
    c.start()
    holder = Session(srv.target(), statement_timeout_ms=0, application_name="queue-holder")
    pid = int(holder.query(PID_SQL[engine])[0]["p"])
    holder.execute("BEGIN")
    holder.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 1")

    def wait() -> None:
        with Session(srv.target(), statement_timeout_ms=0) as w:
            w.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 1")

    waiters = []
    for _ in range(WAITERS):  # one after another, so the queue has an order
        waiters.append(threading.Thread(target=wait))
        waiters[-1].start()
        time.sleep(0.1)
    recs = []
    t0 = time.time()
    try:
        while time.time() < t0 + HOLD_S:
            r = c.sample()
            if r:
                recs.append(r)
            time.sleep(c.interval_s)
    finally:
        holder.execute("COMMIT")
        holder.close()
        for w in waiters:
            w.join(5)
        recs += c.stop() or []
    t1 = time.time()
    chains = {k: v for r in recs for k, v in (r.get("chains") or {}).items()}
    assert chains and all(k.endswith(f" -> {pid}") for k in chains), chains
    assert max(len(k.split(" -> ")) for k in chains) == WAITERS + 1, chains  # the whole queue, in order
    label = "q"
    b = Bundle(path=Path("/nonexistent"), run={"targets": [{"label": label, "engine": engine}]},
               results=[{"target": label, "workload": "custom", "clients": WAITERS, "t_start": t0 - 0.3,
                         "t_end": t1}], findings=[], events=[],
               series={f"{srv.dbms.blocking_series}--{label}": recs})
    (step,) = steps(b)
    ev = blocking_evidence(b, step)
    assert ev["blocker"].startswith(f"pid {pid} "), ev
    assert ev["blocked_sessions"] == WAITERS, ev
    # each waiter counted once behind the holder: at most the waiters' time in the sampled window
    assert ev["blocked_wait_s"] <= WAITERS * (t1 - t0) + 0.5, ev
