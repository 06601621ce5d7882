"""neighbours: a step whose host's CPUs other processes saturate names them as its limit.

The plant: three busy loops (one more than this machine's 2 CPUs) started by the test beside a 1-client
point-select step; the control: the same step without them. The control needs a machine that others do not
already saturate: the test reads /proc/stat itself over the control run and fails with that reading as the
reason when the machine could not host it (never asserting another outcome).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from diag.core import servers
from tests.integration.test_findings_planted import run, summary

BURN = "import time\nt = time.time() + 60\nwhile time.time() < t: pass\n"  # bounded: never outlives the test long


def _busy_total() -> tuple[float, float]:
    f = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7]
    return busy, busy + f[3] + f[4]


def _limit(found: list[dict]) -> dict:
    (lim,) = [f for f in found if f["category"] == "limit"]
    return lim


def test_cpu_burners_beside_the_step_are_its_limit(pg_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range((os.cpu_count() or 2) + 1)]
    try:
        time.sleep(0.5)
        by = run(tmp_path / "plant", [f"pg={pg_server.dsn()}"], ["point-select"], clients=(1,))
    finally:
        for p in burners:
            p.kill()
            p.wait()
    lim = _limit(by["pg"])
    assert lim["extra"]["kind"] == "neighbours", summary(by["pg"])
    ev = lim["evidence"]
    assert ev["other_processes_cpu_cores"] >= 1.0 and ev["run_share_of_busy_cpu_pct"] < 50, ev


def test_a_quiet_host_is_not_named(pg_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    b0, t0 = _busy_total()
    by = run(tmp_path / "control", [f"pg={pg_server.dsn()}"], ["point-select"], clients=(1,))
    b1, t1 = _busy_total()
    lim = _limit(by["pg"])
    if lim["extra"]["kind"] == "neighbours":
        busy = (b1 - b0) / (t1 - t0)
        raise AssertionError(f"neighbours named without a plant; /proc/stat read {100 * busy:.0f}% busy over the "
                             f"run and load {os.getloadavg()}: if others kept this machine busy it cannot host the "
                             f"control (the run's own 1 client and server use well under half of it): {lim['title']}")
