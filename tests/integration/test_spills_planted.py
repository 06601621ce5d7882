"""temp_spill on servers dbdiag did not start, planted by the workload itself (no server setting changes).

A sort that outgrows its memory: PostgreSQL with ``SET LOCAL work_mem = '64kB'`` sorting 30,000 rows (and
the same script with 32 MB: no temporary file), MariaDB with ``sort_buffer_size = 32768`` sorting 30,000
rows of the Sequence engine (and with 4 MB: no merge pass). The PostgreSQL service has no pg_stat_statements,
as most users' servers: the finding stands on pg_stat_database alone, in a database of the test's own, so no
other session's temporary files count. The throwaway PostgreSQL (pg_stat_statements loaded) names the
statement. MariaDB's counters are server-wide: the control tolerates other sessions' spills below the rule's
threshold (one in ten transactions), which the plant exceeds forty-fold (4 merge passes per transaction).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diag.core import servers
from diag.core.db import Session
from diag.core.targets import Target, parse_target
from tests.integration.test_findings_planted import run, summary

PG_SORT = ("BEGIN;\nSET LOCAL work_mem = '{mem}';\n"
           "SELECT count(*) FROM (SELECT g FROM generate_series(1, 30000) g ORDER BY g DESC) s;\nCOMMIT;\n")
MY_SORT = ("SET SESSION sort_buffer_size = {mem};\n"
           "SELECT count(*) FROM (SELECT seq FROM seq_1_to_30000 ORDER BY (seq * 7) % 1000 LIMIT 29999) s;\n")


@pytest.fixture(scope="module")
def pg_own_db(pg_service: Target) -> Iterator[str]:
    """A database of this module's own on the PostgreSQL service: its pg_stat_database row counts only us."""
    name = f"dbdiag_spill_{uuid.uuid4().hex[:8]}"
    with Session(pg_service, statement_timeout_ms=0) as s:
        s.execute(f"CREATE DATABASE {name}")
    yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    with Session(pg_service, statement_timeout_ms=0) as s:
        s.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _spills(tmp_path: Path, dsn: str, script: str, name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    path = tmp_path / f"{name}.sql"
    path.write_text(script)
    by = run(tmp_path / name, [f"t={dsn}"], ["custom"], clients=(1,), script=path, duration_s=1.5,
             flush=False)  # the plant is not about commits: flush tracing, the fsync test would only cost time
    (row,) = by["_results"]
    assert row["transactions"] >= 10, row  # enough transactions for a per-transaction figure
    return [f for f in by["t"] if f["category"] == "temp_spill"], {"row": row, "all": summary(by["t"])}


def test_postgres_sort_beyond_work_mem_is_named_without_digests(pg_own_db: str, tmp_path: Path) -> None:
    found, ctx = _spills(tmp_path, pg_own_db, PG_SORT.format(mem="64kB"), "plant")
    assert len(found) == 1, ctx
    f = found[0]
    assert f["evidence"]["temporary files per transaction"] >= 1.0, f["evidence"]
    assert f["evidence"]["temporary bytes per transaction"] >= 30000 * 4, f["evidence"]  # 30,000 int4 at least
    assert "work_mem" in f["advice"] and "not timed" in f["evidence"]["impact_from"]
    none, ctx = _spills(tmp_path, pg_own_db, PG_SORT.format(mem="32MB"), "control")
    assert none == [], ctx


def test_postgres_with_digests_names_the_spilling_statement(pg_server: servers.ThrowawayServer,
                                                            tmp_path: Path) -> None:
    found, ctx = _spills(tmp_path, pg_server.dsn(), PG_SORT.format(mem="64kB"), "plant")
    assert len(found) == 1, ctx
    ev = found[0]["evidence"]
    assert "generate_series" in ev["statement"] and ev["statement temporary blocks per call"] > 0, ev
    assert 0 < found[0]["impact"] <= 1 and "server time" in ev["impact_from"]


def test_mariadb_sort_beyond_sort_buffer_is_named(my_service: Target, tmp_path: Path) -> None:
    dsn = f"mysql://root@127.0.0.1:3306/{my_service.database or 'test'}"
    found, ctx = _spills(tmp_path, dsn, MY_SORT.format(mem=32768), "plant")
    assert len(found) == 1, ctx
    assert found[0]["evidence"]["sort merge passes per transaction"] >= 1.0, found[0]["evidence"]
    assert "sort_buffer_size" in found[0]["advice"]
    none, ctx = _spills(tmp_path, dsn, MY_SORT.format(mem=4 * 1024 * 1024), "control")
    assert none == [], ctx
