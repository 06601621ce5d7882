"""Every workload on real PostgreSQL and MariaDB servers: loads, runs, checks, failures.

Small scales and ~1.5 s steps keep this module near a minute per engine.
"""

from __future__ import annotations

import _thread
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from diag.core import servers
from diag.core.bundle import BundleWriter, read_jsonl, safe_name
from diag.core.db import Session
from diag.core.engines import POSTGRES
from diag.core.errors import UsageError
from diag.core.schema import ResultRow
from diag.core.targets import Target
from workloads import load as wload
from workloads.native import nativelib
from workloads.clients.client import client_driver_text
from workloads.driver import DriverOptions, StepInfo, run_sweep
from tests.sweep import KillServerAfter, RecordingHooks, sweep_rows
from workloads.pgbench import pgbench_dataset
from workloads.sysbench import sbtest_dataset
from workloads.tpcc.tpcc import consistency_errors, tpcc_dataset
from tests.conftest import PG_SERVICE

SCALE = 0.05  # 5,000 sbtest rows, 5,000 pgbench accounts, a one-warehouse mini TPC-C
ROW_KEYS = {"target", "engine", "workload", "clients", "measured_s", "transactions", "tps", "qps", "latency_ms",
            "errors", "retries", "driver", "protocol", "isolation", "client_cpu_pct", "t_start", "t_end",
            "client_cpu_s", "error_samples", "scale"}
SERIES_KEYS = {"t", "workload", "clients", "interval_s", "transactions", "queries", "errors", "retries", "latency_ms",
               "client_cpu_pct"}


@pytest.fixture(params=["postgres", "mysql"])
def target(request: pytest.FixtureRequest) -> Target:
    srv = request.getfixturevalue("pg_server" if request.param == "postgres" else "my_server")
    return srv.target()




def _opts(**kw: Any) -> DriverOptions:
    base: dict[str, Any] = dict(clients=(1, 2), duration_s=1.5, warmup_s=0.3, scale=SCALE)
    base.update(kw)
    return DriverOptions(**base)


def test_all_workloads_both_engines(target: Target, tmp_path: Path) -> None:
    bundle = BundleWriter(tmp_path / "run")
    hooks = RecordingHooks()
    names = ["point-select", "read-only", "read-write", "insert", "tpcc"]
    # 1 s steps and no warm-up: ten steps per engine, and every check below is of counts within a step (one
    # interval is enough); none reads what a warm-up would steady (0.3 s each cost 3 s per engine)
    step_s = 1.0
    rows = sweep_rows(target, names, _opts(fresh=True, duration_s=step_s, warmup_s=0.0), bundle, hooks=hooks,
                      progress=None)
    assert [(r["workload"], r["clients"]) for r in rows] == [(n, c) for n in names for c in (1, 2)]
    for r in rows:
        assert ROW_KEYS <= set(r), set(ROW_KEYS) - set(r)
        assert r["engine"] == ("postgresql" if target.engine == "postgres" else "mariadb")
        assert r["transactions"] > 0 and r["tps"] > 0 and r["qps"] >= r["tps"]
        assert r["errors"] == {}, r["error_samples"]
        lat = r["latency_ms"]
        assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["p999"] <= lat["max"]
        assert abs(r["measured_s"] - step_s) < 0.05 and r["t_end"] > r["t_start"]
        assert r["client_cpu_s"] > 0 and r["driver"].split()[0] in ("psycopg", "psycopg2", "libmariadb", "mysqlclient", "PyMySQL")
    tpcc = [r for r in rows if r["workload"] == "tpcc"]
    assert all(r["nopm"] > 0 and r["tpm"] >= r["nopm"] for r in tpcc)
    assert [(i.workload, i.clients) for i in hooks.started] == [(r["workload"], r["clients"]) for r in rows]
    assert [res.to_dict() for _, res in hooks.finished] == rows
    assert all(len(i.client_pids) == i.clients for i in hooks.started)
    series = read_jsonl(tmp_path / "run" / "series" / f"{safe_name('workload--' + target.label)}.jsonl")
    assert series and all(SERIES_KEYS <= set(rec) for rec in series)
    for r in rows:  # the intervals add up to the step's figures
        recs = [s for s in series if s["workload"] == r["workload"] and s["clients"] == r["clients"]]
        assert sum(s["transactions"] for s in recs) == r["transactions"]
        assert abs(sum(s["interval_s"] for s in recs) - r["measured_s"]) < 0.01
    with Session(target, statement_timeout_ms=0) as s:
        counts = wload.row_counts(s, sbtest_dataset(SCALE))
        assert counts == {"sbtest1": 5000}
        counts = wload.row_counts(s, pgbench_dataset(SCALE))
        assert counts["pgbench_accounts"] == 5000 and counts["pgbench_tellers"] == 10
        assert counts["pgbench_branches"] == 1
        assert counts["pgbench_history"] >= sum(r["transactions"] for r in rows if r["workload"] == "read-write")
        _check_tpcc(s)
    # Data are reused when version and scale match.
    again = sweep_rows(target, ["point-select"], _opts(clients=(1,), duration_s=0.5, warmup_s=0), bundle,
                       progress=None)
    assert again[0]["transactions"] > 0
    assert sum(1 for e in read_jsonl(tmp_path / "run" / "events.jsonl") if e["kind"] == "workload_load") == 4


