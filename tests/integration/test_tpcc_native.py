"""Client-side TPC-C (the default ``--tpcc-mode client``) on the native executor and on the Python loop, on real
PostgreSQL and MariaDB servers.

The mini TPC-C (scale 0.05) is the one test_workload_engines loads on the same session servers: reused when
present. One sweep per loop with the consistency checks after both; one fixed-length comparison of the two
loops from one seed (the same program, so the same transactions: the same changes on the server, the same
rows per statement, the same outcome counts); and a lock wait that fails the same way on both.
"""

from __future__ import annotations

import threading
from array import array
from collections import Counter
from pathlib import Path

import pytest

from diag.core.bundle import BundleWriter
from diag.core.db import Session
from diag.core.errors import DbError
from diag.core.targets import Target
from tests.integration.test_workload_engines import _check_tpcc
from workloads.native import nativelib
from workloads.tpcc import tpcc_prog
from workloads.base import ClientCtx
from workloads.clients.client import fastest_driver, open_client
from workloads.driver import DriverOptions, prepare, sweep_bar
from tests.sweep import sweep_rows
from workloads.native.native import NativeClient, native_runner, open_native
from workloads.native.program import Draw, reference_txn, seed_state
from workloads.tpcc.tpcc import Tpcc

SCALE = 0.05
N = 200  # transactions per loop in the comparison: ~90 New-Orders, ~85 Payments, ~8 of each other kind


@pytest.fixture(params=["postgres", "mysql"])
def target(request: pytest.FixtureRequest) -> Target:
    srv = request.getfixturevalue("pg_server" if request.param == "postgres" else "my_server")
    return srv.target()


def _ready(target: Target, tmp_path: Path) -> str:
    """Load the mini TPC-C when it is not there; the server's product string."""
    opts = DriverOptions(clients=(1,), scale=SCALE)
    return prepare(target, ["tpcc"], opts, BundleWriter(tmp_path / "b"), None, sweep_bar(None, 1, ["tpcc"], opts)).product


