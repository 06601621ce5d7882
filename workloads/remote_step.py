"""One worker's share of a step, run on a Dask worker's host (``--workers``): the same Step, client pool and loop.

:func:`worker_task` is what the orchestrator submits to each worker
(:mod:`workloads.dask_steps`). It runs ``python -m workloads.remote_step`` as a
child process (its own main thread forks the client processes, as ``dbdiag run``
does; the child dies with the worker through the parent-death signal) and
returns what that child measured: the result row of its clients, its
per-interval series records, its HDR histogram (base64 text) and the CPU use of
its host over the step, for the saturation check. The child writes its bundle
parts into a temporary folder that it removes before it exits.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from diag.bundle import BundleWriter, read_jsonl, safe_name
from diag.db import Session
from diag.procs import pdeathsig_preexec
from diag.targets import Target
from workloads.base import Workload
from workloads.client import fastest_driver
from workloads.options import DriverOptions
from workloads.progress import SweepBar
from workloads.step import Step

BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker runs: ``clients`` clients of ``workload`` against ``target``, starting at ``start_unix``."""

    target: Target
    workload: Workload
    clients: int
    opts: DriverOptions
    seed: int
    start_unix: float  # every worker's clients start together (unix s), so their intervals line up


def _busy(t0: Any, t1: Any) -> float:
    """Busy share (0..1) of all CPUs between two ``psutil.cpu_times()``."""
    d = {f: getattr(t1, f, 0.0) - getattr(t0, f, 0.0) for f in t1._fields}
    total = sum(d.values())
    return sum(d.get(f, 0.0) for f in BUSY_FIELDS) / total if total > 0 else 0.0


def run_share(spec: WorkerSpec) -> dict[str, Any]:
    """Run the share in this process (the child's main); returns row, intervals, histogram and host CPU."""
    tmp = Path(tempfile.mkdtemp(prefix="dbdiag-worker-"))
    try:
        bundle = BundleWriter(tmp)
        series = bundle.series(f"workload--{spec.target.label}")
        with Session(spec.target, statement_timeout_ms=0, application_name="dbdiag-worker") as s:
            product = s.product
        step = Step(spec.target, product, fastest_driver(spec.target.engine), spec.workload, spec.clients,
                    spec.opts, bundle, series, None, SweepBar(None, 1, 1.0), seed=spec.seed)
        time.sleep(max(0.0, spec.start_unix - time.time()))
        cpu0 = psutil.cpu_times()
        row = step.run()
        cpu1 = psutil.cpu_times()
        series.close()
        intervals = list(read_jsonl(tmp / "series" / f"{safe_name(f'workload--{spec.target.label}')}.jsonl"))
        hdr = "".join(p.read_text(encoding="ascii").strip() for p in (tmp / "artifacts").glob("*.hdr"))
        return {"row": row, "intervals": intervals, "hdr": hdr,
                "host": {"hostname": socket.gethostname(), "ncpu": psutil.cpu_count() or 1,
                         "busy_pct": round(100 * _busy(cpu0, cpu1), 1)}}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def worker_task(spec_bytes: bytes, timeout_s: float) -> dict[str, Any]:
    """The Dask task: run the share in a child process, return its JSON. Raises RuntimeError with the
    child's last line when it fails (the orchestrator counts that worker's clients as lost)."""
    p = subprocess.run([sys.executable, "-m", "workloads.remote_step"], input=spec_bytes, capture_output=True,
                       timeout=timeout_s, preexec_fn=pdeathsig_preexec(), cwd=os.getcwd())
    if p.returncode != 0:
        lines = p.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"worker step failed (exit {p.returncode}): {lines[-1] if lines else 'no output'}")
    return json.loads(p.stdout)


def main() -> int:
    """Child process: a pickled :class:`WorkerSpec` on stdin (from our own orchestrator), JSON on stdout."""
    spec = pickle.loads(sys.stdin.buffer.read())  # noqa: S301 (written by this program's worker_task)
    out = run_share(spec)
    sys.stdout.write(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