def _check_tpcc(s: Session) -> None:
    ds = tpcc_dataset(SCALE)
    # Static tables keep their loaded size; orders only grow.
    counts = wload.row_counts(s, ds)
    expected = {t.name: t.count for t in ds.tables}
    for name in ("warehouse", "district", "customer", "item", "stock"):
        assert counts[name] == expected[name], name
    assert counts["orders"] >= expected["orders"]
    dist = [(int(r["d_w_id"]), int(r["d_id"]), int(r["d_next_o_id"]))
            for r in s.query("SELECT d_w_id, d_id, d_next_o_id FROM dbdiag.district")]
    max_o = {(int(r["w"]), int(r["d"])): int(r["m"]) for r in
             s.query("SELECT o_w_id AS w, o_d_id AS d, MAX(o_id) AS m FROM dbdiag.orders GROUP BY o_w_id, o_d_id")}
    assert consistency_errors(dist, max_o) == []
    # Every order has exactly o_ol_cnt lines; every new order has its order.
    bad = s.query("SELECT COUNT(*) AS n FROM dbdiag.orders o WHERE o.o_ol_cnt <> (SELECT COUNT(*) FROM "
                  "dbdiag.order_line l WHERE l.ol_w_id = o.o_w_id AND l.ol_d_id = o.o_d_id AND l.ol_o_id = o.o_id)")
    assert int(bad[0]["n"]) == 0
    orphans = s.query("SELECT COUNT(*) AS n FROM dbdiag.new_order n LEFT JOIN dbdiag.orders o ON "
                      "o.o_w_id = n.no_w_id AND o.o_d_id = n.no_d_id AND o.o_id = n.no_o_id WHERE o.o_id IS NULL")
    assert int(orphans[0]["n"]) == 0


def test_insert_count_equals_rows_added(target: Target, tmp_path: Path) -> None:
    with Session(target, statement_timeout_ms=0) as s:
        wload.ensure_schema(s)
        before = _count(s, "dbdiag.insert_data")
    rows = sweep_rows(target, ["insert"], _opts(clients=(2,), warmup_s=0, duration_s=1.0),
                      BundleWriter(tmp_path / "run"), progress=None)
    with Session(target, statement_timeout_ms=0) as s:
        after = _count(s, "dbdiag.insert_data")
    assert rows[0]["transactions"] > 0
    assert after - before == rows[0]["transactions"]


def _count(s: Session, table: str) -> int:
    try:
        return int(s.query(f"SELECT COUNT(*) AS n FROM {table}")[0]["n"])
    except Exception:  # not created yet
        return 0


def test_simple_protocol_and_rate(target: Target, tmp_path: Path) -> None:
    bundle = BundleWriter(tmp_path / "run")
    simple = sweep_rows(target, ["point-select"], _opts(clients=(2,), duration_s=1.0, protocol="simple"), bundle,
                        progress=None)[0]
    assert simple["protocol"] == "simple" and simple["transactions"] > 0 and simple["errors"] == {}
    paced = sweep_rows(target, ["point-select"], _opts(clients=(2,), duration_s=2.0, rate=200.0), bundle,
                       progress=None)[0]
    # --rate caps the rate; the floor is what this machine reached unpaced in the same test, when lower.
    assert min(120.0, 0.5 * simple["tps"]) <= paced["tps"] <= 260, (paced["tps"], simple["tps"])


