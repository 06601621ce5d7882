"""What the accounting could not see: the run-queue time of the server's processes between two host records,
and the sentence for an unaccounted rest of 10% or more (reports.accounting_gaps, reports.series)."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.bundle import load_bundle
from diag.engines import MYSQL, POSTGRES
from reports.accounting import accounts
from reports.accounting_gaps import unaccounted_why
from reports.rules import limit
from reports.series import run_delay_delta

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"
ROW = [1.0, 0.5, 10, 2, 1000, 0, 0, 100.0, 0.0, 0.0, 1]  # PROC_FIELDS up to ppid; run_delay_s appended


def test_run_delay_is_the_increase_per_pid_weighted_by_the_window() -> None:
    prev = {"10": [*ROW, 2.0], "11": [*ROW, 1.0]}
    cur = {"10": [*ROW, 2.5], "11": [*ROW, 1.25], "12": [*ROW[:7], 109.5, *ROW[8:], 0.1]}  # 12 born at 109.5
    assert run_delay_delta(prev, cur, 109.0, 110.0) == pytest.approx(0.5 + 0.25 + 0.1)
    # Half the interval inside the window: half of it.
    assert run_delay_delta(prev, cur, 109.0, 110.0, (109.5, 120.0)) == pytest.approx(0.85 / 2)
    # A reused PID (another create_time) and one that existed before unseen count as new / not at all.
    assert run_delay_delta({"10": [*ROW, 5.0]}, {"10": [*ROW[:7], 50.0, *ROW[8:], 0.3]}, 109.0, 110.0) is None


def test_no_run_delay_in_older_rows_or_without_schedstats() -> None:
    assert run_delay_delta({"10": ROW}, {"10": ROW}, 0.0, 1.0) is None
    assert run_delay_delta({"10": [*ROW, -1.0]}, {"10": [*ROW, -1.0]}, 0.0, 1.0) is None


def test_unaccounted_is_explained_from_10_percent_up() -> None:
    assert unaccounted_why(MYSQL, {"backend_samples": 100}, 99.0, 1000.0) is None
    ev = {"backend_samples": 100, "cpu_sampled_not_on_cpu_us": 300.0, "run_queue_us_per_txn": 50.0}
    why = unaccounted_why(MYSQL, ev, 300.0, 1000.0)
    assert why is not None and why.startswith("300 µs per transaction (30.0%) is unaccounted: 300 µs")
    assert "performance_schema" in why and "±10.0%" in why and "not read" not in why
    why = unaccounted_why(POSTGRES, {"cpu_sampled_not_on_cpu_us": 200.0}, 200.0, 1000.0)
    assert "its run-queue time was not read" in why and "spinlocks" in why


def test_the_no_collect_step_says_why_its_time_is_unaccounted() -> None:
    b = load_bundle(DATA / "point_select_pg_no_collect")
    ((_step, acc),) = list(accounts(b))
    assert acc.share("unaccounted") > 0.9
    assert "no wait samples" in acc.evidence["unaccounted_why"]
    (f,) = limit.step_limit(b)
    assert f.evidence["unaccounted"] == acc.evidence["unaccounted_why"]


@pytest.mark.parametrize("name", ["point_select", "hot_row_pg_c4"])
def test_accounted_steps_say_nothing(name: str) -> None:
    for _step, acc in accounts(load_bundle(DATA / name)):
        assert acc.share("unaccounted") < 0.1 and "unaccounted_why" not in acc.evidence
