"""reports.compare: which side is faster, and the order the differences are ranked in.

The ranking is what a reader of ``dbdiag compare`` acts on (the first lines are the ones read), so it is
tested on records built here, where the right order is known by construction, and on a saved real bundle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from diag.bundle import Bundle, load_bundle
from reports.compare import compare, explain_pair, pair_steps

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"


def _step(target: str, tps: float, clients: int = 2, **per_txn: float) -> dict[str, Any]:
    return {"target": target, "workload": "point-select", "clients": clients, "tps": tps,
            "latency_ms": {"p95": 2000.0 / tps}, **per_txn}


def test_differences_rank_by_share_of_the_slow_sides_time_then_by_ratio() -> None:
    # The slow side: 1,000 tps over 2 clients, so each transaction takes 2,000 µs of a client slot.
    fast = _step("a", 1500.0, server_cpu_us_per_txn=100.0, client_cpu_us_per_txn=50.0, server_user_us_per_txn=80.0,
                 server_sys_us_per_txn=20.0, server_ctx_per_txn=2.0, flush_calls_per_txn=1.0,
                 device_flushes_per_txn=1.0)
    slow = _step("b", 1000.0, server_cpu_us_per_txn=500.0, client_cpu_us_per_txn=1050.0, server_user_us_per_txn=100.0,
                 server_sys_us_per_txn=10.0, server_ctx_per_txn=60.0, flush_calls_per_txn=2.0,
                 **{"wait_us_per_txn.Lock": 700.0})
    e = explain_pair(fast, slow)
    order = [d["metric"] for d in e["differences"]]
    assert order == [
        "client_cpu_us_per_txn",  # +1,000 µs: half of the slow side's 2,000 µs
        "wait_us_per_txn.Lock",  # +700 µs (never sampled on the fast side: 0 there): 35%
        "server_ctx_per_txn",  # not time: ranked by its ratio (30x) / 100 = 0.3
        "server_cpu_us_per_txn",  # +400 µs: 20%
        "flush_calls_per_txn",  # ratio 2x -> 0.02
        "server_user_us_per_txn",  # +20 µs: 1%
        "server_sys_us_per_txn",  # the slow side used less: last
    ]  # device_flushes_per_txn is known on one side only: not compared
    shares = {d["metric"]: d["share_of_slow_txn_time"] for d in e["differences"]}
    assert shares["client_cpu_us_per_txn"] == pytest.approx(0.5)
    assert shares["wait_us_per_txn.Lock"] == pytest.approx(0.35)
    assert shares["server_ctx_per_txn"] is None
    assert shares["server_sys_us_per_txn"] == pytest.approx(-0.005)
    assert (e["fast"], e["slow"]) == ("a", "b")
    assert e["tps_ratio"] == pytest.approx(1.5)
    assert e["p95_ratio"] == pytest.approx(1.5)


def _bundle(results: list[dict[str, Any]]) -> Bundle:
    targets = [{"label": t, "engine": "postgres"} for t in sorted({r["target"] for r in results})]
    return Bundle(path=Path("."), run={"targets": targets}, results=results, findings=[], events=[])


@pytest.mark.parametrize("first,second", [(("x", 900.0), ("y", 1200.0)), (("x", 1200.0), ("y", 900.0))])
def test_the_faster_side_is_the_one_with_more_tps_whatever_the_order(first: tuple[str, float],
                                                                      second: tuple[str, float]) -> None:
    b = _bundle([_step(first[0], first[1]), _step(second[0], second[1]), _step("z", 500.0, clients=4)])
    ((fast, slow),) = pair_steps(b)  # z ran at another client count: no pair
    expected = ("y", "x") if second[1] > first[1] else ("x", "y")
    assert (fast["target"], slow["target"]) == expected
    (e,) = compare(b)
    assert e["fast_tps"] == 1200.0 and e["slow_tps"] == 900.0
    assert e["tps_ratio"] == pytest.approx(1200.0 / 900.0)


def test_saved_bundle_ranks_time_differences_largest_first() -> None:
    """PostgreSQL vs MariaDB point selects (one real run): within a pair every µs row shares the slow side's
    time per transaction, so the µs rows must come in decreasing order of their difference."""
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
