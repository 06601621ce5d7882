"""One worker's share of a step, run on a Dask worker's host (``--workers``): the same Step, client pool and loop.

:func:`worker_task` is what the orchestrator submits to each worker
(:mod:`workloads.remote.dask_steps`). It runs ``python -m workloads.remote.remote_step`` as a
child process (its own main thread forks the client processes, as ``dbdiag run``
does; the child dies with the worker through the parent-death signal). The
child prints each merged interval of its clients as it is written (``I <json>``, with
the interval's HDR histogram as ``hdr``)
and at the end what it measured (``R <json>``): the result row, its interval
records, its HDR histogram (base64 text) and the CPU use of its host over the
step, for the saturation check. The task forwards each interval to the
orchestrator as it arrives (a Dask worker event on the step's topic) and returns
the result. The child writes its bundle parts into a temporary folder that the
task makes and removes (and the child too, when the task dies before it).
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from diag.core.bundle import BundleWriter, read_jsonl, safe_name
from diag.core.db import Session, own_app_name
from diag.core.procs import pdeathsig_preexec
from diag.core.targets import Target
from workloads import hist
from workloads.base import Workload
from workloads.clients.client import fastest_driver
from workloads.steps.options import DriverOptions, StepPlan
from workloads.steps.progress import SweepBar
from workloads.steps.step import Step

BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")  # one value per kernel boot: the machine, not its name
SAME_START_S = 0.05  # a process's start time as two readers of one kernel see it (psutil rounds to 10 ms ticks)


def boot_id(path: Path = BOOT_ID) -> str:
    """This kernel's boot id ("" when there is no /proc to read it from)."""
    try:
        return path.read_text(encoding="ascii").strip()
    except OSError:
        return ""


def whoami() -> dict[str, Any]:
    """Run in a Dask worker (``Client.run``): which kernel boot and which process it is, for :func:`on_this_host`."""
    return {"boot_id": boot_id(), "pid": os.getpid(), "create_time": psutil.Process().create_time(),
            "hostname": socket.gethostname()}


def on_this_host(who: Any) -> bool:
    """True when ``who`` (a worker's :func:`whoami`) is a process this machine's host collector can read: the
    same kernel boot (a hostname is not enough: clones and containers share names) and, under it, the same
    process: its PID here started when it says (a container on this kernel numbers its processes apart)."""
    mine = boot_id()
    if not isinstance(who, dict) or not mine or who.get("boot_id") != mine:
        return False
    try:
        return abs(psutil.Process(int(who["pid"])).create_time() - float(who["create_time"])) < SAME_START_S
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker runs: ``clients`` clients of ``workload`` against ``target``, starting at ``start_unix``."""

    target: Target
    workload: Workload
    clients: int
    opts: DriverOptions
    seed: int
    start_unix: float  # every worker's clients start together (unix s), so their intervals line up
    first_index: int = 0   # this share's first client among the step's (the clients of the shares before it)
    step_clients: int = 0  # the step's clients over all shares (0: this share is the step)


def _busy(t0: Any, t1: Any) -> float:
    """Busy share (0..1) of all CPUs between two ``psutil.cpu_times()``."""
    d = {f: getattr(t1, f, 0.0) - getattr(t0, f, 0.0) for f in t1._fields}
    total = sum(d.values())
    return sum(d.get(f, 0.0) for f in BUSY_FIELDS) / total if total > 0 else 0.0


class _EchoSeries:
    """The step's series writer; each record is also printed on stdout for the worker task to stream."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, record: dict[str, Any]) -> None:
        self.inner.write(record)
        sys.stdout.write("I " + json.dumps(record) + "\n")
        sys.stdout.flush()

    def close(self) -> None:
        self.inner.close()


