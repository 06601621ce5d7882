"""Soak: one long ``dbdiag run`` at the default sampling rates; is the run bounded in disk, memory and CPU?

    python3 -m bench.soak [--duration 3600] [--workload point-select] [--clients 2] [--rate 200]
                          [--every 60] [--out bench/results/DATE-soak.json] [--keep] [--short]

Runs ``dbdiag run embedded:postgres -w WORKLOAD -c CLIENTS -T DURATION --rate RATE --out BUNDLE`` (a
throwaway server, every collector and the mid-step profile as a user gets them) in a subprocess and,
every ``--every`` s, samples:

- the bundle's size (bytes), total and per kind: each series by collector (``host``, ``pg_waits``,
  ``workload``...), ``events``, ``artifacts``, ``json`` (run/results/findings), ``report``;
- RSS, USS and PSS (bytes) and CPU (share of one core since the previous sample) of dbdiag's own processes, told
  apart by what they hold open: the orchestrator (the process started), collectors (children with
  their own file open under the bundle's series/, named by that file), clients (children with a TCP connection
  to the server's port), other (the cleanup supervisor, perf, py-spy); the server's processes apart;
- then the wall time of ``dbdiag report BUNDLE`` (twice: the second with a warm page cache).

The JSON (``--out``) is rewritten after every sample, so a soak cut short still has its figures up to
then (``status`` says how far it got); a table is printed at the end. ``--rate`` keeps the soak cheap
on a shared machine (open loop, transactions/s in total). ``--short``: 8 s measured, a sample every
2 s (the integration test's mode: with the 2 s warm-up, 4-5 samples while the clients run, around the 3 s
mid-step profile). The bundle goes to a temporary folder, removed at the end unless
``--keep``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
SERVER_NAMES = ("postgres", "postmaster", "mariadbd", "mysqld")
RUN_GRACE_S = 600.0   # past the duration: server start, load, warmup, profile, report
REPORT_TIMEOUT_S = 600.0


def bundle_sizes(bundle: Path) -> dict[str, int]:
    """Bytes per kind of file in the bundle (see the module docstring); ``total`` is their sum."""
    out: dict[str, int] = {}
    for p in bundle.rglob("*"):
        try:
            if not p.is_file():
                continue
            size = p.stat().st_size
        except OSError:
            continue  # renamed away (a temp file) between listing and stat
        rel = p.relative_to(bundle)
        if rel.parts[0] == "series":
            kind = "series:" + p.stem.split("--")[0]
        elif rel.parts[0] == "artifacts":
            kind = "artifacts"
        elif p.name == "events.jsonl":
            kind = "events"
        elif p.suffix == ".html":
            kind = "report"
        else:
            kind = "json"
        out[kind] = out.get(kind, 0) + size
    out["total"] = sum(out.values())
    return out


@dataclass
class Proc:
    """One process seen in a sample: its role, RSS, USS and PSS (bytes) and CPU seconds so far.

    USS counts the pages only this process maps. It is not a leak detector on its own: the
    orchestrator forks its collectors and clients, and every page of its heap that either side
    later writes (Python's reference counts and garbage collector write into every object they
    touch) is copied and moves from shared to unique, so USS climbs towards RSS with no byte more
    allocated. RSS (all resident pages) is the one that grows with a leak; PSS splits shared pages
    between the processes that map them.
    """

    role: str
    name: str
    rss: int
    uss: int
    cpu_s: float
    pss: int = 0


def _role(p: psutil.Process, root: psutil.Process, series: str, port: int | None) -> tuple[str, str]:
    """(role, name) of a descendant of the run's process, from what it holds open."""
    name = p.name()
    if name in SERVER_NAMES:
        return "server", name
    if p.exe() != root.exe():
        return "other", name
    for f in p.open_files():
        # Forked children inherit the orchestrator's open workload series: only a collector's own counts.
        if f.path.startswith(series) and not Path(f.path).name.startswith("workload--"):
            return "collectors", Path(f.path).stem
    if port is not None and any(c.raddr and c.raddr[1] == port for c in p.net_connections(kind="inet")):
        return "clients", "client"
    return "other", "python"


