"""table_scan on the services dbdiag did not start, without statement digests (PostgreSQL without
pg_stat_statements, MariaDB with performance_schema off: as most users' servers are).

The plant: a table of 5,000 rows and a script that looks a row up by an unindexed column (a full scan each
transaction); the control: the same script looking it up by its primary key. PostgreSQL names the table
(pg_stat_user_tables of the test's own database); MariaDB's handler counters are server-wide, so the finding
says it cannot name the table and what would.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diag.core.db import Session
from diag.core.targets import Target, parse_target
from tests.integration.test_findings_planted import run, summary

ROWS = 5000
SCAN = "\\set k random(1, {rows})\nSELECT id FROM {table} WHERE pad = :k;\n"
LOOKUP = "\\set k random(1, {rows})\nSELECT id FROM {table} WHERE id = :k;\n"


@pytest.fixture(scope="module")
def pg_table(pg_service: Target) -> Iterator[tuple[str, str]]:
    """(DSN of a database of this module's own, table) on the PostgreSQL service."""
    name = f"dbdiag_scan_{uuid.uuid4().hex[:8]}"
    with Session(pg_service, statement_timeout_ms=0) as s:
        s.execute(f"CREATE DATABASE {name}")
    dsn = f"postgresql://postgres@127.0.0.1:5432/{name}"
    with Session(parse_target(dsn), statement_timeout_ms=0) as s:
        s.execute("CREATE TABLE scanned (id int PRIMARY KEY, pad int NOT NULL)")
        s.execute(f"INSERT INTO scanned SELECT g, g FROM generate_series(1, {ROWS}) g")
        s.execute("ANALYZE scanned")
    yield dsn, "public.scanned"
    with Session(pg_service, statement_timeout_ms=0) as s:
        s.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="module")
def my_table(my_service: Target) -> Iterator[tuple[str, str]]:
    name = f"dbdiag_scan_{uuid.uuid4().hex[:8]}"
    with Session(my_service, statement_timeout_ms=0) as s:
        s.execute(f"CREATE DATABASE {name}")
        s.execute(f"CREATE TABLE {name}.scanned (id int PRIMARY KEY, pad int NOT NULL)")
        s.execute(f"INSERT INTO {name}.scanned SELECT seq, seq FROM {name}.seq_1_to_{ROWS}")
        s.execute("COMMIT")
    yield f"mysql://root@127.0.0.1:3306/{name}", f"{name}.scanned"
    with Session(my_service, statement_timeout_ms=0) as s:
        s.execute(f"DROP DATABASE IF EXISTS {name}")


def _scans(tmp_path: Path, dsn: str, script: str, name: str) -> tuple[list[dict[str, Any]], list[Any]]:
    path = tmp_path / f"{name}.sql"
    path.write_text(script)
    by = run(tmp_path / name, [f"t={dsn}"], ["custom"], clients=(1,), script=path, duration_s=1.5,
             flush=False)  # the plant is not about commits: flush tracing, the fsync test would only cost time
    (row,) = by["_results"]
    assert row["transactions"] >= 20, row
    return [f for f in by["t"] if f["category"] in ("table_scan", "full_scan")], summary(by["t"])


def test_postgres_full_scans_are_named_by_table_without_digests(pg_table: tuple[str, str], tmp_path: Path) -> None:
    dsn, table = pg_table
    found, ctx = _scans(tmp_path, dsn, SCAN.format(rows=ROWS, table="scanned"), "plant")
    assert [f["category"] for f in found] == ["table_scan"], ctx
    ev = found[0]["evidence"]
    assert ev["table"] == table and found[0]["extra"]["table"] == table, ev
    # One scan per transaction, counted over the snapshots' span of about 3 s: PostgreSQL 15+ backends flush their
    # counters at most once a second, so the count is good to about a second's worth either way.
    assert 0.6 <= ev["sequential scans per transaction"] <= 1.6, ev
    assert ev["rows read per sequential scan"] == ROWS, ev  # every scan reads the whole table
    none, ctx = _scans(tmp_path, dsn, LOOKUP.format(rows=ROWS, table="scanned"), "control")
    assert none == [], ctx


def test_mariadb_full_scans_are_named_from_handler_counters(my_table: tuple[str, str], tmp_path: Path) -> None:
    dsn, _table = my_table
    found, ctx = _scans(tmp_path, dsn, SCAN.format(rows=ROWS, table="scanned"), "plant")
    assert [f["category"] for f in found] == ["table_scan"], ctx
    ev = found[0]["evidence"]
    # One scan per transaction; the 1 s status samples around a 1.5 s step and other sessions' small scans (our
    # own samplers' information_schema reads) blur the count, not the order of magnitude.
    # Rows per scan are diluted by those small scans; rows per transaction are the table's, give or take that blur.
    assert 0.5 <= ev["scans per transaction"] <= 2.0, ev
    assert 0.6 * ROWS <= ev["rows read by table scans per transaction"] <= 2.0 * ROWS, ev
    assert ev["table"].startswith("not known") and "performance_schema" in ev["table"], ev
    none, ctx = _scans(tmp_path, dsn, LOOKUP.format(rows=ROWS, table="scanned"), "control")
    assert none == [], ctx
