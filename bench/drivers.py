"""Bare point-select loops through each driver API (which one the workload client should use).

Each variant runs ``SELECT c FROM dbdiag.sbtest1 WHERE id = <random>`` (the
point-select table, 100,000 rows) in N forked processes for D seconds and reports
TPS and client CPU µs per transaction. Used by ``bench/compare.py --drivers``.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import random
import time
from typing import Any

from diag.core.db import DriverInfo, connect
from workloads.clients.mylib import LibConnection  # libmariadb is loaded on the first connection, not here

N_ROWS = 100_000
SQL_PG = "SELECT c FROM dbdiag.sbtest1 WHERE id = %s"
SQL_MY = "SELECT c FROM dbdiag.sbtest1 WHERE id = %d"
VARIANTS = {
    "postgres": ("psycopg3 libpq exec_prepared (dbdiag)", "psycopg3 cursor prepare=True",
                 "psycopg3 cursor in pipeline", "psycopg3 cursor (unnamed extended)", "psycopg2 EXECUTE prepared",
                 "psycopg2 simple"),
    "mysql": ("libmariadb ctypes binary protocol (dbdiag)", "mysqlclient query/store_result (dbdiag fallback)",
              "mysqlclient EXECUTE USING (dbdiag fallback, prepared)", "mysqlclient cursor",
              "PyMySQL cursor (dbdiag fallback)"),
}


def _drv(name: str, module: str) -> DriverInfo:
    return DriverInfo(name, "", importlib.import_module(module))


def _loop(target: Any, variant: str, duration: float, q: Any) -> None:
    rnd = random.random
    pc = time.perf_counter
    n = 0
    if variant.startswith("psycopg3"):
        conn = connect(target, driver=_drv("psycopg", "psycopg"))
        if "libpq" in variant:
            pg = conn.pgconn
            pg.prepare(b"b1", b"SELECT c FROM dbdiag.sbtest1 WHERE id = $1")
            ex = pg.exec_prepared

            def one() -> None:
                ex(b"b1", [str(int(rnd() * N_ROWS) + 1).encode()]).get_value(0, 0)
        else:
            cur = conn.cursor()
            prep = True if "prepare=True" in variant else None if "pipeline" in variant else False
            if "pipeline" in variant:
                def one() -> None:
                    with conn.pipeline():
                        cur.execute(SQL_PG, (int(rnd() * N_ROWS) + 1,))
                    cur.fetchone()
            else:
                def one() -> None:
                    cur.execute(SQL_PG, (int(rnd() * N_ROWS) + 1,), prepare=prep)
                    cur.fetchone()
    elif variant.startswith("psycopg2"):
        conn = connect(target, driver=_drv("psycopg2", "psycopg2"))
        cur = conn.cursor()
        if "EXECUTE" in variant:
            cur.execute("PREPARE b1(int) AS SELECT c FROM dbdiag.sbtest1 WHERE id = $1")

            def one() -> None:
                cur.execute("EXECUTE b1(%d)" % (int(rnd() * N_ROWS) + 1))
                cur.fetchone()
        else:
            def one() -> None:
                cur.execute("SELECT c FROM dbdiag.sbtest1 WHERE id = %d" % (int(rnd() * N_ROWS) + 1))
                cur.fetchone()
    elif variant.startswith("libmariadb"):
        q1 = LibConnection(target).prepare("SELECT c FROM dbdiag.sbtest1 WHERE id = ?").rows

        def one() -> None:
            q1((int(rnd() * N_ROWS) + 1,))
    elif variant.startswith("mysqlclient"):
        conn = connect(target, driver=_drv("mysqlclient", "MySQLdb"))
        if "cursor" in variant:
            cur = conn.cursor()

            def one() -> None:
                cur.execute(SQL_MY % (int(rnd() * N_ROWS) + 1))
                cur.fetchone()
        else:
            tmpl = SQL_MY
            if "EXECUTE" in variant:
                conn.query("PREPARE b1 FROM 'SELECT c FROM dbdiag.sbtest1 WHERE id = ?'")
                tmpl = "EXECUTE b1 USING %d"
            query, store = conn.query, conn.store_result

            def one() -> None:
                query(tmpl % (int(rnd() * N_ROWS) + 1))
                store().fetch_row(0)
    else:
        conn = connect(target, driver=_drv("PyMySQL", "pymysql"))
        cur = conn.cursor()

        def one() -> None:
            cur.execute(SQL_MY % (int(rnd() * N_ROWS) + 1))
            cur.fetchall()
    t0 = os.times()
    end = pc() + duration
    while True:
        one()
        n += 1
        if n & 127 == 0 and pc() > end:
            break
    t1 = os.times()
    q.put((n, t1.user - t0.user + t1.system - t0.system))


_MODULES = {"psycopg3": "psycopg", "psycopg2": "psycopg2", "mysqlclient": "MySQLdb", "PyMySQL": "pymysql"}


def measure(target: Any, variant: str, clients: int, duration: float) -> dict:
    # A driver that is not installed is said at once, not after the children die and the wait times out.
    module = _MODULES.get(variant.split()[0])
    if module:
        importlib.import_module(module)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_loop, args=(target, variant, duration, q)) for _ in range(clients)]
    for p in procs:
        p.start()
    res = [q.get(timeout=duration + 60) for _ in procs]
    for p in procs:
        p.join()
    n = sum(r[0] for r in res)
    cpu = sum(r[1] for r in res)
    return {"variant": variant, "clients": clients, "tps": round(n / duration, 1),
            "client_us_per_txn": round(cpu / max(n, 1) * 1e6, 2)}
