"""The default job, as a new user starts it: ``dbdiag run`` with nothing but shorter steps and profile windows.

One module-wide subprocess run of ``python -m diag run -T 2 --warmup 0.5 --profile-seconds 1.5 --out DIR``
(embedded PostgreSQL and, where its binaries exist, embedded MariaDB/MySQL; point-select at 1 and 4 clients;
perf profiles on, as by default). The defaults are not restated here: the steps checked are the ones the run
reports. Tests of other parts of the default report (statements, profiles) read the same bundle through the
``default_run`` fixture instead of starting servers again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from diag.core.bundle import load_bundle
from reports.model.accounting import accounts

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The bundle of the default job with 2 s steps, its findings and the terminal output."""
    out = tmp_path_factory.mktemp("default") / "bundle"
    # --profile-seconds: each profiled step runs on that long after its measured part (4 steps), and its perf
    # data is analysed; 1.5 s of the default 3 still gives every step its profile
    p = subprocess.run([sys.executable, "-m", "diag", "run", "-T", "2", "--warmup", "0.5", "--profile-seconds", "1.5",
                        "--out", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=str(REPO))
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
    found = json.loads((out / "findings.json").read_text())["findings"]
    return {"path": out, "bundle": load_bundle(out), "found": found, "stdout": p.stdout, "stderr": p.stderr}


def test_default_run_covers_both_engines_at_every_default_client_count(default_run: dict[str, Any]) -> None:
    results = default_run["bundle"].results
    engines = {r["target"] for r in results}
    assert len(engines) == 2, (engines, default_run["stderr"][-1500:])  # this machine kind has both engines
    clients = {r["clients"] for r in results}
    assert len(clients) >= 2, clients  # a sweep, not a single point
    assert all(r.get("tps", 0) > 0 for r in results), results


def test_every_default_step_names_one_limit_and_its_parts_explain_its_time(default_run: dict[str, Any]) -> None:
    """Shares add to 1 by construction (reports.model.accounting._assemble), so that is not asserted; the measured
    parts overshoot the wall time by sampling error only: at most 1.3x (1.17x the most in the saved bundles,
    1.11x in a loaded sweep)."""
    steps = {(r["target"], r["workload"], r["clients"]) for r in default_run["bundle"].results}
    accounted = {(s.target, s.workload, s.clients): a for s, a in accounts(default_run["bundle"])}
    assert set(accounted) == steps
    for key, acc in accounted.items():
        measured = sum(c.us_per_txn for c in acc.components if c.key != "unaccounted")
        assert measured <= 1.3 * acc.wall_us_per_txn, (key, acc.wall_us_per_txn, acc.components)
        assert acc.get("unaccounted") is not None, key  # shown, never hidden
        lims = [f for f in default_run["found"] if f["category"] == "limit" and
                (f["target"], f["workload"], f["clients"]) == key]
        assert len(lims) == 1, (key, [f["category"] for f in default_run["found"]])
        assert lims[0]["extra"]["kind"] and lims[0]["title"], lims[0]
    html = (default_run["path"] / "report.html").read_text()
    assert html.count("What limits it: <b>") == 2 and "No finding names a limit" not in html  # one per target


def test_profiles_record_after_the_measured_part_and_the_report_says_what_they_cost(
        default_run: dict[str, Any]) -> None:
    """Issue 25: each profiled step runs on after -T; its figures, series and statements stop at the measured
    part's end, the tail is summed apart, and the report's Cost of looking table shows both rates."""
    b = default_run["bundle"]
    profiled = [r for r in b.results if (r.get("profile") or {}).get("window")]
    assert profiled, [r.get("profile") for r in b.results]
    html = (default_run["path"] / "report.html").read_text()
    assert 'id="observer-table"' in html
    for r in profiled:
        tail, (w0, w1) = r["profile_tail"], r["profile"]["window"]
        assert r["measured_s"] == pytest.approx(2.0, abs=0.01), r
        assert tail["t_start"] == pytest.approx(r["t_end"], abs=0.01) and tail["seconds"] > 1.0, tail
        assert tail["t_start"] <= w0 < w1 <= tail["t_end"] + 0.5, (tail, r["profile"]["window"])
        assert tail["transactions"] > 0 and tail["tps_ratio"] == pytest.approx(tail["tps"] / r["tps"], rel=0.01)
        st = r.get("statements") or {}
        if st.get("t1"):  # the digests' end snapshot: at the measured part's end, not after the tail
            assert st["t1"] <= r["t_end"] + 0.5, (st["t1"], r["t_end"])
        assert f"{tail['tps']:,.1f}" in html, tail["tps"]
    recs = [x for name, s in b.series_for("workload--").items() for x in s]
    assert any(x.get("tail") for x in recs) and all(x["t"] <= r["t_end"] + 1e-3 or x.get("tail")
                                                   for r in profiled for x in recs
                                                   if (x["workload"], x["clients"]) == (r["workload"], r["clients"])
                                                   and r["t_start"] < x["t"] < r["profile_tail"]["t_end"])
