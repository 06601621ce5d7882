"""What the accounting could not see: the run-queue time of the server's processes between two host records,
and the sentence for an unaccounted rest of 10% or more (reports.model.accounting_gaps, reports.model.series)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from diag.core.bundle import load_bundle
from diag.core.engines import MYSQL, POSTGRES
from reports.model.accounting import accounts
from reports.model.accounting_gaps import unaccounted_why
from reports.rules import limit
from reports.model.series import run_delay_delta

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


def _plant(src: str, dst: Path, idle_per_s: float, delay_per_s: float | None) -> None:
    """A copy of saved bundle ``src`` whose host series says the CPUs were mostly idle (``idle_per_s`` idle
    CPU-seconds added per second) and, when ``delay_per_s`` is given, whose server process rows carry a
    run-queue column growing by that many seconds per second (rows padded to the current layout)."""
    shutil.copytree(DATA / src, dst)
    path = dst / "series" / "host.jsonl"
    recs = [json.loads(ln) for ln in path.read_text().splitlines()]
    t0 = recs[0]["t"]
    for r in recs:
        r["cpu.all.idle"] += idle_per_s * (r["t"] - t0)
        for rows in (r.get("procs.server") or {}).values():
            for pid, row in rows.items():
                row = [*row[:8], *([0.0, 0.0, 1] if len(row) < 11 else row[8:11])]
                rows[pid] = row + ([delay_per_s * (r["t"] - t0)] if delay_per_s is not None else [])
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_run_queue_time_fills_the_cpu_part_on_a_host_not_busy(tmp_path: Path) -> None:
    """hot_row_mariadb_c4's threads were sampled active far longer than the server's CPU (3,263 µs against
    348 per transaction). Made to look not busy: without run-queue time that gap is unaccounted and explained;
    with it (0.2 s per s), the run queue takes its measured part and the rest stays unaccounted."""
    _plant("hot_row_mariadb_c4", tmp_path / "none", 50.0, None)
    ((step, acc),) = list(accounts(load_bundle(tmp_path / "none")))
    assert acc.evidence["host_busy_pct"] < 90 and acc.get("wait:cpu") is None
    hidden = acc.evidence["cpu_sampled_not_on_cpu_us"]
    assert hidden > 2000 and acc.us("unaccounted") >= hidden * 0.9
    why = acc.evidence["unaccounted_why"]
    assert "neither on a CPU nor waiting for one (its run-queue time was not read" in why and "'Sending data'" in why
    _plant("hot_row_mariadb_c4", tmp_path / "rq", 50.0, 0.2)
    ((step, acc2),) = list(accounts(load_bundle(tmp_path / "rq")))
    rq = 0.2 * step.duration * 1e6 / step.transactions  # one server process, 0.2 s of run queue per s
    assert acc2.evidence["run_queue_us_per_txn"] == pytest.approx(rq, rel=0.02)
    assert acc2.us("wait:cpu") == pytest.approx(min(rq, hidden), rel=0.02)
    assert acc2.evidence["cpu_sampled_not_on_cpu_us"] == pytest.approx(hidden - rq, rel=0.02)
    assert acc2.us("unaccounted") == pytest.approx(acc.us("unaccounted") - rq, rel=0.02)


def test_the_reports_accounting_section_says_why_time_is_unaccounted() -> None:
    from reports.views.accounting_view import accounting_view

    (g,) = accounting_view(load_bundle(DATA / "point_select_pg_no_collect"))
    (lim,) = g["limits"]
    assert lim["excess"].startswith("961 µs per transaction (98.0%) is unaccounted: no wait samples")
