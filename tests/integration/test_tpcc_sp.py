"""TPC-C in stored-procedure mode (``--tpcc-mode sp``) on real PostgreSQL and MariaDB servers.

The mini TPC-C (scale 0.05) is the one test_workload_engines loads on the same session servers:
reused when present. One sweep per loop (native executor, then the Python loop) with the
consistency checks after both, and one fixed-length comparison of the two loops from one seed:
the same transactions, so the same rows on the server and the same outcome counts.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from diag.core.bundle import BundleWriter
from diag.core.db import Session
from diag.core.targets import Target
from tests.integration.test_workload_engines import _check_tpcc
from workloads.native import nativelib
from workloads.base import ClientCtx, Runner
from workloads.clients.client import fastest_driver, open_client
from workloads.driver import DriverOptions, prepare, sweep_bar
from tests.sweep import sweep_rows
from workloads.native.native import native_runner
from workloads.tpcc.tpcc import Tpcc

SCALE = 0.05
N = 150  # transactions per loop in the comparison: ~70 New-Orders, ~65 Payments


@pytest.fixture(params=["postgres", "mysql"])
def target(request: pytest.FixtureRequest) -> Target:
    srv = request.getfixturevalue("pg_server" if request.param == "postgres" else "my_server")
    return srv.target()


def test_sp_mode_on_both_loops_keeps_the_data_consistent(target: Target, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    opts = DriverOptions(clients=(2,), duration_s=1.5, warmup_s=0.3, scale=SCALE, tpcc_mode="sp")
    available = nativelib.available(target.dbms)
    native = sweep_rows(target, ["tpcc"], opts, BundleWriter(tmp_path / "native"), progress=None)[0]
    monkeypatch.setenv("DBDIAG_PY_LOOP", "1")
    python = sweep_rows(target, ["tpcc"], opts, BundleWriter(tmp_path / "python"), progress=None)[0]
    assert ("native executor" in native["driver"]) == available, native["driver"]
    assert "native executor" not in python["driver"]
    for r in (native, python):
        assert r["errors"] == {}, r["error_samples"]
        assert r["qps"] == r["tps"]  # one CALL per transaction
        # New-Orders are 45% of the mix, 1% of them rolled back; a few hundred transactions per step
        assert r["nopm"] > 0 and 0.3 < r["nopm"] / r["tpm"] < 0.6, (r["nopm"], r["tpm"], r["transactions"])
    with Session(target, statement_timeout_ms=0) as s:
        _check_tpcc(s)


def _server_counts(target: Target) -> tuple[int, int]:
    """(committed New-Orders, Payments) so far: the districts' order counters and the history rows."""
    with Session(target, statement_timeout_ms=0) as s:
        nxt = s.query("SELECT SUM(d_next_o_id) AS n FROM dbdiag.district")[0]["n"]
        hist = s.query("SELECT COUNT(*) AS n FROM dbdiag.history")[0]["n"]
    return int(nxt), int(hist)


def _delta(target: Target, run: Callable[[], object]) -> tuple[int, int]:
    """What ``run()`` changed in :func:`_server_counts`."""
    a = _server_counts(target)
    run()
    b = _server_counts(target)
    return b[0] - a[0], b[1] - a[1]


def test_native_and_python_loops_run_the_same_transactions(target: Target, tmp_path: Path) -> None:
    opts = DriverOptions(clients=(1,), scale=SCALE, tpcc_mode="sp")
    p = prepare(target, ["tpcc"], opts, BundleWriter(tmp_path / "b"), None, sweep_bar(None, 1, ["tpcc"], opts))
    wl, ctx = Tpcc("sp"), ClientCtx(0, 1, SCALE, seed=7)
    drv = fastest_driver(target.dbms)
    counts: list[tuple[tuple[int, int], Counter[str]]] = []

    c = open_client(target, "prepared", "read-committed", p.product, drv)
    try:
        py = wl.client(c, ctx)
        counts.append((_delta(target, lambda: [py.txn() for _ in range(N)]), Counter(py.extra)))
    finally:
        c.close()
    if not nativelib.available(target.dbms):
        pytest.fail(f"the native executor cannot run here for {target.dbms.title}: nothing to compare")
    got = native_runner(wl, target, p.product, drv, "prepared", "read-committed", ctx)
    assert got is not None
    nc, runner = got
    try:
        counts.append((_delta(target, lambda: _batch(runner, N)), Counter(runner.extra)))
    finally:
        nc.close()
    (py_rows, py_extra), (c_rows, c_extra) = counts
    assert py_rows == c_rows and py_extra == c_extra, counts
    assert py_rows[0] == py_extra["new_order"] and py_rows[1] > 0.3 * N, counts  # what the server did


def _batch(runner: Runner, n: int) -> None:
    """Exactly ``n`` transactions in one C batch (the buffer holds n latencies; no deadline)."""
    assert runner.batch is not None
    got, _, err = runner.batch(0, 1 << 62, array("q", bytes(8 * n)))
    assert err is None and got == n