CONTENDED = """-- two rows, many writers: serialization failures / deadlocks by design
\\set id random(1, 2)
BEGIN;
SELECT v FROM dbdiag.contended WHERE id = :id;
UPDATE dbdiag.contended SET v = v + 1 WHERE id = :id;
COMMIT;
"""


def test_serializable_contention_is_retried_and_counted(target: Target, tmp_path: Path) -> None:
    with Session(target, statement_timeout_ms=0) as s:
        wload.ensure_schema(s)
        s.execute("DROP TABLE IF EXISTS dbdiag.contended")
        s.execute("CREATE TABLE dbdiag.contended (id integer PRIMARY KEY, v integer NOT NULL)")
        s.execute("INSERT INTO dbdiag.contended VALUES (1, 0), (2, 0)")
    script = tmp_path / "contended.sql"
    script.write_text(CONTENDED)
    rows = sweep_rows(target, ["custom"], _opts(clients=(4,), duration_s=2.0, isolation="serializable",
                                                script=str(script), max_tries=3),
                      BundleWriter(tmp_path / "run"), progress=None)
    r = rows[0]
    assert r["isolation"] == "serializable" and r["transactions"] > 0
    assert r["retries"] > 0, r
    retry_codes = {"40001", "40P01", "1213"}
    assert set(r["errors"]) <= retry_codes, r["error_samples"]  # only retries that ran out of tries
    with Session(target, statement_timeout_ms=0) as s:
        total = int(s.query("SELECT SUM(v) AS n FROM dbdiag.contended")[0]["n"])
    assert total >= r["transactions"]  # every committed transaction added one (warmup ones too)


def test_script_errors_are_reported_with_file_and_line(target: Target, tmp_path: Path) -> None:
    bad = tmp_path / "bad.sql"
    bad.write_text("\\set id random(1, 10)\nSELECT version FROM dbdiag.dbdiag_meta WHERE version = :id;\n"
                   "SELECT version FROM dbdiag.dbdiag_meta WHERE version = :id AND AND 1;\n")
    with pytest.raises(UsageError, match=r"bad\.sql:3: .*syntax"):  # the server's own words, at its line
        run_sweep(target, ["custom"], _opts(script=str(bad)), BundleWriter(tmp_path / "run"), progress=None)
    bad.write_text("\\set id random(1, 10)\nSELEKT version FROM dbdiag.dbdiag_meta WHERE version = :id;\n")
    with pytest.raises(UsageError, match=r"bad\.sql:2: 'SELEKT'"):
        run_sweep(target, ["custom"], _opts(script=str(bad)), BundleWriter(tmp_path / "run"), progress=None)
    bad.write_text("\\set id random(1, 10\nSELECT 1;\n")
    with pytest.raises(UsageError, match=r"bad\.sql:1: cannot parse"):
        run_sweep(target, ["custom"], _opts(script=str(bad)), BundleWriter(tmp_path / "run"), progress=None)


# MariaDB's case, with these assertions: test_lost_server's killed MariaDB (one server start for both).
@pytest.mark.parametrize("engine", ["postgres"])
def test_server_killed_mid_step_gives_error_record(engine: str, tmp_path: Path) -> None:
    srv = servers.start_postgres() if engine == "postgres" else servers.start_mysql()
    try:
        t = srv.target()
        killer = KillServerAfter(srv, 0.7)
        rows = sweep_rows(t, ["point-select"], _opts(clients=(2,), duration_s=4.0, warmup_s=0.2, scale=0.02),
                          BundleWriter(tmp_path / "run"), hooks=killer, progress=None)
    finally:
        srv.stop()
    r = rows[0]
    assert r["transactions"] > 0
    assert sum(r["errors"].values()) >= 2, r  # one per client
    assert r["measured_s"] < 3.5
    events = read_jsonl(tmp_path / "run" / "events.jsonl")
    assert sum(1 for e in events if e["kind"] == "workload_client_lost") == 2
    assert all(r["error_samples"].values())


