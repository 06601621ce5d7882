"""Host metrics (psutil): CPU per CPU, context switches, memory, disks, and per-process groups.

Raw counters only: CPU times in seconds, context switches and interrupts as
counts, disk counters as the kernel reports them. Process groups are recorded
per PID (``procs.server`` / ``procs.client``: pid -> [user_s, system_s,
voluntary_ctx, involuntary_ctx, rss_bytes, read_bytes, write_bytes,
create_time, reaped_user_s, reaped_system_s, ppid, run_delay_s]) so a report can sum per-PID
deltas: a backend that exits or starts mid-interval does not look like a
counter reset of the whole group, and the CPU of one that exited since the last
sample is found in its parent's reaped seconds. run_delay_s is the time the process's threads waited on a
run queue for a CPU (/proc/PID/schedstat; -1 where the kernel keeps no schedstats).
The process rows come straight from /proc (:mod:`collectors.procfs`): through
psutil they were most of this collector's CPU.
Only meaningful for servers on this machine; a remote target gets no server group.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import psutil

from collectors.base import Collector, Metric, Probe
from collectors.diskstats import SECTOR_BYTES, read_diskstats
from collectors.procfs import ProcReader, thread_ctx_switches
from diag.core.errors import ParseError

__all__ = ["CPU_FIELDS", "PROC_FIELDS", "HostCollector", "process_tree", "thread_ctx_switches"]

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
PROC_FIELDS = ("user_s", "system_s", "ctx_voluntary", "ctx_involuntary", "rss_bytes", "read_bytes",
               "write_bytes", "create_time", "reaped_user_s", "reaped_system_s", "ppid", "run_delay_s")


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
               "per block device (/proc/diskstats: reads and writes completed, sectors x 512, ms doing I/O)"),
        Metric("disk.<dev>.{flushes,flush_ms}", "count/ms", "counter",
               "flush requests completed and time flushing, per block device (/proc/diskstats, kernel 5.5+)"),
        Metric("procs.server.<label>.<pid>", "s,count,bytes", "counter",
               "per server process: " + ", ".join(PROC_FIELDS)),
        Metric("procs.client.<pid>", "s,count,bytes", "counter",
               "per workload client process (a Dask worker on this host: it and every process under it): "
               + ", ".join(PROC_FIELDS)),
        Metric("procs.collector.<pid>", "s,count,bytes", "counter",
               "per dbdiag collector process and its children (perf): " + ", ".join(PROC_FIELDS)),
    )

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._procs = ProcReader()

    def probe(self) -> Probe:
        try:
            psutil.cpu_times(percpu=True)
        except Exception as e:  # psutil raises OSError subclasses on an odd /proc
            return Probe(False, f"psutil cannot read CPU times: {e}")
        return Probe(True)

    def _rows(self, pids: list[int] | tuple[int, ...]) -> dict[str, list[float]]:
        """PID (as text) -> process row (:data:`PROC_FIELDS`) of each PID still there."""
        out: dict[str, list[float]] = {}
        for pid in pids:
            row = self._procs.row(pid)
            if row is not None:
                out[str(pid)] = row
        return out

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
        with contextlib.suppress(OSError, ParseError):
            # /proc/diskstats once (psutil's disk_io_counters read it again, with /sys lookups, and has no
            # flush counters; the kernel has them from 5.5 on); psutil's values: sectors are 512 bytes here.
            for dev, ds in read_diskstats(skip=("loop", "ram")).items():
                rec[f"disk.{dev}.reads"] = ds.reads_completed
                rec[f"disk.{dev}.writes"] = ds.writes_completed
                rec[f"disk.{dev}.read_bytes"] = ds.sectors_read * SECTOR_BYTES
                rec[f"disk.{dev}.write_bytes"] = ds.sectors_written * SECTOR_BYTES
                rec[f"disk.{dev}.busy_ms"] = ds.io_time_ms
                if ds.flushes_completed is not None:
                    rec[f"disk.{dev}.flushes"] = ds.flushes_completed
                    rec[f"disk.{dev}.flush_ms"] = ds.flush_time_ms
        procs = self._procs
        procs.begin()
        rec["procs.server"] = {label: self._rows(procs.tree(pid)) for label, pid in self._server_pids().items()}
        getter = self.ctx.client_pids
        # A Dask worker on this host (--workers) forks its share's clients after the step starts: its tree is
        # read each sample, so they are clients here, not "other processes".
        roots = self.ctx.options.get("client_roots")
        rec["procs.client"] = self._rows([*(getter() if callable(getter) else []),
                                          *(p for r in (roots() if callable(roots) else []) for p in procs.tree(r))])
        # dbdiag's own collector processes (and their perf children): measured so a
        # report can tell their cost apart from the server's and the driver's.
        getter = self.ctx.options.get("collector_pids")
        rec["procs.collector"] = self._rows([p for pid in (getter() if callable(getter) else [])
                                             for p in procs.tree(pid)])
        rec["load1"] = os.getloadavg()[0]
        return rec
