"""Host metrics (psutil): CPU per CPU, context switches, memory, disks, and per-process groups.

Raw counters only: CPU times in seconds, context switches and interrupts as
counts, disk counters as the kernel reports them. Process groups are recorded
per PID (``procs.server`` / ``procs.client``: pid -> [user_s, system_s,
voluntary_ctx, involuntary_ctx, rss_bytes, read_bytes, write_bytes,
create_time]) so a report can sum per-PID deltas: a backend that exits or
starts mid-interval does not look like a counter reset of the whole group.
Only meaningful for servers on this machine; a remote target gets no server group.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import psutil

from collectors.base import Collector, Metric, Probe
from collectors.diskstats import read_diskstats
from diag.errors import ParseError

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
PROC_FIELDS = ("user_s", "system_s", "ctx_voluntary", "ctx_involuntary", "rss_bytes", "read_bytes",
               "write_bytes", "create_time")


def thread_ctx_switches(pid: int, proc_root: Path = Path("/proc")) -> tuple[int, int] | None:
    """(voluntary, involuntary) context switches summed over all threads of ``pid``.

    /proc/PID/status counts only the main thread, which for a threaded server
    (mysqld: one thread per connection) is nearly idle; each thread's own
    counters are under /proc/PID/task/TID/status. Threads that exited are lost
    (a small undercount between samples).
    """
    vol = invol = 0
    try:
        tasks = list((proc_root / str(pid) / "task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    vol += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    invol += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended while we read
    return vol, invol


def _proc_row(p: psutil.Process) -> list[float] | None:
    """Raw counters of one process (None when it is gone or not readable)."""
    try:
        with p.oneshot():
            ct = p.cpu_times()
            cs = p.num_ctx_switches()
            if p.num_threads() > 1:
                summed = thread_ctx_switches(p.pid)
                if summed is not None:
                    cs = type(cs)(*summed)
            mem = p.memory_info()
            io = None
            with contextlib.suppress(psutil.AccessDenied, AttributeError):
                io = p.io_counters()
            return [round(ct.user, 3), round(ct.system, 3), cs.voluntary, cs.involuntary, mem.rss,
                    io.read_bytes if io else 0, io.write_bytes if io else 0, round(p.create_time(), 3)]
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


def process_tree(pid: int) -> list[psutil.Process]:
    """A process and all its descendants (PostgreSQL: postmaster and backends)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


class HostCollector(Collector):
    """Machine-wide CPU, context switches, memory, disks; server and client process groups."""

    name = "host"
    interval_s = 1.0
    per_target = False
    metrics = (
        *(Metric(f"cpu.{i}.{f}", "s", "counter", f"CPU time in {f} mode, per CPU") for i in ("all",)
          for f in CPU_FIELDS),
        Metric("ctx_switches", "count", "counter", "context switches, whole machine"),
        Metric("interrupts", "count", "counter", "interrupts, whole machine"),
        Metric("mem.used", "bytes", "gauge", "memory in use"),
        Metric("mem.available", "bytes", "gauge", "memory available"),
        Metric("disk.<dev>.{reads,writes,read_bytes,write_bytes,busy_ms}", "count/bytes/ms", "counter",
               "per block device, from psutil"),
        Metric("disk.<dev>.{flushes,flush_ms}", "count/ms", "counter",
               "flush requests completed and time flushing, per block device (/proc/diskstats, kernel 5.5+)"),
        Metric("procs.server.<label>.<pid>", "s,count,bytes", "counter",
               "per server process: " + ", ".join(PROC_FIELDS)),
        Metric("procs.client.<pid>", "s,count,bytes", "counter",
               "per workload client process: " + ", ".join(PROC_FIELDS)),
        Metric("procs.collector.<pid>", "s,count,bytes", "counter",
               "per dbdiag collector process and its children (perf): " + ", ".join(PROC_FIELDS)),
    )

    def probe(self) -> Probe:
        try:
            psutil.cpu_times(percpu=True)
        except Exception as e:  # psutil raises OSError subclasses on an odd /proc
            return Probe(False, f"psutil cannot read CPU times: {e}")
        return Probe(True)

    def _server_pids(self) -> dict[str, int]:
        return dict(self.ctx.options.get("server_pids", {}))

    def sample(self) -> dict[str, Any]:
        rec: dict[str, Any] = {}
        per = psutil.cpu_times(percpu=True)
        for i, ct in enumerate(per):
            for f in CPU_FIELDS:
                rec[f"cpu.{i}.{f}"] = round(getattr(ct, f, 0.0), 3)
        for f in CPU_FIELDS:
            rec[f"cpu.all.{f}"] = round(sum(getattr(ct, f, 0.0) for ct in per), 3)
        rec["ncpu"] = len(per)
        st = psutil.cpu_stats()
        rec["ctx_switches"] = st.ctx_switches
        rec["interrupts"] = st.interrupts
        vm = psutil.virtual_memory()
        rec["mem.used"] = vm.used
        rec["mem.available"] = vm.available
        with contextlib.suppress(Exception):
            for dev, d in (psutil.disk_io_counters(perdisk=True) or {}).items():
                if dev.startswith(("loop", "ram")):
                    continue
                rec[f"disk.{dev}.reads"] = d.read_count
                rec[f"disk.{dev}.writes"] = d.write_count
                rec[f"disk.{dev}.read_bytes"] = d.read_bytes
                rec[f"disk.{dev}.write_bytes"] = d.write_bytes
                rec[f"disk.{dev}.busy_ms"] = getattr(d, "busy_time", 0)
        with contextlib.suppress(OSError, ParseError):
            # psutil has no flush counters; the kernel's /proc/diskstats has them from 5.5 on.
            for dev, st in read_diskstats().items():
                if st.flushes_completed is not None and not dev.startswith(("loop", "ram")):
                    rec[f"disk.{dev}.flushes"] = st.flushes_completed
                    rec[f"disk.{dev}.flush_ms"] = st.flush_time_ms
        server: dict[str, dict[str, list[float]]] = {}
        for label, pid in self._server_pids().items():
            rows = {}
            for p in process_tree(pid):
                row = _proc_row(p)
                if row is not None:
                    rows[str(p.pid)] = row
            server[label] = rows
        rec["procs.server"] = server
        clients: dict[str, list[float]] = {}
        getter = self.ctx.client_pids
        pids = getter() if callable(getter) else []
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                row = _proc_row(psutil.Process(pid))
                if row is not None:
                    clients[str(pid)] = row
        rec["procs.client"] = clients
        # dbdiag's own collector processes (and their perf children): measured so a
        # report can tell their cost apart from the server's and the driver's.
        own: dict[str, list[float]] = {}
        getter = self.ctx.options.get("collector_pids")
        for pid in (getter() if callable(getter) else []):
            for proc in process_tree(pid):
                row = _proc_row(proc)
                if row is not None:
                    own[str(proc.pid)] = row
        rec["procs.collector"] = own
        rec["load1"] = os.getloadavg()[0]
        return rec