def processes(root_pid: int, bundle: Path, port: int | None) -> dict[int, Proc]:
    """The run's process tree now, by PID; processes that end while we look are left out."""
    out: dict[int, Proc] = {}
    try:
        root = psutil.Process(root_pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return out
    series = str(bundle / "series") + os.sep
    for p in tree:
        try:
            with p.oneshot():
                role, name = ("orchestrator", "dbdiag") if p.pid == root_pid else _role(p, root, series, port)
                t = p.cpu_times()
                mem = p.memory_full_info()
                out[p.pid] = Proc(role, name, mem.rss, mem.uss, t.user + t.system, getattr(mem, "pss", 0))
        except psutil.Error:
            continue
    return out


def server_port(bundle: Path) -> int | None:
    """The throwaway server's port, from run.json once the run has identified it."""
    try:
        run = json.loads((bundle / "run.json").read_text())
        return int(run["targets"][0]["port"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


@dataclass
class Sampler:
    """Samples the run every interval; CPU shares come from the previous sample of the same PIDs."""

    root_pid: int
    bundle: Path
    t0: float = field(default_factory=time.monotonic)
    samples: list[dict[str, Any]] = field(default_factory=list)
    _prev: dict[int, Proc] = field(default_factory=dict)
    _prev_t: float = 0.0

    def sample(self) -> dict[str, Any]:
        now = time.monotonic()
        procs = processes(self.root_pid, self.bundle, server_port(self.bundle))
        rec: dict[str, Any] = {"t_s": round(now - self.t0, 1), "bundle_bytes": bundle_sizes(self.bundle)}
        rss: dict[str, int] = {}
        uss: dict[str, int] = {}
        pss: dict[str, int] = {}
        cpu: dict[str, float] = {}
        by_collector: dict[str, float] = {}
        for pid, p in procs.items():
            rss[p.role] = rss.get(p.role, 0) + p.rss
            uss[p.role] = uss.get(p.role, 0) + p.uss
            pss[p.role] = pss.get(p.role, 0) + p.pss
            prev = self._prev.get(pid)
            if prev is not None:
                used = max(0.0, p.cpu_s - prev.cpu_s)
                cpu[p.role] = cpu.get(p.role, 0.0) + used
                if p.role == "collectors":
                    by_collector[p.name.split("--")[0]] = by_collector.get(p.name.split("--")[0], 0.0) + used
        rec["rss_bytes"], rec["uss_bytes"], rec["pss_bytes"] = rss, uss, pss
        rec["collector_rss_bytes"] = {p.name: p.rss for p in procs.values() if p.role == "collectors"}
        rec["processes"] = {role: sum(1 for p in procs.values() if p.role == role) for role in rss}
        if self._prev_t:
            wall = now - self._prev_t
            rec["cpu_core_share"] = {role: round(s / wall, 4) for role, s in cpu.items()}
            rec["collector_cpu_core_share"] = {name: round(s / wall, 4) for name, s in by_collector.items()}
        self._prev, self._prev_t = procs, now
        self.samples.append(rec)
        return rec


def time_report(bundle: Path, times: int = 2) -> dict[str, Any]:
    """Wall seconds of ``dbdiag report BUNDLE``, ``times`` times; exit code and report size of the last."""
    walls: list[float] = []
    rc = -1
    for _ in range(times):
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "diag", "report", str(bundle)], capture_output=True, text=True,
                           cwd=str(ROOT), timeout=REPORT_TIMEOUT_S)
        walls.append(round(time.perf_counter() - t, 3))
        rc = r.returncode
    report = bundle / "report.html"
    return {"wall_s": walls, "rc": rc, "report_bytes": report.stat().st_size if report.exists() else 0}


def _median(xs: list[float]) -> float:
    return round(statistics.median(xs), 4) if xs else 0.0


def summarize(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """RSS, USS and PSS of each role in the first and last quarter (median, bytes), collectors' mean CPU share
    (all, and per collector), bundle sizes."""
    busy = [s for s in samples if s.get("processes", {}).get("clients")]  # while the step ran
    q = max(1, len(busy) // 4)
    out: dict[str, Any] = {"samples": len(samples), "measured_samples": len(busy)}
    for role in ("orchestrator", "collectors", "clients"):
        for mem in ("rss", "uss", "pss"):
            first = [s.get(f"{mem}_bytes", {}).get(role, 0) for s in busy[:q]]
            last = [s.get(f"{mem}_bytes", {}).get(role, 0) for s in busy[-q:]]
            out[f"{role}_{mem}_first_quarter_bytes"] = int(_median(first))
            out[f"{role}_{mem}_last_quarter_bytes"] = int(_median(last))
    shares = [s["cpu_core_share"].get("collectors", 0.0) for s in busy if "cpu_core_share" in s]
    out["collectors_cpu_core_share_mean"] = round(statistics.fmean(shares), 4) if shares else None
    out["collectors_cpu_core_share_max"] = max(shares) if shares else None
    per = [s["collector_cpu_core_share"] for s in busy if "collector_cpu_core_share" in s]
    out["collector_cpu_core_share_mean"] = {n: round(statistics.fmean(x.get(n, 0.0) for x in per), 4)
                                            for n in sorted(set().union(*per))} if per else {}
    if len(busy) >= 2:
        span_h = (busy[-1]["t_s"] - busy[0]["t_s"]) / 3600
        grown = busy[-1]["bundle_bytes"]["total"] - busy[0]["bundle_bytes"]["total"]
        out["bundle_bytes_per_hour"] = int(grown / span_h) if span_h > 0 else None
    out["bundle_bytes_final"] = samples[-1]["bundle_bytes"] if samples else {}
    return out


def _write(path: Path, doc: dict[str, Any]) -> None:
    """Atomically, so a reader (or a soak killed mid-write) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True))
    os.replace(tmp, path)


def run_command(a: argparse.Namespace, bundle: Path) -> list[str]:
    cmd = [sys.executable, "-m", "diag", "run", "embedded:postgres", "-w", a.workload, "-c", str(a.clients),
           "-T", str(a.duration), "--warmup", "2", "--out", str(bundle)]
    return cmd + (["--rate", str(a.rate)] if a.rate else [])


def soak(a: argparse.Namespace, bundle: Path, out: Path) -> dict[str, Any]:
    """Run and sample until the run ends (bounded); the document is rewritten after every sample."""
    cmd = run_command(a, bundle)
    doc: dict[str, Any] = {"command": ["dbdiag", *cmd[3:]], "started": _dt.datetime.now(_dt.timezone.utc)
                           .isoformat(timespec="seconds"), "duration_s": a.duration, "every_s": a.every,
                           "host": {"cpus": os.cpu_count(), "shared": True}, "status": "running",
                           "bundle": str(bundle)}
    log = bundle.parent / f"{bundle.name}.log"
    with open(log, "w") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, cwd=str(ROOT))
        sampler = Sampler(proc.pid, bundle)
        deadline = time.monotonic() + a.duration + RUN_GRACE_S
        try:
            while proc.poll() is None and time.monotonic() < deadline:
                if bundle.exists():
                    sampler.sample()
                    doc.update(samples=sampler.samples, summary=summarize(sampler.samples))
                    _write(out, doc)
                _sleep_until_exit(proc, a.every)
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(60)
    doc["run_rc"] = proc.returncode
    doc["run_log_tail"] = log.read_text(errors="replace").splitlines()[-5:]
    if bundle.exists():
        doc["report"] = time_report(bundle)
    doc["summary"] = summarize(sampler.samples)
    doc["status"] = "complete" if proc.returncode == 0 else f"run exited {proc.returncode}"
    _write(out, doc)
    return doc


def _sleep_until_exit(proc: subprocess.Popen, seconds: float) -> None:
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        pass


def table(doc: dict[str, Any]) -> str:
    """One line per sample: time, bundle MiB, RSS and USS MiB per role, collectors' share of a core."""
    mib = 1 << 20
    lines = [f"{'t s':>7} {'bundle MiB':>10} {'orch RSS/USS':>13} {'coll RSS/USS':>13} {'client RSS/USS':>14} "
             f"{'coll %core':>10}"]
    for s in doc.get("samples", []):
        r, u = s["rss_bytes"], s.get("uss_bytes", {})
        mem = [f"{r.get(k, 0) / mib:.1f}/{u.get(k, 0) / mib:.1f}" for k in ("orchestrator", "collectors", "clients")]
        share = s.get("cpu_core_share", {}).get("collectors")
        lines.append(f"{s['t_s']:>7.0f} {s['bundle_bytes']['total'] / mib:>10.2f} {mem[0]:>13} {mem[1]:>13} "
                     f"{mem[2]:>14} {'' if share is None else f'{100 * share:.2f}':>10}")
    rep = doc.get("report", {})
    lines.append(f"report: {rep.get('wall_s')} s (exit {rep.get('rc')}), run exit {doc.get('run_rc')}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=3600.0, help="seconds measured (one step)")
    p.add_argument("--workload", default="point-select", choices=("point-select", "read-write"))
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--rate", type=float, default=200.0, help="transactions/s in total (0: closed loop)")
    p.add_argument("--every", type=float, default=60.0, help="seconds between samples")
    p.add_argument("--out", type=Path, default=None, help="JSON (default bench/results/DATE-soak[-short].json)")
    p.add_argument("--keep", action="store_true", help="keep the bundle (its path is in the JSON)")
    p.add_argument("--short", action="store_true", help="8 s measured, a sample every 2 s")
    a = p.parse_args(argv)
    if a.short:
        a.duration, a.every = 8.0, 2.0
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    out = a.out or ROOT / "bench" / "results" / f"{date}-soak{'-short' if a.short else ''}.json"
    work = Path(tempfile.mkdtemp(prefix="dbdiag-soak-"))
    bundle = work / "bundle"
    try:
        doc = soak(a, bundle, out)
        if not a.keep:
            doc["bundle"] = None
            _write(out, doc)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(table(doc))
    print(f"written: {out}")
    return 0 if doc.get("run_rc") == 0 and doc.get("report", {}).get("rc") == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
