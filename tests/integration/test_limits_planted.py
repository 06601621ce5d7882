"""Every step names its limit, on real throwaway servers with planted causes (both engines each run).

Each test runs ``dbdiag run`` in-process with 2 s steps and no perf profile, then reads the ``limit``
findings as the run wrote them (findings.json), one per step, and the accounting's shares:

* a chatty transaction (BEGIN, 6 trivial statements, COMMIT) at one client: nothing is saturated, the
  backend waits for the next statement -> ``round_trips``, and no ``client_bound`` (its client is far from a
  full CPU; the rule needs client CPU evidence);
* the other direction: a script whose client does heavy ``\\set`` work before its one statement -> the
  client is the limit (``client_cpu``) and ``client_bound`` fires;
* single-row durable inserts at one client -> ``commit_flush`` (PostgreSQL; see the test for MariaDB).

Margins rather than thresholds tuned to this machine: the chatty script's client sleeps in nothing and
sends trivial statements, so its CPU stays far below a core; the \\set script spends ~3,000 expression
evaluations per statement, so its client is busy nearly all the time whatever else runs.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from diag.run import Run, RunOptions
from workloads.driver import DriverOptions

CHATTY = "BEGIN;\n" + "SELECT 1;\n" * 6 + "COMMIT;\n"
HEAVY_SET = "".join(f"\\set v{i % 50} ({i} * 7 + 3) % 1000\n" for i in range(3000)) + "SELECT :v1;\n"


def run(out: Path, targets: list[str], workload: str, script: str | None = None) -> dict[str, Any]:
    """Run one step per target; the run's findings per target and its results."""
    path_script = None
    if script is not None:
        path_script = out.parent / f"{out.name}.sql"
        path_script.write_text(script)
    drv = DriverOptions(clients=(1,), duration_s=2.0, warmup_s=0.5, script=str(path_script) if path_script else None,
                        scale=1)
    log = io.StringIO()
    path = Run(RunOptions(targets=targets, workloads=[workload], driver=drv, out=out, argv=["dbdiag", "run"],
                          profile=False), out=log).execute()
    found = json.loads((path / "findings.json").read_text())["findings"]
    results = json.loads((path / "results.json").read_text())["results"]
    assert len(results) == len(targets), log.getvalue()[-3000:]
    return {"found": found, "path": path}


def limit_of(found: list[dict[str, Any]], label: str) -> dict[str, Any]:
    (f,) = [f for f in found if f["category"] == "limit" and f["target"] == label]
    return f


def categories(found: list[dict[str, Any]], label: str) -> list[tuple[str, float]]:
    return [(f["category"], f["impact"]) for f in found if f["target"] == label]


@pytest.fixture()
def both(pg_server, my_server) -> list[str]:
    return [f"pg={pg_server.dsn()}", f"my={my_server.dsn()}"]


def test_chatty_transaction_is_a_round_trip_limit_not_client_bound(both: list[str], tmp_path: Path) -> None:
    r = run(tmp_path / "bundle", both, "custom", CHATTY)
    for label in ("pg", "my"):
        lim = limit_of(r["found"], label)
        assert lim["extra"]["kind"] == "round_trips", (lim["title"], lim["evidence"])
        assert "client_bound" not in [c for c, _ in categories(r["found"], label)]
        # the round trips (and client CPU) explain most of the transaction's time
        assert lim["impact"] >= 0.5, lim["evidence"]


def test_clients_saturated_by_set_work_are_client_bound(both: list[str], tmp_path: Path) -> None:
    r = run(tmp_path / "bundle", both, "custom", HEAVY_SET)
    for label in ("pg", "my"):
        lim = limit_of(r["found"], label)
        assert lim["extra"]["kind"] == "client_cpu", (lim["title"], lim["evidence"])
        assert "client_bound" in [c for c, _ in categories(r["found"], label)]


def test_single_client_durable_insert_is_a_commit_flush_limit(both: list[str], tmp_path: Path) -> None:
    """PostgreSQL: commit flush. MariaDB's redo flush on this machine's throwaway data directory took 17-108
    µs per transaction across runs, less than the round trips between its autocommit inserts (66-354 µs), so
    its limit is not planted here: it must only show the flush as a part of the accounting."""
    r = run(tmp_path / "bundle", both, "insert")
    lim = limit_of(r["found"], "pg")
    assert lim["extra"]["kind"] == "commit_flush", (lim["title"], lim["evidence"])
    my = limit_of(r["found"], "my")
    assert "wait:commit_flush" in my["evidence"]["accounting_us_per_txn"], my["evidence"]
