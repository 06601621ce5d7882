"""connection_churn on the services dbdiag did not start (PostgreSQL 15, MariaDB 10.11), both directions.

The plant: a one-statement script run with ``--connect-per-transaction`` (a new connection for each
transaction, its connect timed by the client), and pgbench -C under ``dbdiag watch`` (the connect not timed by
anyone dbdiag can read). The control: the same load keeping its connections. Expected figures come from the
load's own rows (transactions) and the server's counters as the bundle recorded them, never from the rule.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diag.core.bundle import load_bundle
from diag.core.db import Session
from diag.core.targets import Target, parse_target
from reports.model.steps import steps
from reports.rules.base import counter_in_step
from tests.integration.test_findings_planted import run, summary
from tests.integration.test_watch import dbdiag

SCRIPT = "SELECT 1;\n"


@pytest.fixture(scope="module")
def pg_db(pg_service: Target) -> Iterator[str]:
    """DSN of a database of this module's own on the PostgreSQL service."""
    name = f"dbdiag_churn_{uuid.uuid4().hex[:8]}"
    with Session(pg_service, statement_timeout_ms=0) as s:
        s.execute(f"CREATE DATABASE {name}")
    yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    with Session(pg_service, statement_timeout_ms=0) as s:
        s.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="module")
def my_db(my_service: Target) -> Iterator[str]:
    name = f"dbdiag_churn_{uuid.uuid4().hex[:8]}"
    with Session(my_service, statement_timeout_ms=0) as s:
        s.execute(f"CREATE DATABASE {name}")
    yield f"mysql://root@127.0.0.1:3306/{name}"
    with Session(my_service, statement_timeout_ms=0) as s:
        s.execute(f"DROP DATABASE IF EXISTS {name}")


def _churn(tmp_path: Path, dsn: str, name: str, per_txn: bool) -> tuple[list[dict[str, Any]], dict[str, Any], Any]:
    script = tmp_path / "one.sql"
    script.write_text(SCRIPT)
    # the plant is the connects: flush tracing and the fsync test (a custom script counts as writing) would only
    # cost time (test_findings_planted.run measured them at about half of such a short run)
    by = run(tmp_path / name, [f"t={dsn}"], ["custom"], clients=(2,), script=script, duration_s=1.5,
             connect_per_txn=per_txn, flush=False)
    (row,) = by["_results"]
    assert row["transactions"] >= 30 and not row["errors"], row
    # The server's connection counter was read over the step (the control's silence is not a missing source).
    b = load_bundle(tmp_path / name)
    (step,) = list(steps(b))
    assert counter_in_step(b, step, step.engine.stats_series, step.engine.connection_counter) is not None
    return [f for f in by["t"] if f["category"] == "connection_churn"], row, summary(by["t"])


@pytest.mark.parametrize("engine", ["pg", "my"])
def test_connect_per_transaction_is_named_ranked_by_its_connect_share(engine: str, pg_db: str, my_db: str,
                                                                      tmp_path: Path) -> None:
    dsn = pg_db if engine == "pg" else my_db
    found, row, ctx = _churn(tmp_path, dsn, "plant", True)
    assert len(found) == 1, ctx
    ev = found[0]["evidence"]
    # Each transaction opened its own connection: about one per transaction on the server's own count (its
    # samples a second apart; PostgreSQL's backends flush their counts at most once a second).
    assert 0.6 <= ev["new connections per transaction"] <= 1.5, ev
    # Ranked by the share of the transaction the client spent connecting (the row's figure over the step's time).
    wall_ms = row["clients"] * row["measured_s"] * 1000 / row["transactions"]
    impact = found[0]["extra"].get("impact_before_limit", found[0]["impact"])  # capped under the step's limit
    assert impact == pytest.approx(row["connect_ms_per_txn"] / wall_ms, abs=0.05), (ev, row)
    assert ev["impact_from"].startswith("the client's connect time"), ev
    none, _row, ctx = _churn(tmp_path, dsn, "control", False)
    assert none == [], ctx


def test_pgbench_reconnecting_under_watch_is_named_as_a_condition(pg_db: str, tmp_path: Path) -> None:
    """pgbench -C (a new connection per transaction) watched: named from pg_stat_database.sessions, the connect
    not timed; the same pgbench without -C: not named."""
    t = parse_target(pg_db)
    script = tmp_path / "one.sql"
    script.write_text(SCRIPT)
    conn = ["-h", "127.0.0.1", "-p", "5432", "-U", "postgres"]
    out: dict[bool, Path] = {}
    for reconnect in (True, False):
        out[reconnect] = tmp_path / f"watch_{reconnect}"
        cmd = ["pgbench", *conn, "-n", "-c", "2", "-T", "3", "-f", str(script), *(["-C"] if reconnect else []),
               t.database]
        p = dbdiag("watch", f"pg={pg_db}", "--window", "1.5", "--no-profile", "--out", str(out[reconnect]),
                   "--", *cmd)
        assert p.returncode == 0, p.stderr[-2000:]
    found = {k: [f for f in json.loads((v / "findings.json").read_text())["findings"]
                 if f["category"] == "connection_churn"] for k, v in out.items()}
    assert found[True], json.loads((out[True] / "findings.json").read_text())["findings"]
    for f in found[True]:
        # A watch counts the server's transactions (xact_commit), dbdiag's own sampling in the same database
        # included: at this light load (measured: ~130 counted per s for ~70 new connections per s) a
        # connection per pgbench transaction is about half a connection per counted transaction.
        assert f["evidence"]["impact_from"].startswith("not timed") and f["evidence"][
            "new connections per transaction"] >= 0.3, f
    assert found[False] == [], found[False]
    assert os.path.exists(out[False] / "results.json")
