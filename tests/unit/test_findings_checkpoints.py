"""reports.rules.checkpoints on saved real bundles: forced checkpoints, a redo log near full."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from diag.core.bundle import Bundle, load_bundle
from diag.core.engines import ENGINES
from reports.rules import checkpoints as c
from reports.rules.engines import RULE_PARTS

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"


def load(name: str) -> Bundle:
    return load_bundle(DATA / name)


def test_every_engine_judges_its_checkpoints() -> None:
    assert set(RULE_PARTS) == {e.name for e in ENGINES}


def test_fires_on_wal_volume_past_max_wal_size() -> None:
    """2,000-row inserts at ~190 MB/s of WAL with max_wal_size=32MB: a checkpoint every ~0.15 s."""
    (f,) = c.checkpoint_pressure(load("wal_heavy_pg_max_wal_32mb"))
    assert (f.category, f.severity, f.clients) == ("checkpoint_pressure", "warning", 2)
    assert f.evidence["requested_checkpoints"] == 23
    assert f.evidence["timed_checkpoints"] == 0
    assert f.evidence["max_wal_size"] == "32 MB"
    assert f.evidence["wal_mb_per_s"] > 100
    assert f.evidence["checkpointing_pct_of_step"] == pytest.approx(80.0)
    assert f.impact == pytest.approx(0.4, abs=1e-3)
    assert "max_wal_size" in f.advice


@pytest.mark.parametrize("name", ["insert_flush_cap_120", "insert_pg_fsync_off", "point_select", "hot_row_pg_c4",
                                  "hot_row_mariadb_c4", "big_result_pg"])
def test_quiet_without_forced_checkpoints(name: str) -> None:
    assert c.checkpoint_pressure(load(name)) == []


def test_one_requested_checkpoint_is_enough_and_none_is_not() -> None:
    b = copy.deepcopy(load("insert_flush_cap_120"))
    recs = b.series["pg_stats--postgres_127.0.0.1_45603"]
    step = next(r for r in b.results if r["target"].startswith("postgres") and r["clients"] == 2)
    assert c.checkpoint_pressure(b) == []
    for r in recs:
        if r["t"] > step["t_start"] + 1:
            r["checkpointer.num_requested"] += 1
    (f,) = c.checkpoint_pressure(b)
    assert f.clients == 2 and f.evidence["requested_checkpoints"] == 1
    assert f.title == "1 checkpoint forced by WAL volume during the step"


def test_innodb_checkpoint_age_near_the_limit() -> None:
    b = copy.deepcopy(load("hot_row_mariadb_c4"))
    recs = b.series["my_status--hot-mysql"]
    step = b.results[0]
    assert c.checkpoint_pressure(b) == []  # measured: the age stays far below the maximum
    inside = [r for r in recs if step["t_start"] < r["t"] <= step["t_end"] + 0.5]
    for r in inside[1:]:
        r["status.Innodb_checkpoint_age"] = int(0.8 * r["status.Innodb_checkpoint_max_age"])
    (f,) = c.checkpoint_pressure(b)
    assert f.evidence["checkpoint_age_peak_pct_of_max"] == pytest.approx(80.0)
    assert f.evidence["seconds_above_threshold_pct"] == pytest.approx(100 * (len(inside) - 1) / len(inside), abs=0.1)
    assert "innodb_log_file_size" in f.advice
