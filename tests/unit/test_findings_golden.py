"""The saved bundles give the same findings as before the architecture change.

``tests/data/findings_golden.json`` was written from these bundles by the report
code as it stood before engines became objects and the bundle got a schema
(commit "Engines as objects"); a refactor of reports/ must not change a finding.
To accept an intended change, rewrite the file and say why in the commit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diag.core.bundle import load_bundle
from reports.rules.findings import derive_findings

DATA = Path(__file__).resolve().parents[1] / "data"
GOLDEN = json.loads((DATA / "findings_golden.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_saved_bundle_gives_the_same_findings(name: str) -> None:
    found = json.loads(json.dumps(derive_findings(load_bundle(DATA / "bundles" / name)), sort_keys=True, default=str))
    assert found == GOLDEN[name]


def test_golden_covers_every_saved_bundle() -> None:
    names = {p.name for p in (DATA / "bundles").iterdir() if (p / "run.json").exists()}
    assert names == set(GOLDEN)
