"""Reports take a counter's increase only where the bundle declares a counter (run.json ``metrics``).

On a saved bundle: the collectors' declarations (filled by the format-1
migration) make ``db.xact_commit`` a counter; a bundle whose run.json declares
the same key a gauge gets no increase for it, and an undeclared key of an old
bundle is still read as before.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from diag.core.bundle import load_bundle
from diag.core.engines import POSTGRES
from reports.model.steps import steps
from reports.rules.base import counter_in_step

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles" / "point_select"


def _pg_step(path: Path):  # type: ignore[no-untyped-def]
    b = load_bundle(path)
    return b, next(s for s in steps(b) if s.engine is POSTGRES)


def test_declared_counter_gives_its_increase() -> None:
    b, st = _pg_step(DATA)
    inc = counter_in_step(b, st, st.engine.stats_series, "db.xact_commit")
    assert inc is not None and inc >= st.transactions * 0.5  # point-select commits every transaction


def test_a_key_declared_a_gauge_has_no_increase(tmp_path: Path) -> None:
    copy = tmp_path / "b"
    shutil.copytree(DATA, copy)
    b, st = _pg_step(copy)
    series = next(k for k in b.series if k.startswith("pg_stats--"))
    run = json.loads((copy / "run.json").read_text())
    run["metrics"] = {series: [{"name": "db.xact_commit", "unit": "transactions", "kind": "gauge",
                                "description": "declared a gauge for this test"}]}
    (copy / "run.json").write_text(json.dumps(run))
    b2, st2 = _pg_step(copy)
    assert counter_in_step(b2, st2, st2.engine.stats_series, "db.xact_commit") is None
