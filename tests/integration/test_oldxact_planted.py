"""old_transaction on the services dbdiag did not start: a session left idle in a transaction (PostgreSQL,
REPEATABLE READ after one read: it holds its snapshot) or with a consistent snapshot open (MariaDB) while the
workload updates rows of a 100-row table: the holder is named by its pid, its state and its last statement;
the same workload with the holder gone is not named. Each update leaves a dead row version (PostgreSQL) or an
undo log record for purge (InnoDB) that the holder's snapshot keeps.
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

UPDATE = "\\set k random(1, 100)\nUPDATE {table} SET n = n + 1 WHERE id = :k;\n"


@pytest.fixture(scope="module")
def pg_db(pg_service: Target) -> Iterator[str]:
    name = f"dbdiag_oldx_{uuid.uuid4().hex[:8]}"
    with Session(pg_service, statement_timeout_ms=0) as s:
        s.execute(f"CREATE DATABASE {name}")
    dsn = f"postgresql://postgres@127.0.0.1:5432/{name}"
    with Session(parse_target(dsn), statement_timeout_ms=0) as s:
        s.execute("CREATE TABLE hot (id int PRIMARY KEY, n int NOT NULL) WITH (autovacuum_enabled = off)")
        s.execute("INSERT INTO hot SELECT g, 0 FROM generate_series(1, 100) g")
    yield dsn
    with Session(pg_service, statement_timeout_ms=0) as s:
        s.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="module")
def my_db(my_service: Target) -> Iterator[str]:
    name = f"dbdiag_oldx_{uuid.uuid4().hex[:8]}"
    with Session(my_service, statement_timeout_ms=0) as s:
        s.execute(f"CREATE DATABASE {name}")
        s.execute(f"CREATE TABLE {name}.hot (id int PRIMARY KEY, n int NOT NULL) ENGINE=InnoDB")
        s.execute(f"INSERT INTO {name}.hot SELECT seq, 0 FROM {name}.seq_1_to_100")
        s.execute("COMMIT")
    yield f"mysql://root@127.0.0.1:3306/{name}"
    with Session(my_service, statement_timeout_ms=0) as s:
        s.execute(f"DROP DATABASE IF EXISTS {name}")


def _run(tmp_path: Path, dsn: str, table: str, name: str) -> tuple[list[dict[str, Any]], Any]:
    path = tmp_path / f"{name}.sql"
    path.write_text(UPDATE.format(table=table))
    by = run(tmp_path / name, [f"t={dsn}"], ["custom"], clients=(1,), script=path, duration_s=1.5,
             flush=False)  # the plant is not about commits: flush tracing, the fsync test would only cost time
    return [f for f in by["t"] if f["category"] == "old_transaction"], summary(by["t"])


def _holder(dsn: str, start: list[str]) -> tuple[Session, int]:
    s = Session(parse_target(dsn), statement_timeout_ms=0)  # autocommit: BEGIN opens the transaction
    pid = s.query("SELECT pg_backend_pid() AS p" if dsn.startswith("postgresql") else "SELECT CONNECTION_ID() AS p")
    for sql in start:
        s.execute(sql)
    return s, int(pid[0]["p"])


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_a_transaction_left_open_is_named_and_its_absence_is_not(engine: str, request: pytest.FixtureRequest,
                                                                 tmp_path: Path) -> None:
    dsn = request.getfixturevalue("pg_db" if engine == "postgres" else "my_db")
    table = "hot" if engine == "postgres" else f"{dsn.rsplit('/', 1)[1]}.hot"
    start = (["BEGIN ISOLATION LEVEL REPEATABLE READ", "SELECT count(*) AS c FROM hot"] if engine == "postgres"
             else ["START TRANSACTION WITH CONSISTENT SNAPSHOT", f"SELECT count(*) AS c FROM {table}"])
    holder, pid = _holder(dsn, start)
    try:
        found, ctx = _run(tmp_path, dsn, table, "plant")
    finally:
        holder.close()
    assert len(found) == 1, ctx
    f = found[0]
    assert f["extra"]["pid"] == pid and f"pid {pid}" in f["evidence"]["session"], f["evidence"]
    if engine == "postgres":
        assert f["evidence"]["state"] == "idle in transaction", f["evidence"]
        assert "count(*)" in f["evidence"]["last statement"].lower(), f["evidence"]  # the holder's last statement
    else:  # an idle thread's last statement is in performance_schema only, off on this service
        assert f["evidence"]["state"] == "Sleep" and "performance_schema" in f["evidence"]["last statement"]
    none, ctx = _run(tmp_path, dsn, table, "control")
    assert none == [], ctx