def run_share(spec: WorkerSpec, tmp: Path) -> dict[str, Any]:
    """Run the share in this process (the child's main), writing its step bundle in the empty directory
    ``tmp`` (removed on return); returns row, intervals, histogram and host CPU."""
    try:
        bundle = BundleWriter(tmp)
        series = _EchoSeries(bundle.series(f"workload--{spec.target.label}"))
        with Session(spec.target, statement_timeout_ms=0, application_name=own_app_name("worker")) as s:
            product = s.product
        share = StepPlan(spec.target.label, spec.workload.name, spec.clients, spec.opts)  # this worker's part
        step = Step(spec.target, product, fastest_driver(spec.target.engine), spec.workload, share,
                    bundle, series, None, SweepBar(None, 1, 1.0), seed=spec.seed,
                    first_index=spec.first_index, step_clients=spec.step_clients)
        step.interval_hist = hist.new()  # each interval streams its HDR histogram, merged exactly across workers
        time.sleep(max(0.0, spec.start_unix - time.time()))
        cpu0 = psutil.cpu_times()
        row = step.run()
        cpu1 = psutil.cpu_times()
        series.close()
        intervals = list(read_jsonl(tmp / "series" / f"{safe_name(f'workload--{spec.target.label}')}.jsonl"))
        hdr = "".join(p.read_text(encoding="ascii").strip() for p in (tmp / "artifacts").glob("*.hdr"))
        return {"row": row.to_dict(), "intervals": intervals, "hdr": hdr,
                "host": {"hostname": socket.gethostname(), "ncpu": psutil.cpu_count() or 1,
                         "busy_pct": round(100 * _busy(cpu0, cpu1), 1)}}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def worker_task(spec_bytes: bytes, timeout_s: float, topic: str = "", share: int = 0) -> dict[str, Any]:
    """The Dask task: run the share in a child process, stream its intervals as worker events on ``topic``
    (``{"share", "record"}``), return its result. Raises RuntimeError with the child's last line when it
    fails (the orchestrator counts that worker's clients as lost)."""
    worker = importlib.import_module("distributed").get_worker() if topic else None
    # The child's step bundle, made here so that this task removes it whatever ends the child (the timeout's
    # SIGKILL leaves it no chance); the child removes it itself when this worker dies (SIGTERM, pdeathsig).
    tmp = Path(tempfile.mkdtemp(prefix="dbdiag-worker-"))
    try:
        return _run_child(spec_bytes, timeout_s, worker, topic, share, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_child(spec_bytes: bytes, timeout_s: float, worker: Any, topic: str, share: int,
               tmp: Path) -> dict[str, Any]:
    """:func:`worker_task`'s child process, its bundle in ``tmp``."""
    proc = subprocess.Popen([sys.executable, "-m", "workloads.remote.remote_step", str(tmp)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=pdeathsig_preexec(),
                            cwd=os.getcwd())
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    err: list[bytes] = []
    stderr = proc.stderr
    drain = threading.Thread(target=lambda: err.extend(stderr), daemon=True)
    drain.start()
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    result: dict[str, Any] | None = None
    try:
        proc.stdin.write(spec_bytes)
        proc.stdin.close()
        for line in proc.stdout:
            if line.startswith(b"I ") and worker is not None:
                worker.log_event(topic, {"share": share, "record": json.loads(line[2:])})
            elif line.startswith(b"R "):
                result = json.loads(line[2:])
        rc = proc.wait()
    finally:
        timer.cancel()
    drain.join(5)
    if rc != 0 or result is None:
        lines = b"".join(err).decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"worker step failed (exit {rc}): {lines[-1] if lines else 'no output'}")
    return result


def main() -> int:
    """Child process: a pickled :class:`WorkerSpec` on stdin (from our own orchestrator), JSON on stdout."""
    tmp, me = Path(sys.argv[1]), os.getpid()

    def gone(signum: int, _frame: Any) -> None:
        if os.getpid() != me:  # a client process forked with this handler: the default, as before
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        # the worker task died (pdeathsig) or the worker is stopped: nobody reads our result, and nobody
        # else will remove the step bundle
        shutil.rmtree(tmp, ignore_errors=True)
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, gone)
    spec = pickle.loads(sys.stdin.buffer.read())  # noqa: S301 (written by this program's worker_task)
    out = run_share(spec, tmp)
    sys.stdout.write("R " + json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
