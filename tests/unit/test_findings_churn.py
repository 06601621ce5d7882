"""Connection churn in the accounting and the limit (issue 26), on saved real bundles, both ways.

``connect_churn_pg`` is a ``--connect-per-transaction`` run with its sources on: the clients' connect time is
a component of its own, the backend's wait for a client still connecting is not counted again as round
trips, and opening connections is the step's limit. A step without churn has no such component or limit.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from diag.bundle import load_bundle
from reports.accounting import accounts
from reports.rules import limit

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"


def test_churn_is_its_own_part_and_the_limit() -> None:
    b = load_bundle(DATA / "connect_churn_pg")
    ((step, acc),) = list(accounts(b))
    assert step.row["connect_ms_per_txn"] == pytest.approx(45.411)
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
