"""Findings on real throwaway servers with planted causes (PostgreSQL 18 and MariaDB, both engines each time).

Each test runs ``dbdiag run`` in-process (``diag.run.Run``) with short steps and no perf profile, then reads
findings.json as the run wrote it:

* a hot-row update script (every client updates row 1 in an explicit transaction and sleeps 2 ms before
  COMMIT) gives a lock limit as the top finding of each target, its lock_contention right under it;
* fsync=off (PostgreSQL) and innodb_flush_log_at_trx_commit=2 (MariaDB) give durability_unsafe, critical;
* ``--flush-capability 10`` with single-row inserts at 2 clients gives durability_implausible, critical
  (no machine that runs these tests commits as slowly as 10 flushes/s x 2 clients x the margin allow, however
  busy it is);
* a clean point-select run raises no critical finding (the point-select runs of the session servers that
  test_compare reads as well: tests/conftest.py ``point_select_bundles``);
* MariaDB with a 6 MB buffer pool under 200k rows (O_DIRECT, so every miss is a disk read) gives
  io_read_bound on point selects. PostgreSQL cannot be planted this way here: its misses are served by
  the OS page cache (0% read waits even with 128 kB of shared_buffers), and emptying that cache would
  disturb the whole machine.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diag.core import servers
from diag.core.db import Session
from diag.run import Run, RunOptions, run_plan
from workloads.driver import DriverOptions

SLEEP = {"postgres": "SELECT pg_sleep(0.002);", "mysql": "SELECT SLEEP(0.002);"}
# A flush capability (flushes/s) so low that the commits of any real run exceed what it allows: the planted
# case then does not depend on how fast this machine is at the moment.
LOW_FLUSH_CAPABILITY = 10.0


def run(out: Path, targets: list[str], workloads: list[str], *, clients: tuple[int, ...] = (2,), flush: bool = True,
        script: Path | None = None, flush_capability: float | None = None, scale: int = 1,
        duration_s: float = 2.0, connect_per_txn: bool = False, rate: float | None = None
        ) -> dict[str, list[dict[str, Any]]]:
    """Run and return findings.json's findings per target label, as written by the run (``rate``: --rate, total
    transactions/s; None: closed loop)."""
    drv = DriverOptions(clients=clients, duration_s=duration_s, warmup_s=0.5, script=str(script) if script else None,
                        scale=scale, connect_per_txn=connect_per_txn, rate=rate)
    log = io.StringIO()
    opts = RunOptions(targets=targets, workloads=workloads, driver=drv, out=out, argv=["dbdiag", "run"],
                      profile=False, flush_capability=flush_capability, fsync_seconds=0.1)
    # flush=False: no flush tracing and no fsync test, which a write workload (a custom script counts as one)
    # otherwise starts before its steps, for plants that are not about commits: about half of such a short run
    # (measured 5.5-9.9 s against 2.7-5.1 s for a 1.5 s step of SELECT 1, 3 rounds each, machine at load 11-16).
    if not flush:
        opts = dataclasses.replace(opts, sources=dataclasses.replace(
            run_plan(opts), flush=False, flush_off="not what this test plants", fsync_test_s=None))
    path = Run(opts, out=log).execute()
    found = json.loads((path / "findings.json").read_text())["findings"]
    results = json.loads((path / "results.json").read_text())["results"]
    assert len(results) == len(targets) * len(workloads) * len(clients), log.getvalue()[-3000:]
    by: dict[str, list[dict[str, Any]]] = {t.split("=", 1)[0]: [] for t in targets}
    for f in found:
        by[f["target"]].append(f)  # already sorted by impact, highest first
    by["_results"] = results
    return by


def summary(found: list[dict[str, Any]]) -> list[tuple[str, str, float]]:
    return [(f["category"], f["severity"], f["impact"]) for f in found]


def hot_row_table(srv: servers.ThrowawayServer) -> None:
    with Session(srv.target(), statement_timeout_ms=0) as s:
        if srv.engine == "postgres":
            s.execute("CREATE SCHEMA IF NOT EXISTS dbdiag")
        else:
            s.execute("CREATE DATABASE IF NOT EXISTS dbdiag")
        s.execute("DROP TABLE IF EXISTS dbdiag.hot_row")
        s.execute("CREATE TABLE dbdiag.hot_row (id int PRIMARY KEY, n int NOT NULL)")
        s.execute("INSERT INTO dbdiag.hot_row VALUES (1, 0), (2, 0)")
        if srv.engine != "postgres":
            s.execute("COMMIT")


@pytest.fixture()
def relaxed(pg_fsync_off: servers.ThrowawayServer, my_server: servers.ThrowawayServer
            ) -> Iterator[tuple[servers.ThrowawayServer, servers.ThrowawayServer]]:
    """Throwaway servers that give durability up: fsync=off (the session's), and the session's MariaDB with
    innodb_flush_log_at_trx_commit=2 set for this test only (a dynamic variable: no server of its own to start),
    set back as it was after it."""
    with Session(my_server.target()) as s:
        old = s.query("SELECT @@global.innodb_flush_log_at_trx_commit AS v")[0]["v"]
        s.execute("SET GLOBAL innodb_flush_log_at_trx_commit = 2")
    try:
        yield pg_fsync_off, my_server
    finally:
        with Session(my_server.target()) as s:
            s.execute(f"SET GLOBAL innodb_flush_log_at_trx_commit = {int(old)}")


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_hot_row_update_gives_lock_contention_on_top(engine: str, pg_server, my_server, tmp_path: Path) -> None:
    srv = pg_server if engine == "postgres" else my_server
    hot_row_table(srv)
    script = tmp_path / "hot-row.sql"
    script.write_text(f"BEGIN;\nUPDATE dbdiag.hot_row SET n = n + 1 WHERE id = 1;\n{SLEEP[engine]}\nCOMMIT;\n")
    # the plant is a held row lock: flush tracing and the fsync test would only cost time
    by = run(tmp_path / "bundle", [f"hot={srv.dsn()}"], ["custom"], clients=(4,), script=script, flush=False)
    found = by["hot"]
    # the step's limit ranks first (a lock holder), its lock waits right under it
    assert found and found[0]["category"] == "limit" and found[0]["extra"]["kind"] == "lock", summary(found)
    top = found[1]
    assert top["category"] == "lock_contention" and top["impact"] == found[0]["impact"], summary(found)
    assert top["clients"] == 4 and top["workload"] == "custom"
    assert top["evidence"]["lock_waits_pct"] >= 30, top["evidence"]
    assert top["evidence"]["lock_waits"].startswith("Lock:transactionid" if engine == "postgres" else "Lock:row")
    if engine == "mysql":
        assert top["evidence"]["row_lock_waits_per_s"] > 0  # InnoDB's own counter saw the waits too


def test_relaxed_settings_give_durability_unsafe(relaxed, tmp_path: Path) -> None:
    pg, my = relaxed
    # the plant is the settings, read at the run's start: flush tracing and the fsync test would only cost time
    by = run(tmp_path / "bundle", [f"pg={pg.dsn()}", f"my={my.dsn()}"], ["insert"], flush=False)
    for label, setting, value in (("pg", "fsync", "off"), ("my", "innodb_flush_log_at_trx_commit", "2")):
        unsafe = [f for f in by[label] if f["category"] == "durability_unsafe"]
        assert len(unsafe) == 1, summary(by[label])
        f = unsafe[0]
        assert f["severity"] == "critical" and f["impact"] == 1.0
        assert f"{setting}={value}" in f["title"]
        assert f["evidence"][setting].startswith(f"{value}: ")
        assert by[label][0]["category"] == "durability_unsafe"  # ranks first


def test_low_flush_capability_gives_durability_implausible(pg_server, my_server, tmp_path: Path) -> None:
    # the plant is F, given: the verdict's flush-capacity check needs only it and the commit rate, so no flush
    # tracing (1.1 s of each step's tail)
    by = run(tmp_path / "bundle", [f"pg={pg_server.dsn()}", f"my={my_server.dsn()}"], ["insert"],
             flush_capability=LOW_FLUSH_CAPABILITY, flush=False)
    tps = {r["target"]: r["tps"] for r in by["_results"]}
    for label in ("pg", "my"):
        bad = [f for f in by[label] if f["category"] == "durability_implausible"]
        assert len(bad) == 1, (tps[label], summary(by[label]))
        f = bad[0]
        assert f["severity"] == "critical" and f["clients"] == 2 and f["workload"] == "insert"
        assert f["evidence"]["flush_capability_per_s"] == LOW_FLUSH_CAPABILITY
        # the commit rate judged is the one this run measured (every insert transaction commits once)
        assert f["evidence"]["commits_per_s"] == pytest.approx(tps[label], rel=0.01, abs=0.5)
        assert "failed: flush_capacity" in f["evidence"]


def test_clean_point_select_raises_no_critical_finding(point_select_bundles: dict[str, Path]) -> None:
    """Point selects at 2 clients, 2 s steps on both session servers: the runs test_compare reads too
    (tests/conftest.py), as dbdiag run wrote their findings."""
    for label, path in point_select_bundles.items():
        results = json.loads((path / "results.json").read_text())["results"]
        assert [(r["target"], r["workload"], r["clients"]) for r in results] == [(label, "point-select", 2)]
        found = json.loads((path / "findings.json").read_text())["findings"]
        assert found and {f["target"] for f in found} == {label}, summary(found)  # judged: a limit at least
        assert [f for f in found if f["severity"] == "critical"] == [], summary(found)
        cats = {f["category"] for f in found}
        assert not cats & {"durability_unsafe", "durability_implausible", "lock_contention", "commit_flush_bound"}


def test_small_buffer_pool_gives_io_read_bound_on_mariadb(tmp_path: Path) -> None:
    settings = {"innodb_buffer_pool_size": "6M", "performance_schema": "ON",
                "performance-schema-consumer-events-waits-current": "ON"}
    with servers.start_mysql(settings) as my:
        # Autocommit point selects are inside a transaction for only part of each tick: 2 s gave 24 samples
        # here (the rules need 15) and fewer on a busy machine, so the step is long enough to clear that.
        by = run(tmp_path / "bundle", [f"my={my.dsn()}"], ["point-select"], scale=2, duration_s=5.0)
    found = by["my"]
    io_read = [f for f in found if f["category"] == "io_read_bound"]
    assert len(io_read) == 1, summary(found)
    f = io_read[0]
    assert f["evidence"]["read_waits"].startswith("wait/io/file/innodb/innodb_data_file")
    assert f["evidence"]["read_waits_pct"] >= 20
    assert f["evidence"]["pages_read_from_disk_per_txn"] > 0.3  # InnoDB's counters agree: misses
    # the step's limit ranks first; the reads are that limit (a warning) when they are its largest part, else a
    # part of each transaction beside it (info), with their share of the transaction's time as impact
    lim = found[0]
    assert lim["category"] == "limit", summary(found)
    assert f["extra"]["limit_kind"] == lim["extra"]["kind"]
    assert f["severity"] == ("warning" if lim["extra"]["kind"] == "io" else "info"), (f["title"], lim["title"])
    assert f["impact"] == pytest.approx(f["evidence"]["share_of_txn_pct"] / 100, abs=2e-3)