def test_ctrl_c_stops_clients_and_keeps_the_measurement(pg_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    t = pg_server.target()

    class Interrupt(RecordingHooks):
        def step_started(self, info: StepInfo) -> None:
            super().step_started(info)
            threading.Timer(0.8, _thread.interrupt_main).start()  # as a Ctrl-C reaching the main thread

    hooks = Interrupt()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt) as ei:
        run_sweep(t, ["point-select"], _opts(clients=(2, 4), duration_s=30.0, warmup_s=0.2),
                  BundleWriter(tmp_path / "run"), hooks=hooks, progress=None)
    assert time.monotonic() - t0 < 10
    results = [r.to_dict() for r in ei.value.results]  # type: ignore[attr-defined]
    assert len(results) == 1 and results[0]["interrupted"] and results[0]["transactions"] > 0
    assert results[0]["measured_s"] < 5
    assert hooks.finished and hooks.finished[0][1].to_dict() == results[0]
    for pid in hooks.started[0].client_pids:
        assert not _alive(pid)
    events = [e["kind"] for e in read_jsonl(tmp_path / "run" / "events.jsonl")]
    assert "step_interrupted" in events
    series = read_jsonl(next((tmp_path / "run" / "series").glob("workload--*.jsonl")))
    assert series and sum(s["transactions"] for s in series) == results[0]["transactions"]
    json.dumps(results)  # rows stay JSON-safe


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not running
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


# The fallbacks: PyMySQL (install_requires) and psycopg2 (the psycopg2 extra, also in the test extra; loaded here
# beside psycopg 3 only because a test process has both: test_psycopg2_fallback_without_psycopg3 runs it alone).
# mysqlclient is an optional extra that needs system headers; the test command does not install it, so it is
# not tested here (BENCHMARKS.md measured it by hand).
FALLBACKS = [("postgres", "psycopg2", "psycopg2"), ("mysql", "PyMySQL", "pymysql")]


@pytest.mark.parametrize("engine,name,module", FALLBACKS, ids=[f[1] for f in FALLBACKS])
def test_fallback_drivers(engine: str, name: str, module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          request: pytest.FixtureRequest) -> None:
    """The drivers used when psycopg 3 / libmariadb are missing run the same workloads, both protocols."""
    import importlib

    from diag.core.db import DriverInfo
    from workloads import driver as wdriver

    try:
        drv = DriverInfo(name, "", importlib.import_module(module))
    except ImportError:
        pytest.fail(f"{name} is a dependency of dbdiag's tests and is not installed: pip install -e '.[test]'")
    target = request.getfixturevalue("pg_server" if engine == "postgres" else "my_server").target()
    monkeypatch.setattr(wdriver, "fastest_driver", lambda engine: drv)
    bundle = BundleWriter(tmp_path / "run")
    for protocol in ("prepared", "simple"):
        rows = sweep_rows(target, ["point-select", "read-write"], _opts(clients=(2,), duration_s=0.7, warmup_s=0.1,
                                                                        protocol=protocol), bundle, progress=None)
        for r in rows:
            assert r["driver"].startswith(name + " ") and r["transactions"] > 0 and r["errors"] == {}, r


def test_libmariadb_statement_values(my_server: servers.ThrowawayServer) -> None:
    """Binary-protocol parameters and results: strings, NULL, doubles, values longer than the buffer."""
    from workloads.clients import mylib

    if mylib.library() is None:
        pytest.fail("libmariadb (Debian: libmariadb3, with the MariaDB client) is not installed on this machine")
    conn = mylib.LibConnection(my_server.target())
    try:
        q = conn.prepare("SELECT REPEAT(?, ?), NULL, ? + 0.5, CHAR_LENGTH(?)").rows
        rows = q(("ab", 3000, 2, "h\u00e9llo"))
        assert rows[0][0] == b"ab" * 3000 and rows[0][1] is None and float(rows[0][2]) == 2.5
        assert rows[0][3] == b"5"
        rows = q(("xyz" * 100, 2, 1.25, "a"))  # a longer string than before: its buffer grows and is rebound
        assert rows[0][0] == b"xyz" * 200 and float(rows[0][2]) == 1.75 and rows[0][3] == b"1"
        assert q((None, 1, 0, None))[0][0] is None
        with pytest.raises(Exception) as ei:
            conn.prepare("SELEKT 1")
        assert "1064" == getattr(ei.value, "code", "")
        assert conn.query("SELECT 1, NULL") == [(b"1", None)]
    finally:
        conn.close()


