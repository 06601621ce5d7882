"""One run for bench/collector_cpu.py, with the code of the tree on PYTHONPATH (the script's own tree is not
imported: this file is run by path, so sys.path[0] is bench/, which holds no package of the project).

    PYTHONPATH=TREE python3 bench/collector_cpu_run.py DSN DURATION CLIENTS RATE  ->  one JSON line
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import diag.run as drun
from diag.core.bundle import load_bundle
from workloads.driver import DriverOptions


def one_run(dsn: str, duration: float, clients: int, rate: float) -> dict[str, Any]:
    """One run of the tree on PYTHONPATH, each collector's CPU (see bench/collector_cpu.py)."""
    life: dict[str, float] = {}
    names: dict[int, str] = {}

    def proc_cpu(pid: int) -> float:
        st = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return sum(int(x) for x in st[11:15]) / os.sysconf("SC_CLK_TCK")

    class Runner(drun.CollectorRunner):  # type: ignore[misc,name-defined]
        def start(self) -> None:
            self._t0 = time.monotonic()
            super().start()
            for r in self.running:
                names[r.process.pid] = r.key.split("--")[0]

        def stop(self) -> None:
            span = time.monotonic() - self._t0
            for r in self.running:
                if r.process.pid:
                    name = r.key.split("--")[0]
                    life[name] = life.get(name, 0.0) + 100 * proc_cpu(r.process.pid) / span
            super().stop()

    drun.CollectorRunner = Runner
    drv = DriverOptions(clients=(clients,), duration_s=duration, warmup_s=1.0, scale=1, rate=rate)
    with tempfile.TemporaryDirectory(prefix="dbdiag-collcpu-") as d:
        opts = drun.RunOptions(targets=[dsn], workloads=["point-select"], driver=drv, out=Path(d) / "b",
                               name="collector-cpu", collect=True, profile=False, render=False)
        run = drun.Run(opts, out=io.StringIO())
        run.execute()
        res = run.results[0]
        b = load_bundle(Path(d) / "b")
        host = [r for r in b.series.get("host", []) if res["t_start"] <= r.get("t", 0) <= res["t_end"]]
    measured: dict[str, float] = {}
    if len(host) >= 2:
        first, last = host[0], host[-1]
        span = last["t"] - first["t"]
        for pid_s, row in last.get("procs.collector", {}).items():
            pid = int(pid_s)
            before = first.get("procs.collector", {}).get(pid_s)
            name = names.get(pid)
            if before is None or name is None:
                continue  # a collector's child (perf under the flush collector): added to its parent below
            cpu = (row[0] + row[1] + row[8] + row[9]) - (before[0] + before[1] + before[8] + before[9])
            measured[name] = measured.get(name, 0.0) + 100 * cpu / span
        # a collector's children (perf of the flush collector) are rows of their own: add them to their parent
        for pid_s, row in last.get("procs.collector", {}).items():
            pid = int(pid_s)
            if pid in names or row[10] not in names:
                continue
            before = first.get("procs.collector", {}).get(pid_s)
            if before is not None:
                name = names[int(row[10])]
                measured[name] = measured.get(name, 0.0) + 100 * (row[0] + row[1] - before[0] - before[1]) / span
    return {"tps": res.get("tps"), "measured": {k: round(v, 3) for k, v in measured.items()},
            "life": {k: round(v, 3) for k, v in life.items()}, "load1": os.getloadavg()[0]}


if __name__ == "__main__":
    print(json.dumps(one_run(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))))
