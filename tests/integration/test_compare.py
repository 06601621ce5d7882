"""`dbdiag compare` on two real bundles: PostgreSQL vs MariaDB point-select, per-transaction differences."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _tps(bundle: Path) -> float:
    """The measured rate of a bundle's only step, as results.json has it."""
    (row,) = json.loads((bundle / "results.json").read_text())["results"]
    return float(row["tps"])


def test_compare_two_bundles(point_select_bundles):
    a, b = point_select_bundles["pg"], point_select_bundles["maria"]  # tests/conftest.py: one run per server
    p = subprocess.run([sys.executable, "-m", "diag", "compare", str(a), str(b)], capture_output=True, text=True,
                       timeout=60, cwd=str(REPO))
    assert p.returncode == 0, p.stderr
    text = p.stdout
    assert "point-select at 2 clients" in text and "pg" in text and "maria" in text
    # The sentences come first: the gap, then the components that explain it with their share of it.
    assert re.search(r"\n  \w+ is [\d.]+x faster than \w+: its mean transaction takes [\d,.]+ µs", text), text
    assert re.search(r"\n  \w+ spends [\d,.]+ µs more per transaction .* of the gap\.", text), text
    assert "durability level" not in text  # both default (durable) servers
    j = subprocess.run([sys.executable, "-m", "diag", "compare", "--json", str(a), str(b)], capture_output=True,
                       text=True, timeout=60, cwd=str(REPO))
    items = json.loads(j.stdout)["comparisons"]
    assert len(items) == 1
    # Each bundle's own measured rate decides which side is named faster, and the ratio is their quotient.
    tps = {label: _tps(d) for label, d in (("pg", a), ("maria", b))}
    fast, slow = sorted(tps, key=tps.get, reverse=True)
    e = items[0]
    assert (e["fast"], e["slow"]) == (fast, slow), (e["fast"], e["slow"], tps)
    assert (e["fast_tps"], e["slow_tps"]) == (tps[fast], tps[slow])
    assert e["tps_ratio"] == pytest.approx(tps[fast] / tps[slow])
    assert f"{fast} {tps[fast]:,.0f} tps vs {slow} {tps[slow]:,.0f} tps" in text
    for sentence in e["sentences"]:
        assert sentence in text  # the terminal says what the JSON (and the page) say
    diffs = {d["metric"]: d for d in items[0]["differences"]}
    # Rows line up by the shared components: both engines' server CPU and client waits are one row each.
    assert diffs["server_cpu_user"]["fast"] > 0 and diffs["server_cpu_user"]["slow"] > 0
    assert not any(k.startswith("wait_us_per_txn") for k in diffs)
    page = a / "compare-my.html"
    assert f"comparison page: {page}" in text and e["sentences"][0].split(":")[0] in page.read_text()


def test_compare_without_common_steps_says_so(point_select_bundles):
    p = subprocess.run([sys.executable, "-m", "diag", "compare", str(point_select_bundles["pg"])],
                       capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert p.returncode == 1 and "no comparable steps" in p.stdout
