"""reports.model.compare: which side is faster, and the order the differences are ranked in.

The ranking is what a reader of ``dbdiag compare`` acts on (the first lines are the ones read), so it is
tested on records built here, where the right order is known by construction, and on a saved real bundle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diag.core.bundle import Bundle, load_bundle
from diag.core.engines import POSTGRES
from diag.core.schema import ResultRow
from reports.model.accounting import Component, StepAccounting
from reports.model.compare import compare, explain_pair, pair_steps
from reports.model.compare_sets import compare_sets

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"


def _step(target: str, tps: float, clients: int = 2, accounting: StepAccounting | None = None,
          **per_txn: float) -> dict[str, Any]:
    row = ResultRow(target=target, workload="point-select", clients=clients, tps=tps, latency_ms={"p95": 2000.0 / tps})
    return {**row.to_dict(), "row": row, "engine_obj": POSTGRES, "run": "r", "durability": None,
            "accounting": accounting, **per_txn}


def _acc(target: str, wall: float, **us: float) -> StepAccounting:
    comps = tuple(Component(k.replace("wait_", "wait:"), k, v, v / wall, {}) for k, v in us.items())
    return StepAccounting(target, "point-select", 2, wall, comps, {})


def test_time_rows_are_the_accounting_components_by_share_of_the_gap_then_counts_by_ratio() -> None:
    # Gap 2,000 - 1,333 = 667 µs: lock +700 (105%), client CPU +100 (15%), server CPU -133 (offsets 20%).
    fast = _step("a", 1500.0, accounting=_acc("a", 1333.0, client_cpu=100.0, server_cpu_user=533.0,
                                              round_trips=700.0),
                 server_ctx_per_txn=2.0, flush_calls_per_txn=1.0, device_flushes_per_txn=1.0,
                 server_cpu_us_per_txn=999.0)
    slow = _step("b", 1000.0, accounting=_acc("b", 2000.0, client_cpu=200.0, server_cpu_user=400.0,
                                              round_trips=700.0, wait_lock=700.0),
                 server_ctx_per_txn=60.0, flush_calls_per_txn=2.0, server_cpu_us_per_txn=1.0)
    e = explain_pair(fast, slow)
    order = [d["metric"] for d in e["differences"]]
    assert order == [
        "wait:lock",  # +700 µs, never sampled on the fast side: 0 there
        "client_cpu",  # +100 µs
        "round_trips",  # equal
        "server_cpu_user",  # the slow side used less: last of the time rows
        "server_ctx_per_txn",  # counts (evidence, not time) after the time rows, by ratio: 30x
        "flush_calls_per_txn",  # 2x
    ]  # device_flushes_per_txn is known on one side only; server_cpu_us_per_txn is not shown beside the accounting
    shares = {d["metric"]: d["share_of_gap"] for d in e["differences"]}
    assert shares["wait:lock"] == pytest.approx(700.0 / 667.0)
    assert shares["server_cpu_user"] == pytest.approx(-133.0 / 667.0)
    assert shares["server_ctx_per_txn"] is None
    assert (e["fast"], e["slow"]) == ("a", "b")
    assert e["tps_ratio"] == pytest.approx(1.5)
    assert e["p95_ratio"] == pytest.approx(1.5)
    assert e["sentences"][0].startswith("a is 1.50x faster than b")
    assert e["sentences"][1].startswith("b spends 700 µs more per transaction waiting on")


def test_without_accounting_the_cpu_rows_stand_in_with_the_gap_from_the_rates() -> None:
    # 2 clients: 1,333 µs per transaction at 1,500 tps, 2,000 at 1,000 tps: a gap of 667 µs.
    fast = _step("a", 1500.0, server_cpu_us_per_txn=100.0, client_cpu_us_per_txn=50.0)
    slow = _step("b", 1000.0, server_cpu_us_per_txn=500.0, client_cpu_us_per_txn=60.0)
    e = explain_pair(fast, slow)
    assert [d["metric"] for d in e["differences"]] == ["server_cpu_us_per_txn", "client_cpu_us_per_txn"]
    assert e["differences"][0]["share_of_gap"] == pytest.approx(400.0 / (2e6 / 1000 - 2e6 / 1500))
    assert e["sentences"][1].startswith("No time accounting for a and b")


def _bundle(results: list[dict[str, Any]]) -> Bundle:
    targets = [{"label": t, "engine": "postgres"} for t in sorted({r["target"] for r in results})]
    return Bundle(path=Path("."), run={"targets": targets}, results=results, findings=[], events=[])


@pytest.mark.parametrize("first,second", [(("x", 900.0), ("y", 1200.0)), (("x", 1200.0), ("y", 900.0))])
def test_the_faster_side_is_the_one_with_more_tps_whatever_the_order(first: tuple[str, float],
                                                                      second: tuple[str, float]) -> None:
    b = _bundle([_step(first[0], first[1]), _step(second[0], second[1]), _step("z", 500.0, clients=4)])
    ((fast, slow),) = pair_steps(b)  # z ran at another client count: no pair
    expected = ("y", "x") if second[1] > first[1] else ("x", "y")
    assert (fast["row"].target, slow["row"].target) == expected
    (e,) = compare(b)
    assert e["fast_tps"] == 1200.0 and e["slow_tps"] == 900.0
    assert e["tps_ratio"] == pytest.approx(1200.0 / 900.0)


def test_saved_bundle_ranks_time_differences_largest_first() -> None:
    """PostgreSQL vs MariaDB point selects (one real run): the time rows are the accounting's components, every
    one shares the same gap, so they must come in decreasing order of their difference."""
    b = load_bundle(DATA / "point_select")
    tps = {(r["target"], r["clients"]): r["tps"] for r in b.results}
    items = compare(b)
    assert [(e["workload"], e["clients"]) for e in items] == [("point-select", 1), ("point-select", 2)]
    for e in items:
        assert tps[(e["fast"], e["clients"])] > tps[(e["slow"], e["clients"])]
        assert e["tps_ratio"] == pytest.approx(tps[(e["fast"], e["clients"])] / tps[(e["slow"], e["clients"])])
        us = [d["difference"] for d in e["differences"] if d["unit"] == "µs"]
        assert len(us) >= 4 and us == sorted(us, reverse=True)
        assert e["differences"][0]["unit"] == "µs" and e["differences"][0]["difference"] > 0
        assert e["slow_wall_us"] > e["fast_wall_us"]


def _as_tpcc(mode: str | None) -> Bundle:
    """The saved two-target bundle with its steps renamed tpcc, run in ``mode`` (None: a bundle from before
    run.json recorded ``tpcc_mode``)."""
    b = load_bundle(DATA / "point_select")
    for r in b.results:
        r["workload"] = "tpcc"
    options = b.run.setdefault("options", {})
    options.pop("tpcc_mode", None)
    if mode is not None:
        options["tpcc_mode"] = mode
    return b


def test_tpcc_steps_pair_only_in_the_same_tpcc_mode() -> None:
    """One CALL a transaction (--tpcc-mode sp) against the client's ~27 statements is not the same workload:
    ``dbdiag compare`` and ``compare --vs`` do not pair them; an older bundle (no tpcc_mode) ran the client mode."""
    client, sp, old = _as_tpcc("client"), _as_tpcc("sp"), _as_tpcc(None)
    assert pair_steps(client, sp) == [] and compare_sets([client], [sp]) == []
    assert len(pair_steps(sp, _as_tpcc("sp"))) == len(pair_steps(client, old)) == 8  # 2 x 2 targets per count
    assert len(compare_sets([old], [client])) == 4
    assert {e["workload"] for e in compare_sets([sp], [_as_tpcc("sp")])} == {"tpcc --tpcc-mode sp"}


def _as_watch(clients: dict[str, int]) -> Bundle:
    """The saved two-target bundle's first step per target as a whole watch (``as_one_step``'s row) with the
    given session counts."""
    b = load_bundle(DATA / "point_select")
    firsts = {}
    for r in b.results:
        firsts.setdefault(r["target"], r)
    for t, r in firsts.items():
        r.update(workload="watch", source="server", clients=clients[t])
    b.results[:] = list(firsts.values())
    return b


def test_whole_watches_pair_whatever_their_session_counts() -> None:
    """The same traffic before and after a change may hold more connections: two watches still compare; steps
    dbdiag drove pair only at the same client count."""
    labels = sorted({r["target"] for r in load_bundle(DATA / "point_select").results})
    w = _as_watch({labels[0]: 4, labels[1]: 6})
    assert len(pair_steps(w)) == 1  # the two targets of one watch, once
    assert len(pair_steps(_as_watch({labels[0]: 4, labels[1]: 4}), w)) == 4
    driven = load_bundle(DATA / "point_select")
    firsts = {}
    for r in driven.results:
        firsts.setdefault(r["target"], r)
    list(firsts.values())[0]["clients"] = 99
    assert all(f["row"].clients == s["row"].clients for f, s in pair_steps(driven))
