"""checkpoint_pressure on real throwaway servers: WAL / redo space too small for a write-heavy load.

The plant: PostgreSQL with ``max_wal_size`` at its minimum (32 MB: two 16 MB segments) and
``checkpoint_timeout`` at 1 h, so every checkpoint in the step is requested by WAL volume, never by time;
MariaDB with a 4 MB redo log (``innodb_log_file_size``), so the checkpoint age runs into the log's capacity.
The load: one client inserting 1,000 rows per transaction into a table with an index on a random key (every
insert dirties a random leaf page: after each checkpoint, its first change logs a full-page image on
PostgreSQL). The same script on servers started with the engine's default settings (1 GB of max_wal_size,
96 MB of redo log) is not named. Each server is this module's own: WAL written by other tests does not count
toward a checkpoint here.

Rows of 1,000 characters: about 1.3-1.5 MB of WAL, 1.1 MB of redo per transaction. A requested checkpoint
comes every ~17 MB of WAL (max_wal_size / (1 + checkpoint_completion_target)) on the plant and every ~540 MB
on the default. PostgreSQL runs at a fixed 20 transactions/s (--rate), about 30 MB/s of WAL: closed loop, a
quiet machine wrote 213 MB/s and the control's 2.5 s step forced a checkpoint of its own (CI, once). At the
fixed rate the control writes about 75 MB, the plant passes ~17 MB several times, and a loaded machine
that manages half the rate still passes it twice. MariaDB runs at a fixed 6
transactions/s (--rate), about 7 MB/s of redo: closed loop (200-character rows), the default 96 MB log reached
43% of its 80 MB checkpoint age limit within 2.5 s at load 30, and a quiet machine writing 2-3 times faster
would have put the control over the rule's 75%. At the fixed rate the control writes the same redo on any
machine that keeps up (under 30 MB in the run), while one or two transactions fill the planted log's 2.6 MB
limit, however slow the machine (at load 33 a 1-client step managed 4 transactions/s, and the status sampler
stalled for 2.8 s: 200-character rows had filled only 18% of it by the step's one sample).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from diag.core import servers
from diag.core.db import Session
from tests.integration.test_findings_planted import run, summary

SCRIPT = {
    "postgres": ("INSERT INTO dbdiag.ckpt (k, pad) SELECT (random() * 1e9)::int, repeat('x', 1000) "
                 "FROM generate_series(1, 1000);\n"),
    "mysql": ("INSERT INTO dbdiag.ckpt (k, pad) SELECT FLOOR(RAND() * 1e9), REPEAT('x', 1000) "
              "FROM dbdiag.seq_1_to_1000;\n"),
}
TABLE = {
    "postgres": ["CREATE SCHEMA dbdiag", "CREATE TABLE dbdiag.ckpt (id bigserial PRIMARY KEY, k int, pad text)",
                 "CREATE INDEX ckpt_k ON dbdiag.ckpt (k)"],
    "mysql": ["CREATE DATABASE dbdiag",
              "CREATE TABLE dbdiag.ckpt (id bigint AUTO_INCREMENT PRIMARY KEY, k int, pad varchar(1000), KEY (k)) "
              "ENGINE=InnoDB"],
}
# The load at a fixed rate, total transactions/s (see the module's docstring).
RATE = {"postgres": 20.0, "mysql": 6.0}
# The plant: the smallest WAL / redo space each engine accepts (see the module's docstring).
PLANT = {
    "postgres": {"max_wal_size": "32MB", "checkpoint_timeout": "1h"},
    "mysql": {"innodb_log_file_size": "4M"},
}


def _server(engine: str, settings: dict[str, str]) -> servers.ThrowawayServer:
    srv = servers.start_server(engine, settings)
    try:
        with Session(srv.target(), statement_timeout_ms=0) as s:
            for sql in TABLE[engine]:
                s.execute(sql)
    except BaseException:
        srv.stop()
        raise
    return srv


@pytest.fixture(scope="module", params=["postgres", "mysql"])
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[str, servers.ThrowawayServer, servers.ThrowawayServer]]:
    """Per engine: the planted server and one with default settings, the same table on both."""
    engine = str(request.param)
    # Both start at once: a server's start is mostly waiting (initdb, InnoDB's files), 2-4 s each here.
    with ThreadPoolExecutor(2) as pool:
        started = [pool.submit(_server, engine, PLANT[engine]), pool.submit(_server, engine, {})]
    try:
        planted, control = (f.result() for f in started)
        yield engine, planted, control
    finally:
        for f in started:
            if f.exception() is None:
                f.result().stop()


def _run(tmp_path: Path, srv: servers.ThrowawayServer, engine: str, name: str
         ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    path = tmp_path / f"{name}.sql"
    path.write_text(SCRIPT[engine])
    # flush=False: the plant is WAL / redo volume, not commit flushes; flush tracing would only cost time
    by = run(tmp_path / name, [f"t={srv.dsn()}"], ["custom"], clients=(1,), script=path, duration_s=2.5,
             flush=False, rate=RATE[engine])
    (row,) = by["_results"]
    # enough transactions for a per-transaction figure (MariaDB's fixed 6/s made 9 in 2.5 s at load 40)
    assert row["transactions"] >= 5, row
    # Each INSERT ... SELECT reads the 1,000 rows it writes: no full scan (MariaDB once counted its rows
    # "returned" as 0, rows sent only, and named the Sequence engine's seq_1_to_1000 as one)
    assert not [f for f in by["t"] if f["category"] == "full_scan"], summary(by["t"])
    return [f for f in by["t"] if f["category"] == "checkpoint_pressure"], {"row": row, "all": summary(by["t"])}


def test_small_wal_or_redo_space_is_named_and_default_space_is_not(pair, tmp_path: Path) -> None:
    engine, planted, control = pair
    found, ctx = _run(tmp_path, planted, engine, "plant")
    assert len(found) == 1, (f"{engine}: the plant ({PLANT[engine]}) did not give checkpoint_pressure", ctx)
    f = found[0]
    ev = f["evidence"]
    assert f["severity"] == "warning" and f["workload"] == "custom" and f["clients"] == 1, f
    if engine == "postgres":
        assert ev["requested_checkpoints"] >= 1 and ev["timed_checkpoints"] == 0, ev  # none from the 1 h timeout
        assert ev["max_wal_size"] == "32 MB", ev  # the planted setting, as the server reported it
        assert ev["full_page_images_per_txn"] > 0 and ev["full_page_image_records_pct"] > 0, ev
        assert f"{ev['requested_checkpoints']} checkpoint" in f["title"] and "max_wal_size" in f["advice"]
    else:
        assert ev["checkpoint_age_peak_pct_of_max"] >= 75, ev
        assert ev["checkpoint_max_age_mb"] < 4, ev  # capacity of the planted 4 MB log, not the default 96 MB
        assert ev["innodb_log_file_size"] == str(4 * 2**20), ev  # the planted setting, as the server reported it
        assert "Redo log" in f["title"] and "innodb_log_file_size" in f["advice"]
    none, ctx = _run(tmp_path, control, engine, "control")
    assert none == [], ctx
