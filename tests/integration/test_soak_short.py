"""bench/soak.py --short: the soak script runs a real embedded run and its figures are sane."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_soak_short_measures_a_run(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    r = subprocess.run([sys.executable, "-m", "bench.soak", "--short", "--clients", "1", "--rate", "100",
                        "--out", str(out)], capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    doc = json.loads(out.read_text())
    assert doc["status"] == "complete" and doc["run_rc"] == 0, doc.get("run_log_tail")
    samples = doc["samples"]
    busy = [s for s in samples if s["processes"].get("clients")]
    assert len(busy) >= 3, [s["processes"] for s in samples]
    # RSS measured for every role of the run while the step ran, and plausible (1 MiB .. 2 GiB each).
    for s in busy:
        for role in ("orchestrator", "collectors", "clients"):
            assert 1 << 20 < s["rss_bytes"][role] < 2 << 30, (role, s["rss_bytes"])
    names = set().union(*(s["collector_rss_bytes"] for s in busy))
    assert "host" in names and any(n.startswith("pg_") for n in names), names
    # PSS splits the pages the orchestrator shares with its forked children: never above RSS, never zero.
    for s in busy:
        for role in ("orchestrator", "collectors", "clients"):
            assert 0 < s["pss_bytes"][role] <= s["rss_bytes"][role], (role, s["pss_bytes"], s["rss_bytes"])
    # CPU per collector, by the series it writes: each a part of the collectors' whole.
    per = [s for s in busy if s.get("collector_cpu_core_share")]
    # a share needs the process in the sample before: a collector that started since then has none yet
    # (seen in CI: the first busy sample had host but not yet pg_stats)
    assert len(per) >= 2 and all({"host", "pg_stats"} <= set(s["collector_cpu_core_share"]) for s in per[1:]), per[:2]
    for s in per:
        assert sum(s["collector_cpu_core_share"].values()) <= s["cpu_core_share"]["collectors"] + 1e-3
    # The bundle grows as the run goes, and the series are what grow.
    assert busy[-1]["bundle_bytes"]["total"] > busy[0]["bundle_bytes"]["total"]
    assert any(k.startswith("series:") for k in samples[-1]["bundle_bytes"]), samples[-1]["bundle_bytes"]
    # CPU shares are fractions of a core; the collectors' is measured (from their second sample on).
    shares = [s["cpu_core_share"]["collectors"] for s in busy if "collectors" in s.get("cpu_core_share", {})]
    assert len(shares) >= 2 and all(0 <= x < 2 for x in shares) and max(shares) > 0, shares
    # The report of the finished bundle was rendered and timed.
    rep = doc["report"]
    assert rep["rc"] == 0 and rep["report_bytes"] > 0 and all(w > 0 for w in rep["wall_s"]), rep
    summary = doc["summary"]
    assert summary["orchestrator_rss_last_quarter_bytes"] > 0 and summary["collectors_cpu_core_share_mean"] is not None
    assert "report:" in r.stdout and "bundle MiB" in r.stdout