KEYED = [("postgres", "psycopg", "psycopg"), ("postgres", "psycopg2", "psycopg2"),
         ("mysql", "libmariadb", ""), ("mysql", "PyMySQL", "pymysql")]


@pytest.mark.parametrize("engine,name,module", KEYED, ids=[k[1] for k in KEYED])
@pytest.mark.parametrize("protocol", ["prepared", "simple"])
def test_keyed_txn_draws_every_key_in_range(engine: str, name: str, module: str, protocol: str,
                                            request: pytest.FixtureRequest) -> None:
    """The Python loop's point-lookup path (point-select, pgbench -S scripts, when the native executor
    does not run them) sends the key it drew, uniformly over lo..hi inclusive, through every driver's own
    path; a failing statement raises DbError."""
    import importlib
    import random

    from diag.core.db import DriverInfo
    from diag.core.errors import DbError
    from workloads.clients import mylib
    from workloads.clients.client import open_client

    target = request.getfixturevalue("pg_server" if engine == "postgres" else "my_server").target()
    if name == "libmariadb":
        drv = mylib.driver_info()
        assert drv is not None, "libmariadb (Debian: libmariadb3) is not installed on this machine"
    else:
        drv = DriverInfo(name, "", importlib.import_module(module))
    with Session(target) as s:
        wload.ensure_schema(s)
        s.execute("DROP TABLE IF EXISTS dbdiag.keyed_test")
        s.execute("CREATE TABLE dbdiag.keyed_test (k integer NOT NULL)")
    c = open_client(target, protocol, "read-committed", driver=drv)
    try:
        q = c.prepare("INSERT INTO dbdiag.keyed_test (k) VALUES (?)")
        txn = c.keyed_txn(q, 5, 9, random.Random(3).random)
        assert sum(txn() for _ in range(500)) == 500
        bad_q = c.prepare("INSERT INTO dbdiag.keyed_test (k) VALUES (? / 0)")
        bad = c.keyed_txn(bad_q, 1, 1, random.random)
        with pytest.raises(DbError):
            bad()
        c.after_error()
    finally:
        c.close()
    with Session(target) as s:
        rows = s.query("SELECT k, COUNT(*) AS n FROM dbdiag.keyed_test GROUP BY k ORDER BY k")
        s.execute("DROP TABLE dbdiag.keyed_test")
    counts = {int(r["k"]): int(r["n"]) for r in rows}
    total = 500
    assert sorted(counts) == [5, 6, 7, 8, 9] and sum(counts.values()) == total, counts
    assert min(counts.values()) > total / 5 * 0.6, counts  # uniform: total / 5 each expected


