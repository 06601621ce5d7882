"""What the bench scripts measure with: an external tool's run and CPU, the server's CPU, one step of ours.

Shared by bench/compare.py, bench/pairs.py and the overhead benches; times in seconds, CPU from
getrusage (the tools) and /proc (the throwaway server).
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from diag.core import servers
from diag.core.bundle import BundleWriter
from diag.core.schema import ResultRow
from workloads.driver import DriverOptions, run_sweep


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def server_cpu(srv: servers.ThrowawayServer) -> float:
    """CPU seconds the server has used so far: its own plus its exited children's (PostgreSQL backends
    are reaped by the postmaster, so their time lands in cutime/cstime; mariadbd is one process)."""
    time.sleep(0.5)  # let backends of the run that just ended exit and be reaped
    fields = Path(f"/proc/{srv.pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    for child in Path("/proc").glob("[0-9]*"):
        try:
            st = (child / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(st[1]) == srv.pid:  # a live child (checkpointer, walwriter...)
            ticks += int(st[11]) + int(st[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def run_tool(cmd: list[str], timeout: float) -> tuple[str, float, float]:
    """(output, wall seconds, child CPU seconds) of an external benchmark tool."""
    c0, t0 = _child_cpu(), time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wall, cpu = time.monotonic() - t0, _child_cpu() - c0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr.strip()[-500:]}")
    return out.stdout + out.stderr, wall, cpu


def ours(target: Any, workload: str, clients: int, duration: float, scale: float = 1, script: str | None = None,
         protocol: str = "prepared", py_loop: bool = False) -> ResultRow:
    """One step of our driver; ``py_loop`` runs the Python query loop instead of the native executor
    (DBDIAG_PY_LOOP=1, inherited by the forked clients)."""
    if py_loop:
        os.environ["DBDIAG_PY_LOOP"] = "1"
        try:
            return ours(target, workload, clients, duration, scale, script, protocol)
        finally:
            del os.environ["DBDIAG_PY_LOOP"]
    # No warmup: like the tools, the whole run is measured (caches were warmed before the rounds).
    opts = DriverOptions(clients=(clients,), duration_s=duration, warmup_s=0.0, scale=scale,  # type: ignore[arg-type]
                         script=script, protocol=protocol)
    with tempfile.TemporaryDirectory(prefix="dbdiag-bench-") as d:
        return run_sweep(target, [workload], opts, BundleWriter(Path(d)), progress=None)[0]


def us_per_txn(secs: float, txns: int) -> float:
    return round(secs / max(txns, 1) * 1e6, 2)


def pgbench_figures(out: str) -> tuple[float, int]:
    """(TPS without connection time, transactions processed) from pgbench's output."""
    tps = float(re.search(r"tps = ([\d.]+) \(without", out).group(1))  # type: ignore[union-attr]
    return tps, int(re.search(r"actually processed: (\d+)", out).group(1))  # type: ignore[union-attr]
