"""Statement digests on real servers: a planted full scan, the statement section, A vs B, degraded sources.

One module-wide run with the default run's targets (``embedded:postgres``, ``embedded:mysql``: PostgreSQL 18
and MariaDB started by the run, instrumented by default): the default workload (point-select), then a custom
script whose second statement reads
the whole 100,000-row sbtest1 per transaction (a filter on ``pad``, which has no index), 1 client, 2 s
steps. Both directions on each engine: the custom step's count(*) gets ``full_scan`` naming sbtest1 and the
statement, and ``statement_hotspot``; the point-select step (one primary-key lookup) gets neither.

Degraded sources are probed (no run): the machine's PostgreSQL 15 service has no pg_stat_statements
preloaded and must not be changed, a PostgreSQL role without pg_read_all_stats sees only its own
statements, a MariaDB user without SELECT on performance_schema gets none; each says why.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from collectors.base import CollectorContext
from collectors.mysql.statements import MyStatementSource
from collectors.pg.statements import PgStatementSource
from collectors.sql import MARKER
from diag.core.db import Session
from diag.run import Run, RunOptions, run_plan
from diag.core.targets import Target
from workloads.driver import DriverOptions

FULL_SCAN = """\\set id random(1, 100000)
SELECT c FROM dbdiag.sbtest1 WHERE id = :id;
SELECT count(*) FROM dbdiag.sbtest1 WHERE pad = 'none';
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("statements")
    script = d / "full_scan.sql"
    script.write_text(FULL_SCAN)
    drv = DriverOptions(clients=(1,), duration_s=2.0, warmup_s=0.5, script=str(script), scale=1)
    log = io.StringIO()
    # embedded: targets, as a default `dbdiag run` has: servers started (instrumented) by the run itself.
    opts = RunOptions(targets=["pg=embedded:postgres", "my=embedded:mysql"], workloads=["point-select", "custom"],
                      driver=drv, out=d / "bundle", argv=["dbdiag", "run"], profile=False)
    # The custom script makes it a write run, which would trace flushes and measure F first: seconds per target,
    # and neither is checked here.
    opts = dataclasses.replace(opts, sources=dataclasses.replace(
        run_plan(opts), flush=False, flush_off="not what this test plants", fsync_test_s=None))
    path = Run(opts, out=log).execute()
    results = json.loads((path / "results.json").read_text())["results"]
    assert len(results) == 4, log.getvalue()[-3000:]
    return {"path": path, "log": log.getvalue(), "results": results,
            "found": json.loads((path / "findings.json").read_text())["findings"],
            "html": (path / "report.html").read_text()}


def _step(planted: dict[str, Any], target: str, workload: str) -> dict[str, Any]:
    (row,) = [r for r in planted["results"] if r["target"] == target and r["workload"] == workload]
    assert row.get("statements"), f"{target} {workload}: no statements record\n" + planted["log"][-2000:]
    return row["statements"]


def _found(planted: dict[str, Any], category: str, target: str, workload: str) -> list[dict[str, Any]]:
    return [f for f in planted["found"] if f["category"] == category and f["target"] == target
            and f["workload"] == workload]


@pytest.mark.parametrize("target", ["pg", "my"])
def test_planted_full_scan_names_table_statement_and_plan_node(planted, target) -> None:
    (f,) = _found(planted, "full_scan", target, "custom")
    ev = f["evidence"]
    assert "sbtest1" in ev["table"] and "pad" in ev["statement"] and "count(*)" in ev["statement"]
    assert ev["plan_node"] in ("Seq Scan on dbdiag.sbtest1", "ALL on sbtest1")
    # Each call reads the whole table (100,000 rows; PostgreSQL counts the rows its seq scans read) for one row.
    assert 0.9e5 <= ev["examined_per_call"] <= 1.1e5 and ev["rows_returned"] == ev["calls"]
    (hot,) = _found(planted, "statement_hotspot", target, "custom")
    assert "pad" in hot["evidence"]["statement"]
    # The other direction: one primary-key lookup per transaction scans nothing and is its step's only statement.
    assert not _found(planted, "full_scan", target, "point-select")
    assert not _found(planted, "statement_hotspot", target, "point-select")