def test_client_mode_on_both_loops_keeps_the_data_consistent(target: Target, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    opts = DriverOptions(clients=(2,), duration_s=1.5, warmup_s=0.3, scale=SCALE)
    available = nativelib.available(target.dbms)
    native = sweep_rows(target, ["tpcc"], opts, BundleWriter(tmp_path / "native"), progress=None)[0]
    monkeypatch.setenv("DBDIAG_PY_LOOP", "1")
    python = sweep_rows(target, ["tpcc"], opts, BundleWriter(tmp_path / "python"), progress=None)[0]
    assert ("native executor" in native["driver"]) == available, native["driver"]
    assert "native executor" not in python["driver"]
    for r in (native, python):
        assert r["errors"] == {}, r["error_samples"]
        # New-Order sends 2 + 4 * (5..15 lines) + 5 statements, Payment 10 or 11: about 20 a transaction
        assert 10 < r["qps"] / r["tps"] < 40, (r["qps"], r["tps"])
        # New-Order is 45% of the mix; over ~50 transactions a share's standard deviation is about 0.07
        assert r["nopm"] > 0 and 0.2 < r["nopm"] / r["tpm"] < 0.7, (r["nopm"], r["tpm"], r["transactions"])
    with Session(target, statement_timeout_ms=0) as s:
        _check_tpcc(s)
        # Payment's history text is the warehouse's and the district's names (string registers, OP_FMT)
        bad = s.query("SELECT COUNT(*) AS n FROM dbdiag.history h JOIN dbdiag.warehouse w ON w.w_id = h.h_w_id "
                      "JOIN dbdiag.district d ON d.d_w_id = h.h_w_id AND d.d_id = h.h_d_id "
                      "WHERE h.h_data <> 'history-at-load' "
                      "AND h.h_data <> SUBSTRING(CONCAT(w.w_name, '    ', d.d_name), 1, 24)")
        assert int(bad[0]["n"]) == 0


def _server_state(target: Target) -> tuple[int, ...]:
    """What the transactions change, summed: committed New-Orders (the districts' counters), their lines and
    amounts (cents), Payments (history rows) and their amounts (the warehouses' YTD, cents), deliveries (new
    orders left)."""
    with Session(target, statement_timeout_ms=0) as s:
        q = [("SELECT SUM(d_next_o_id) AS n FROM dbdiag.district", 1),
             ("SELECT COUNT(*) AS n FROM dbdiag.order_line", 1),
             ("SELECT SUM(ol_amount) AS n FROM dbdiag.order_line", 100),
             ("SELECT COUNT(*) AS n FROM dbdiag.history", 1),
             ("SELECT SUM(w_ytd) AS n FROM dbdiag.warehouse", 100),
             ("SELECT COUNT(*) AS n FROM dbdiag.new_order", 1)]
        return tuple(int(round(float(s.query(sql)[0]["n"]) * k)) for sql, k in q)


def _delta(target: Target, run: object) -> tuple[int, ...]:
    a = _server_state(target)
    run()  # type: ignore[operator]
    b = _server_state(target)
    return tuple(y - x for x, y in zip(a, b))


def test_native_and_python_loops_run_the_same_transactions(target: Target, tmp_path: Path) -> None:
    product = _ready(target, tmp_path)
    wl, ctx = Tpcc(), ClientCtx(0, 1, SCALE, seed=11)
    drv = fastest_driver(target.dbms)
    prog = tpcc_prog.program(SCALE, 0)
    c = open_client(target, "prepared", "read-committed", product, drv)
    py_rows, py_extra = [0] * len(prog.stmts), Counter[str]()
    try:
        queries = [c.prepare(s) for s in prog.stmts]
        txn = reference_txn(prog, [q.rows for q in queries], c.execute, Draw(seed_state(ctx.key_seed())), py_rows,
                            py_extra)
        sent: list[int] = []
        py_delta = _delta(target, lambda: sent.extend(txn() for _ in range(N)))
    finally:
        c.close()
    if not nativelib.available(target.dbms):
        pytest.fail(f"the native executor cannot run here for {target.dbms.title}: nothing to compare")
    got = native_runner(wl, target, product, drv, "prepared", "read-committed", ctx)
    assert got is not None
    nc, runner = got
    try:
        assert runner.batch is not None and runner.sent is not None

        def batch() -> None:
            n, _, err = runner.batch(0, 1 << 62, array("q", bytes(8 * N)))  # type: ignore[misc]
            assert err is None and n == N, err
        c_delta = _delta(target, batch)
        c_sent = runner.sent()
        c_rows = [rows for _, rows, _ in nc.stats()]
    finally:
        nc.close()
    assert c_delta == py_delta and Counter(runner.extra) == py_extra, (c_delta, py_delta, runner.extra, py_extra)
    assert c_rows == py_rows and c_sent == sum(sent)
    # what the server did: the committed New-Orders and Payments, amounts in cents as drawn and read back
    new_orders, lines, amount, payments, ytd, _ = c_delta
    assert new_orders == py_extra["new_order"] > 0.3 * N and 5 * new_orders <= lines <= 15 * new_orders
    assert payments > 0.3 * N and 100 * payments <= ytd <= 500_000 * payments and amount > lines * 100
    assert min(sent) >= 4 and max(sent) >= 2 + 4 * 5 + 5  # every transaction BEGIN..COMMIT; a New-Order's lines


def _hold_districts(target: Target, locked: threading.Event, release: threading.Event) -> None:
    with Session(target, statement_timeout_ms=0) as s:
        s.execute("BEGIN")
        s.query("SELECT d_id FROM dbdiag.district FOR UPDATE")
        locked.set()
        release.wait(30)
        s.execute("ROLLBACK")


def test_a_lock_wait_fails_alike_on_both_loops(target: Target, tmp_path: Path) -> None:
    """A New-Order or Payment blocked on a district row past the session's lock timeout: the same error code and
    kind from the native executor and from the Python loop, and the native connection is usable after it."""
    product = _ready(target, tmp_path)
    timeout = ("SET lock_timeout = '200ms'" if target.engine == "postgres"
               else "SET SESSION innodb_lock_wait_timeout = 1")
    prog = tpcc_prog.program(SCALE, 0)
    locked, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_districts, args=(target, locked, release))
    holder.start()
    errors: list[DbError] = []
    try:
        assert locked.wait(10)
        c = open_client(target, "prepared", "read-committed", product)
        try:
            c.execute(timeout)
            txn = reference_txn(prog, [c.prepare(s).rows for s in prog.stmts], c.execute, Draw(seed_state(5)),
                                [0] * len(prog.stmts))
            errors.append(_first_error(txn))
            c.after_error()
        finally:
            c.close()
        nc = open_native(target, product, fastest_driver(target.dbms), "read-committed", prog, 5)
        assert isinstance(nc, NativeClient)
        try:
            nc.execute(timeout)
            errors.append(_first_error(nc.txn))
        finally:
            release.set()
            holder.join()
        try:
            assert nc.txn() >= 4  # rolled back by the C side: the next transaction runs
        finally:
            nc.close()
    finally:
        release.set()
        holder.join()
    py, native = errors
    assert (py.code, py.kind) == (native.code, native.kind), (py, native)
    assert py.code in ("55P03", "1205"), py


def _first_error(txn: object) -> DbError:
    """The DbError of the first of up to 20 transactions that fails (Order-Status, Stock-Level and Delivery
    need no district lock: they pass)."""
    for _ in range(20):
        try:
            txn()  # type: ignore[operator]
        except DbError as e:
            return e
    raise AssertionError("no transaction waited on the held districts")
