"""bench/soak.py --short: the soak script runs a real embedded run, and dbdiag's own memory and CPU stay within
bounds derived from the targets (issue 25: collectors at most 1% of one core over a long run, RSS flat).

Measured on this machine (2 vCPUs shared with other helpers' tests, load average 15-22), 3 runs of
``--short --clients 1 --rate 100`` (8 s measured, a sample every 2 s): orchestrator RSS 50.4-50.6 MiB, growing
at most 0.2 MiB between its first and last busy sample; each collector 37-40 MiB RSS (5 of them), the client
41 MiB; the collectors together 0.009-0.024 of one core per 2 s sample, 0.015-0.019 on average. The bounds
below leave about 2x headroom (a loaded CI machine, another Python build), not 100x: a leak, a collector that
polls in a busy loop, or a new heavy import fails them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
ORCHESTRATOR_RSS = 100 * MIB  # measured 50.6 MiB
ORCHESTRATOR_GROWTH = 4 * MIB  # between the first and last sample of the 8 s step; measured 0.2 MiB
COLLECTOR_RSS = 64 * MIB  # each collector process; measured 37-40 MiB
CLIENT_RSS = 80 * MIB  # the one client process; measured 41 MiB
# The collectors' CPU, in cores: the long-run target is 0.01. A short run's samples include the collectors'
# first queries and imports (the first share is over the 2 s after their start-up), so the mean may be
# higher than an hour's; measured 0.015-0.019 on average, 0.024 in the worst sample.
COLLECTORS_CPU_MEAN = 0.04
COLLECTORS_CPU_MAX = 0.06


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
    # RSS of each role while the step ran, within its bound; the orchestrator's flat.
    orch = [s["rss_bytes"]["orchestrator"] for s in busy]
    assert all(MIB < x < ORCHESTRATOR_RSS for x in orch), orch
    assert max(orch) - orch[0] <= ORCHESTRATOR_GROWTH, orch
    for s in busy:
        assert all(MIB < x < COLLECTOR_RSS for x in s["collector_rss_bytes"].values()), s["collector_rss_bytes"]
    # the client may be gone by the last sample (a zombie's RSS is 0): its largest sample is its size
    assert MIB < max(s["rss_bytes"]["clients"] for s in busy) < CLIENT_RSS, [s["rss_bytes"] for s in busy]
    names = set().union(*(s["collector_rss_bytes"] for s in busy))
    assert "host" in names and any(n.startswith("pg_") for n in names), names
    # PSS splits the pages the orchestrator shares with its forked children: never above RSS, never zero.
    for s in busy:
        for role in ("orchestrator", "collectors", "clients"):
            if role == "clients" and not s["rss_bytes"][role]:
                continue  # the client gone (as above)
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
    # The collectors' CPU (from their second sample on), within the short run's bounds.
    shares = [s["cpu_core_share"]["collectors"] for s in busy if "collectors" in s.get("cpu_core_share", {})]
    assert len(shares) >= 2 and max(shares) > 0, shares
    assert sum(shares) / len(shares) <= COLLECTORS_CPU_MEAN and max(shares) <= COLLECTORS_CPU_MAX, shares
    # The report of the finished bundle was rendered and timed.
    rep = doc["report"]
    assert rep["rc"] == 0 and rep["report_bytes"] > 0 and all(w > 0 for w in rep["wall_s"]), rep
    summary = doc["summary"]
    assert summary["orchestrator_rss_last_quarter_bytes"] > 0 and summary["collectors_cpu_core_share_mean"] is not None
    assert "report:" in r.stdout and "bundle MiB" in r.stdout
