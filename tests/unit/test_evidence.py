"""Where each target's evidence came from, read off saved real bundles (all local servers, no --host-metrics/--ssh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.core.bundle import load_bundle
from reports.model.evidence import evidence_rows

BUNDLES = Path(__file__).resolve().parents[1] / "data" / "bundles"


@pytest.mark.parametrize("name", ["point_select", "insert_flush_cap_120"])
def test_local_targets_name_this_machine_and_say_why_a_part_is_missing(name: str) -> None:
    b = load_bundle(BUNDLES / name)
    ev = evidence_rows(b)
    assert set(ev) == {t["label"] for t in b.run["targets"]}
    for label, rows in ev.items():
        by = {r["evidence"]: r for r in rows}
        assert by["host CPU, context switches, disk I/O"]["source"] == "this machine (/proc, psutil)"
        for r in rows:  # every row either says where it came from or why it is missing
            assert bool(r["source"]) != bool(r["missing"]), (label, r)
        flush = b.run["collectors"].get(f"flush--{label}") or {}
        assert (by["server flush calls (S)"]["source"] == "perf on this machine") == bool(flush.get("ok"))
