"""``--connect-per-transaction`` (pgbench -C) against real servers: each transaction on a new connection, the
connect timed as a part of it (issue 26). The server's own count of connections proves the churn."""

from __future__ import annotations

import json

import pytest

from diag.core.db import Session
from tests.integration.test_cli_errors import dbdiag

CONNECTIONS_SQL = {"postgres": "SELECT sessions AS n FROM pg_stat_database WHERE datname = current_database()",
                   "mysql": "SELECT VARIABLE_VALUE AS n FROM information_schema.GLOBAL_STATUS "
                            "WHERE VARIABLE_NAME = 'CONNECTIONS'"}


def _connections(t) -> int:
    with Session(t) as s:
        return int(s.query(CONNECTIONS_SQL[t.engine])[0]["n"])


@pytest.mark.parametrize("engine", ["pg", "my"])
def test_each_transaction_opens_its_own_connection_and_the_connect_is_timed(engine, pg_server, my_server, tmp_path):
    srv = pg_server if engine == "pg" else my_server
    t = srv.target()
    out = tmp_path / "b"
    dbdiag("run", srv.dsn(), "-c", "1", "-T", "0.3", "--warmup", "0", "--no-collect", "--no-profile",
           "--out", str(tmp_path / "load"))  # the dataset loaded outside the counted window
    before = _connections(t)
    p = dbdiag("run", srv.dsn(), "-c", "2", "-T", "1.5", "--warmup", "0.2", "--no-collect", "--no-profile",
               "--connect-per-transaction", "--out", str(out))
    after = _connections(t)
    assert p.returncode == 0, p.stderr[-2000:]
    (row,) = json.loads((out / "results.json").read_text())["results"]
    n = row["transactions"]
    assert n >= 5 and not row["errors"], row
    # Every measured transaction had its own connection (plus the warmup's, the clients' first, our sessions).
    assert after - before >= n, (before, after, n)
    assert row["connect_per_transaction"] is True
    # The connect is timed and is a part of the transaction's latency (it cannot exceed the mean latency).
    assert 0 < row["connect_ms_per_txn"] and 0 < row["connect_share_of_latency"] <= 1.0, row
    assert f"connect {row['connect_ms_per_txn']:.3f} ms/txn" in p.stderr
    recs = [json.loads(ln) for f in (out / "series").glob("workload--*.jsonl") for ln in f.read_text().splitlines()]
    assert all(r["connect_ms_per_txn"] > 0 for r in recs if r["transactions"]), recs
