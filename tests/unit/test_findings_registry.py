"""reports.rules.findings: the registry, the ranking and the findings.json shape, on every saved bundle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diag.core.bundle import load_bundle
from reports.rules.findings import RULES, SEVERITIES, derive_findings

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"
BUNDLES = sorted(p.name for p in DATA.iterdir() if (p / "run.json").exists())
CATEGORIES = {"durability_unsafe", "durability_implausible", "commit_flush_bound", "lock_contention",
              "latch_contention", "cpu_parse_plan", "cpu_bound", "client_bound", "io_read_bound",
              "checkpoint_pressure", "context_switch_storm", "host_contention", "server_lost", "step_aborted",
              "statement_stuck", "limit", "noisy_measurement", "unsteady_window", "full_scan", "statement_hotspot",
              "temp_spill", "buffer_pool_misses", "table_scan", "old_transaction",
              "client_server_disagree", "connection_churn"}


def test_registry_is_explicit_and_complete() -> None:
    assert len(RULES) == len(set(RULES)) == 26
    assert all(callable(r) for r in RULES)


@pytest.mark.parametrize("name", BUNDLES)
def test_findings_shape_and_order(name: str) -> None:
    found = derive_findings(load_bundle(DATA / name))
    json.dumps({"findings": found})  # findings.json must serialise as is
    for f in found:
        assert f["category"] in CATEGORIES
        assert f["severity"] in SEVERITIES
        assert 0.0 <= f["impact"] <= 1.0
        assert f["title"] and f["advice"] and f["evidence"]
        if f["workload"] is not None:  # a step finding says which interval its numbers come from
            assert "measured)" in f["evidence"]["window"]
    # at equal impact a step's limit comes first (the wait finding of the limit's own resource shares its impact)
    keys = [(-f["impact"], f["severity"] != "critical", f["category"] != "limit", SEVERITIES.index(f["severity"]))
            for f in found]
    assert keys == sorted(keys)
    limits = {(f["target"], f["workload"], f["clients"]): i for i, f in enumerate(found) if f["category"] == "limit"}
    for i, f in enumerate(found):  # the limit ranks first for its step, after critical findings only
        j = limits.get((f["target"], f["workload"], f["clients"]))
        assert j is None or i >= j or f["severity"] == "critical", (f["category"], f["title"])


@pytest.mark.parametrize("name", BUNDLES)
def test_findings_are_a_pure_function_of_the_bundle(name: str) -> None:
    assert derive_findings(load_bundle(DATA / name)) == derive_findings(load_bundle(DATA / name))


@pytest.mark.parametrize("name,target,category", [
    ("hot_row_pg_c4", "hot-postgres", "lock_contention"),
    ("hot_row_pg_c32", "hot-postgres", "lock_contention"),
    ("hot_row_mariadb_c4", "hot-mysql", "lock_contention"),
    ("insert_pg_fsync_off", "postgres@127.0.0.1:56045", "durability_unsafe"),
    ("insert_flush_cap_120", "postgres@127.0.0.1:45603", "durability_implausible"),
    ("insert_flush_cap_120", "mysql@127.0.0.1:43453", "durability_implausible"),
    ("wal_heavy_pg_max_wal_32mb", "postgres-custom", "commit_flush_bound"),
    ("big_result_pg", "postgres-custom", "client_bound"),
    # the planted cause (a buffer pool smaller than the data): disk reads 39% of transaction time, the limit
    # (18% "not the limit" while dbdiag's own idle collector sessions were counted as the workload's)
    ("point_select_mariadb_small_pool", "mysql@127.0.0.1:35933", "io_read_bound"),
    ("point_select_pg_small_pool", "postgres@127.0.0.1:54293", "buffer_pool_misses"),
])
def test_top_finding_per_target(name: str, target: str, category: str) -> None:
    """The top finding apart from the per-step limit (reports.rules.limit ranks by the share it explains)."""
    found = [f for f in derive_findings(load_bundle(DATA / name)) if f["target"] == target and f["category"] != "limit"]
    assert found and found[0]["category"] == category, [(f["category"], f["impact"]) for f in found]


@pytest.mark.parametrize("name", ["point_select", "point_select_pg_simple", "hot_row_pg_c4", "hot_row_mariadb_c4"])
def test_clean_runs_raise_no_critical_finding(name: str) -> None:
    assert [f["title"] for f in derive_findings(load_bundle(DATA / name)) if f["severity"] == "critical"] == []