@pytest.mark.parametrize("py_loop", ["", "1"], ids=["native", "python-loop"])
def test_point_select_loop_is_recorded_in_the_result(target: Target, py_loop: str, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """point-select runs on the native executor unless DBDIAG_PY_LOOP=1, and the result says which ran;
    both give the same kind of result."""
    monkeypatch.setenv("DBDIAG_PY_LOOP", py_loop)
    rows = sweep_rows(target, ["point-select"], _opts(clients=(2,), duration_s=1.0, warmup_s=0.2),
                      BundleWriter(tmp_path / "run"), progress=None)
    r = rows[0]
    assert r["transactions"] > 0 and r["errors"] == {} and r["qps"] == r["tps"], r
    # Every key the driver writes is declared in the bundle schema (a new key must be added there).
    assert not ResultRow.from_dict(r).extra, sorted(ResultRow.from_dict(r).extra)
    assert r["driver"].endswith(" + native executor") == (py_loop == ""), r["driver"]
    assert 0 < r["latency_ms"]["p50"] <= r["latency_ms"]["p99"] <= r["latency_ms"]["max"]
    # The start-up line of a run says the same before the step runs.
    said = client_driver_text(target.dbms, "prepared", ["point-select"])
    assert said == (r["driver"] + " for point-select" if py_loop == "" else r["driver"]), (said, r["driver"])
    # read-write runs on the native executor (tests/integration/test_native_executor.py), unless asked not to
    native = " + native executor for read-write" if py_loop == "" else ""
    assert client_driver_text(target.dbms, "prepared", ["read-write"]) == r["driver"].split(" + ")[0] + native
    assert client_driver_text(target.dbms, "prepared", ["read-write"], paced=True) == r["driver"].split(" + ")[0]


def test_sbtest_binary_copy_loads_the_same_rows_as_text(pg_server: servers.ThrowawayServer) -> None:
    """PostgreSQL loads sbtest through COPY BINARY; the rows equal the text path's, value for value."""
    import dataclasses

    def checksum(s: Session) -> tuple:
        r = s.query("SELECT COUNT(*) AS n, SUM(k) AS k, MD5(STRING_AGG(id || ':' || k || ':' || c || ':' || pad, ',' "
                    "ORDER BY id)) AS h, MAX(OCTET_LENGTH(c)) AS lc FROM dbdiag.sbtest1")[0]
        return r["n"], r["k"], r["h"], r["lc"]

    with Session(pg_server.target(), statement_timeout_ms=0) as s:
        wload.ensure_schema(s)
        ds = sbtest_dataset(0.03)
        assert ds.tables[0].pg_binary is not None
        wload.load(s, ds, None)
        binary = checksum(s)
        # the load's ANALYZE sees every c distinct, as on sysbench's table (not the 1,009 of a string pool)
        stats = s.query("SELECT attname, n_distinct FROM pg_stats WHERE schemaname = 'dbdiag' AND tablename = 'sbtest1'"
                        " AND attname IN ('c', 'pad') ORDER BY attname")
        assert [(r["attname"], float(r["n_distinct"])) for r in stats] == [("c", -1.0), ("pad", -1.0)], stats
        ds.tables[0] = dataclasses.replace(ds.tables[0], pg_binary=None)
        wload.load(s, ds, None)
        text = checksum(s)
        wload.drop(s, ds)
    assert binary == text and binary[0] == 3000 and binary[3] == 120, (binary, text)


# Run in a fresh interpreter: records, from inside each workload client process (Workload.client runs there),
# which client class drives it and which PostgreSQL drivers that process has loaded. argv: DSN, spy file, then
# either "block-psycopg" (psycopg 3 made unimportable first) or "normal", then the bundle directory.
_SPY = r"""
import json, os, sys
from pathlib import Path

dsn, spy, mode, out = sys.argv[1:5]


class NoPsycopg3:
    def find_spec(self, name, path=None, target=None):
        if name == "psycopg" or name.startswith(("psycopg.", "psycopg_")):
            raise ImportError(f"{name} blocked by the test")
        return None


if mode == "block-psycopg":
    sys.meta_path.insert(0, NoPsycopg3())

from workloads import pgbench, sysbench


def spied(cls):
    real = cls.client

    def client(self, c, ctx):
        with open(spy, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "class": type(c).__name__, "psycopg": "psycopg" in sys.modules,
                                "psycopg2": "psycopg2" in sys.modules}) + "\n")
        return real(self, c, ctx)
    cls.client = client


spied(sysbench.PointSelect)
spied(pgbench.ReadWrite)
# A client process on the native executor (the prepared read-write step) never calls client(): spied here
from workloads.steps import loop

real_native = loop.native_runner


def native_runner(*args, **kw):
    got = real_native(*args, **kw)
    if got is not None:
        with open(spy, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "class": type(got[0]).__name__,
                                "psycopg": "psycopg" in sys.modules, "psycopg2": "psycopg2" in sys.modules}) + "\n")
    return got


loop.native_runner = native_runner
if mode == "cli":
    from diag.cli import main
    sys.exit(main(["run", dsn, "-w", "point-select", "-c", "1", "-T", "0.5", "--warmup", "0", "--no-profile",
                   "-s", "1", "-o", out]))
from diag.core.bundle import BundleWriter
from diag.core.targets import parse_target
from workloads.clients.client import client_driver_text
from workloads.driver import DriverOptions, run_sweep

target = parse_target(dsn)
rows = []
for protocol in ("prepared", "simple"):
    opts = DriverOptions(clients=(2,), duration_s=0.7, warmup_s=0.1, scale=0.01, protocol=protocol)
    rows += [r.to_dict() for r in run_sweep(target, ["point-select", "read-write"], opts, BundleWriter(Path(out)),
                                            progress=None)]
print(json.dumps({"pid": os.getpid(), "rows": rows, "psycopg": "psycopg" in sys.modules,
                  "said": client_driver_text(target.dbms, "prepared", ["point-select"])}))
"""


@pytest.fixture
def pg_service_db(pg_service: Target) -> Iterator[str]:
    """The DSN of a database of its own on the PostgreSQL service, dropped afterwards (settings untouched)."""
    name = f"dbdiag_test_drivers_{os.getpid()}"
    with Session(pg_service, statement_timeout_ms=0) as s:
        s.execute(f"DROP DATABASE IF EXISTS {name}")
        s.execute(f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(PG_SERVICE)._replace(path="/" + name))
    finally:
        with Session(pg_service, statement_timeout_ms=0) as s:
            s.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _spy_run(dsn: str, mode: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    spy = tmp_path / "spy.jsonl"
    p = subprocess.run([sys.executable, "-c", _SPY, dsn, str(spy), mode, str(tmp_path / "run")],
                       capture_output=True, text=True, timeout=300, cwd=str(Path(__file__).resolve().parents[2]))
    assert p.returncode == 0, p.stderr[-3000:]
    return p, [json.loads(line) for line in spy.read_text().splitlines()] if spy.exists() else []


def test_psycopg2_fallback_without_psycopg3(pg_service_db: str, tmp_path: Path) -> None:
    """Without psycopg 3, a sweep (load, both protocols, point-select and read-write) runs through psycopg2 and
    Pg2Client (the prepared read-write step on the native executor, which opens libpq itself, when it is built),
    and psycopg 3 is never imported, in the parent or in any client process."""
    if importlib.util.find_spec("psycopg2") is None:
        pytest.fail("psycopg2 (the psycopg2 extra) is in dbdiag's test extra and is not installed: "
                    "pip install -e '.[test]'")
    p, clients = _spy_run(pg_service_db, "block-psycopg", tmp_path)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(out["rows"]) == 4 and not out["psycopg"]
    for r in out["rows"]:
        assert r["driver"].startswith("psycopg2 ") and r["transactions"] > 0 and r["errors"] == {}, r
    # the start-up text: psycopg2, and the native executor for point-select when the prepared step ran on it
    first = out["rows"][0]["driver"]
    assert out["said"] == first + (" for point-select" if nativelib.LABEL in first else ""), (out["said"], first)
    # every client process (4 steps x 2 clients) is seen once: through Pg2Client, or on the native executor for
    # a step whose driver names it (prepared point-select and read-write: workloads.clients.client.NATIVE_WORKLOADS)
    assert len(clients) == 8 and len({c["pid"] for c in clients}) == 8, clients
    assert all(c["pid"] != out["pid"] and not c["psycopg"] for c in clients), clients
    native = [c for c in clients if c["class"] == "NativeClient"]
    assert len(native) == 2 * sum(nativelib.LABEL in r["driver"] for r in out["rows"]), (native, out["rows"])
    assert all(c["class"] == "Pg2Client" and c["psycopg2"] for c in clients if c not in native), clients


def test_normal_run_clients_do_not_load_psycopg2(pg_service_db: str, tmp_path: Path) -> None:
    """``dbdiag run`` with psycopg 3 installed: its client processes drive psycopg 3 (point-select: the native
    executor on psycopg's own libpq) and never load psycopg2 (a second libpq); the start-up line names the
    clients' driver as the results do."""
    p, clients = _spy_run(pg_service_db, "cli", tmp_path)
    kind = "NativeClient" if nativelib.available(POSTGRES) else "PgPqClient"
    assert clients and all(c["class"] == kind and c["psycopg"] and not c["psycopg2"] for c in clients), clients
    results = json.loads((tmp_path / "run" / "results.json").read_text())["results"]
    assert results and results[0]["driver"].startswith("psycopg ")
    said = [ln for ln in p.stderr.splitlines() if " via " in ln]
    assert len(said) == 1 and said[0].split(" via ", 1)[1].startswith(results[0]["driver"]), (said, results)