@pytest.mark.parametrize("target", ["pg", "my"])
def test_digests_count_the_step_and_leave_our_own_statements_out(planted, target) -> None:
    st = _step(planted, target, "point-select")
    (row,) = [r for r in planted["results"] if r["target"] == target and r["workload"] == "point-select"]
    (top,) = [s for s in st["statements"] if "sbtest1" in s["text"]]
    window = st["t1"] - st["t0"]
    # Calls over the digest window against the transactions the driver counted at the step's rate.
    assert top["calls"] == pytest.approx(row["tps"] * window, rel=0.25)
    assert st["own_excluded"] >= 1
    # our own statements (catalog reads) are not among them: told by what they read, the stored texts being
    # fingerprints without the /* dbdiag */ comment
    catalog = re.compile(r"pg_stat|pg_settings|pg_locks|pg_blocking|current_setting|pg_backend_pid|version\(|"
                         r"performance_schema|information_schema|CONNECTION_ID|@@", re.IGNORECASE)
    assert not [s for s in st["statements"] if MARKER in s["text"] or catalog.search(s["text"])]
    assert top["plan"]["nodes"] and not top["plan"]["error"]
    assert top["plan"]["method"] == ("generic_plan" if target == "pg" else "parameters_substituted")
    assert (planted["path"] / top["plan"]["artifact"]).exists()


def test_postgres_counts_blocks_and_table_scans(planted) -> None:
    st = _step(planted, "pg", "custom")
    (scan,) = [s for s in st["statements"] if "pad" in s["text"]]
    assert scan["shared_blks_hit"] + scan["shared_blks_read"] >= scan["calls"] * 1000  # ~1,700 pages per scan
    (t,) = [t for t in st["tables"] if t["table"] == "dbdiag.sbtest1"]
    assert t["seq_scan"] >= 1 and t["seq_tup_read"] >= 100000 * t["seq_scan"] * 0.99


def test_report_has_a_statement_section_for_both_engines_and_a_versus_table(planted) -> None:
    html = planted["html"]
    section = html.split('<h2 id="statements">', 1)[1].split("<h2 ", 1)[0]
    for label, engine in (("pg", "PostgreSQL"), ("my", "MySQL/MariaDB")):
        assert re.search(rf"<h3>{label} <span class=\"muted\">\({re.escape(engine)}\)</span></h3>", section)
    assert section.count("dbdiag.sbtest1 WHERE id") >= 4  # point-select and custom, both engines
    # each throwaway server's section says it ran instrumented, and what that was measured to cost
    assert section.count('class="muted instrumentation-cost"') == 2 and "pg_stat_statements" in section
    assert "performance_schema" in section and "of point-select throughput" in section
    assert "Seq Scan on dbdiag.sbtest1" in section and "ALL on sbtest1" in section
    versus = section.split('id="statements-versus"', 1)[1]
    custom = versus.split("custom &middot;", 1)[1]
    # PostgreSQL times execution only, MariaDB from parse to end: the two timers are shown, never subtracted or
    # given as a share of the gap (issue 22), with rows per call beside them.
    lead = custom.split("</p>", 1)[0]
    assert "cover different spans" in lead and "explains" not in lead, lead
    assert "not comparable" in custom and "rows per call" in custom and "count(*)" in custom


def _probe(cls: type, target: Target) -> Any:
    return cls(CollectorContext(target=target, artifacts=Path("/nonexistent"))).probe()


def test_shared_postgres_service_without_the_library_degrades_and_stays_unchanged(pg_service) -> None:
    with Session(pg_service) as s:
        before = s.query("SELECT setting FROM pg_settings WHERE name = 'shared_preload_libraries'")
    p = _probe(PgStatementSource, pg_service)
    assert not p.ok and "pg_stat_statements" in p.reason and "shared_preload_libraries" in p.hint
    assert "does not change a server it did not start" in p.hint
    with Session(pg_service) as s:
        assert s.query("SELECT setting FROM pg_settings WHERE name = 'shared_preload_libraries'") == before
        # The pre-16 plan path (a generic plan through PREPARE) on this real PostgreSQL 15, read-only.
        src = PgStatementSource(CollectorContext(target=pg_service, artifacts=Path("/nonexistent")))
        plan, _ = src.explain(s, "SELECT relname FROM pg_class WHERE relname = $1")
    assert plan.method == "generic_prepared" and plan.nodes and "pg_class" in plan.nodes[0].table


def test_least_privilege_users_degrade_with_a_reason(pg_server, my_server) -> None:
    with Session(pg_server.target()) as s:
        s.execute("DROP ROLE IF EXISTS dbdiag_low")
        s.execute("CREATE ROLE dbdiag_low LOGIN")
    with Session(my_server.target()) as s:
        s.execute("DROP USER IF EXISTS 'dbdiag_low'@'%'")
        s.execute("CREATE USER 'dbdiag_low'@'%'")
    pg = _probe(PgStatementSource, pg_server.target().with_endpoint("127.0.0.1", pg_server.port, None,
                                                                     "dbdiag_low", "postgres"))
    assert pg.ok and any("pg_read_all_stats" in m for m in pg.missing) and "pg_monitor" in pg.hint
    my = _probe(MyStatementSource, my_server.target().with_endpoint("127.0.0.1", my_server.port, None,
                                                                     "dbdiag_low", ""))
    assert not my.ok and "performance_schema" in my.reason and "GRANT SELECT ON performance_schema" in my.hint
