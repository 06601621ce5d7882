"""reports.rules.client on saved real bundles: saturated or costly clients, servers waiting on them."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from diag.core.bundle import Bundle, load_bundle
from reports.rules import client, limit

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"


def load(name: str) -> Bundle:
    return load_bundle(DATA / name)


def by_step(findings: list) -> dict[tuple[str, int], object]:
    return {(f.target, f.clients): f for f in findings}


def test_client_bound_fires_on_big_results() -> None:
    found = by_step(client.client_bound(load("big_result_pg")))
    assert set(found) == {("postgres-custom", 1), ("postgres-custom", 2)}
    f = found[("postgres-custom", 1)]
    assert f.evidence["client_to_server_cpu_per_txn"] == pytest.approx(7.95)
    assert f.evidence["client_cpu_cores"] == pytest.approx(0.311)
    assert f.evidence["host_busy_pct"] > 90
    # impact: the clients' CPU and round trips share of the transaction's time (the accounting), at most the
    # limit's (which adds the queueing behind the clients)
    ev = f.evidence
    assert f.impact == pytest.approx((ev["client_cpu_share_of_txn_pct"] + ev["round_trips_share_of_txn_pct"]) / 100,
                                     abs=2e-3)
    (lim,) = [x for x in limit.step_limit(load("big_result_pg")) if x.clients == 1]
    assert lim.extra["kind"] == "client_cpu" and 0 < f.impact <= lim.impact
    assert "7.95x" in f.title


@pytest.mark.parametrize("name", ["point_select", "insert_flush_cap_120", "hot_row_pg_c4", "hot_row_mariadb_c4",
                                  "wal_heavy_pg_max_wal_32mb"])
def test_client_bound_quiet_when_clients_are_cheap(name: str) -> None:
    # includes MariaDB point selects, where "Writing to net" is 53% of 17 samples: the send, not a wait
    assert client.client_bound(load(name)) == []


def test_waiting_for_the_next_statement_is_round_trips_not_client_bound() -> None:
    """Issue 12: the server waiting for the client at low client CPU is a round-trip limit, not client_bound."""
    b = copy.deepcopy(load("hot_row_pg_c4"))
    for r in b.series["pg_waits--hot-postgres"]:
        waits = r.get("waits") or {}
        if "Lock:transactionid" in waits:
            waits["Client:ClientRead"] = waits.get("Client:ClientRead", 0) + waits.pop("Lock:transactionid")
    assert client.client_bound(b) == []
    (f,) = limit.step_limit(b)
    assert f.extra["kind"] == "round_trips" and f.impact > 0.7, (f.title, f.impact)


def test_client_bound_fires_on_a_saturated_client() -> None:
    """One client process at a full CPU: it cannot send faster, whatever the server does."""
    b = copy.deepcopy(load("hot_row_pg_c4"))
    recs = b.series["host"]
    for r in recs:
        for row in r["procs.client"].values():
            row[0] += 0.9 * (r["t"] - recs[0]["t"])
    (f,) = client.client_bound(b)
    assert f.evidence["client_cpu_per_client_pct"] > 80
    assert "of a CPU" in f.title
