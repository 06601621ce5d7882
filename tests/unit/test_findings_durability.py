"""reports.rules.durability on saved real bundles: unsafe settings and impossible commit rates."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from diag.core.bundle import Bundle, load_bundle
from reports.rules import durability as d

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"
PG = "postgres@127.0.0.1:45603"
MY = "mysql@127.0.0.1:43453"


def load(name: str) -> Bundle:
    return load_bundle(DATA / name)


def with_settings(b: Bundle, label_prefix: str, **settings: str) -> Bundle:
    b = copy.deepcopy(b)
    for t in b.run["targets"]:
        if t["label"].startswith(label_prefix):
            t["settings"].update(settings)
    return b


# --------------------------------------------------------------------------- durability_unsafe


def test_unsafe_fires_on_fsync_off() -> None:
    (f,) = d.durability_unsafe(load("insert_pg_fsync_off"))
    assert (f.category, f.severity, f.impact) == ("durability_unsafe", "critical", 1.0)
    assert f.title == "Not durable: fsync=off"
    assert f.evidence["fsync"].startswith("off: ") and "corrupt" in f.evidence["fsync"]
    assert f.evidence["workloads"] == "insert"
    assert "fsync=on" in f.advice


@pytest.mark.parametrize("name", ["point_select", "insert_flush_cap_120", "hot_row_pg_c4", "hot_row_mariadb_c4"])
def test_unsafe_quiet_on_default_settings(name: str) -> None:
    # MariaDB defaults here: flush at commit, doublewrite on, binary log off (so sync_binlog=0 is moot)
    assert d.durability_unsafe(load(name)) == []


def test_unsafe_fires_on_mariadb_flush_at_trx_commit_2() -> None:
    b = with_settings(load("insert_flush_cap_120"), "mysql", innodb_flush_log_at_trx_commit="2")
    (f,) = d.durability_unsafe(b)
    assert f.target == MY and f.severity == "critical"
    assert "innodb_flush_log_at_trx_commit=2" in f.title
    assert "power loss" in f.evidence["innodb_flush_log_at_trx_commit"]
    assert "innodb_flush_log_at_trx_commit=1, sync_binlog=1" in f.advice and "fsync=on" not in f.advice


def test_unsafe_is_a_warning_when_every_workload_only_reads() -> None:
    b = with_settings(load("point_select"), "postgres", synchronous_commit="off")
    (f,) = d.durability_unsafe(b)
    assert f.severity == "warning" and f.impact == d.READ_ONLY_IMPACT
    assert "only read" in f.advice and f.evidence["workloads"] == "point-select"


def test_unsafe_says_nothing_without_settings() -> None:
    b = copy.deepcopy(load("insert_pg_fsync_off"))
    for t in b.run["targets"]:
        t.pop("settings")
    assert d.durability_unsafe(b) == []


# --------------------------------------------------------------------------- durability_implausible


def test_implausible_fires_at_flush_capability_120() -> None:
    found = {(f.target, f.clients): f for f in d.durability_implausible(load("insert_flush_cap_120"))}
    assert set(found) == {(PG, 1), (PG, 2), (MY, 1), (MY, 2)}
    f = found[(PG, 2)]
    assert (f.category, f.severity, f.impact, f.workload) == ("durability_implausible", "critical", 1.0, "insert")
    assert f.evidence["commits_per_s"] == pytest.approx(2074, abs=1)
    assert f.evidence["flush_capability_per_s"] == 120
    assert "--flush-capability 120" in f.evidence["flush_capability_source"]
    assert f.evidence["failed: flush_capacity"] == "C <= F x c x 1.5: 2074 <= 120 x 2 x 1.5 = 360"
    assert f.evidence["window"].startswith("insert, 2 clients: ")
    assert f.extra["failed_checks"] == ["flush_capacity"]
    assert "cannot all have been flushed" in f.advice


def test_implausible_quiet_when_the_disk_can_do_it() -> None:
    b = copy.deepcopy(load("insert_flush_cap_120"))
    b.run["options"]["flush_capability"] = 100_000
    assert d.durability_implausible(b) == []


@pytest.mark.parametrize("name", ["insert_pg_fsync_off", "point_select", "hot_row_pg_c4"])
def test_implausible_quiet_without_a_checkable_write_step(name: str) -> None:
    # fsync=off: commits need no flush, so flush rates bound nothing; point selects and a custom
    # script have no known commit rate
    assert d.durability_implausible(load(name)) == []
