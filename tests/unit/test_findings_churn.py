"""Connection churn in the accounting and the limit (issue 26), on saved real bundles, both ways.

``connect_churn_pg`` is a ``--connect-per-transaction`` run with its sources on: the clients' connect time is
a component of its own, the backend's wait for a client still connecting is not counted again as round
trips, and opening connections is the step's limit. A step without churn has no such component or limit.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from diag.core.bundle import load_bundle
from reports.model.accounting import accounts
from reports.rules import churn, limit
from reports.model.steps import steps
from reports.rules.base import counter_in_step
from reports.rules.cpu import CONDITION_WEIGHT

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"


def test_churn_is_its_own_part_and_the_limit() -> None:
    b = load_bundle(DATA / "connect_churn_pg")
    ((step, acc),) = list(accounts(b))
    assert step.row.connect_ms_per_txn == pytest.approx(45.411)
    assert acc.us("connect") == pytest.approx(45411.0)
    # The parts add to the wall time without the connect counted twice (round trips less the connect).
    assert sum(c.us_per_txn for c in acc.components) == pytest.approx(acc.wall_us_per_txn, rel=0.02)
    assert acc.share("connect") > 0.8 and acc.share("round_trips") < 0.1
    # Other processes used 1.49 of the 2 CPUs: that saturation (neighbours) is the step's limit here.
    (f,) = limit.step_limit(b)
    assert f.extra["kind"] == "neighbours", f.title


def test_churn_is_the_limit_where_nothing_is_seen_saturated(tmp_path: Path) -> None:
    """The same bundle without its host series: nothing saturated can be named, and the connect is the
    largest measured part, so it is the limit (saying that CPU saturation was not observed)."""
    dst = tmp_path / "b"
    shutil.copytree(DATA / "connect_churn_pg", dst)
    for p in (dst / "series").glob("host*.jsonl"):
        p.unlink()
    (f,) = limit.step_limit(load_bundle(dst))
    assert f.extra["kind"] == "connect" and f.title.startswith("Connection churn: "), f.title
    assert "pool" in f.advice and f.evidence["not_observed"].startswith("host CPU")


@pytest.mark.parametrize("name", ["point_select", "insert_flush_cap_120"])
def test_no_churn_no_connect_part_or_limit(name: str) -> None:
    b = load_bundle(DATA / name)
    for _step, acc in accounts(b):
        assert acc.get("connect") is None
    assert all(f.extra["kind"] != "connect" for f in limit.step_limit(b))


def test_connection_churn_is_named_with_the_servers_count_and_the_connect_share() -> None:
    """The finding: the server's own count of new connections per transaction, ranked by the connect part of
    the accounting (the client timed it)."""
    b = load_bundle(DATA / "connect_churn_pg")
    (f,) = churn.connection_churn(b)
    (step, acc), = list(accounts(b))
    ev = f.evidence
    assert f.category == "connection_churn" and f.title.startswith("Connection churn: ")
    # pg_stat_database.sessions over the window: about one connection per transaction (227 transactions).
    assert 0.8 <= ev["new connections per transaction"] <= 1.2, ev
    # Ranked by the client's connect time over the mean transaction (45.4 ms of the accounting's wall time).
    assert f.impact == pytest.approx(min(1.0, 45411.0 / acc.wall_us_per_txn), abs=1e-3) and f.impact > 0.8
    assert "fork" in ev["what a new connection costs the server"] and "pool" in f.advice


def test_connection_churn_without_the_clients_connect_time_is_a_condition(tmp_path: Path) -> None:
    """A load that did not time its connects (as pgbench -C under dbdiag watch): the same server counts,
    ranked as a condition and saying the connect was not timed."""
    dst = tmp_path / "b"
    shutil.copytree(DATA / "connect_churn_pg", dst)
    res = json.loads((dst / "results.json").read_text())
    for row in res["results"]:
        for k in ("connect_ms_per_txn", "connect_share_of_latency", "connect_per_transaction"):
            row.pop(k, None)
    (dst / "results.json").write_text(json.dumps(res))
    (f,) = churn.connection_churn(load_bundle(dst))
    assert f.impact == pytest.approx(CONDITION_WEIGHT * min(1.0, f.evidence["new connections per transaction"]),
                                     abs=0.01)
    assert f.evidence["impact_from"].startswith("not timed") and "not timed" in f.title


@pytest.mark.parametrize("name", ["point_select", "insert_flush_cap_120"])
def test_no_connection_churn_where_clients_keep_their_connections(name: str) -> None:
    """PostgreSQL steps whose clients kept their connections: the counter was read and stays silent (the saved
    MariaDB bundles are trimmed of Connections; tests/integration/test_churn_planted.py covers MariaDB)."""
    b = load_bundle(DATA / name)
    pg = [s for s in steps(b) if s.engine.stats_series == "pg_stats"]
    assert pg and all(counter_in_step(b, s, "pg_stats", "db.sessions") is not None for s in pg)
    assert churn.connection_churn(b) == []
