"""Flush calls made by a local server's processes, and flush requests its data device completed.

Needs the server on this machine: ``perf`` (Debian: linux-perf) allowed to count
tracepoints on the server's processes (root, or CAP_PERFMON plus read access to
/sys/kernel/tracing), and Linux 5.5+ for the device flush counter in
/proc/diskstats. Engine counters (pg_stat_wal / pg_stat_io ``wal_sync``,
``Innodb_data_fsyncs``) are the engine collectors' business, not this one's.

Sources (each record lists the ones it used in ``sources``):

* ``perf stat -I`` on the tracepoints ``syscalls:sys_enter_fsync``,
  ``sys_enter_fdatasync`` and ``sys_enter_sync_file_range``: system calls
  entered by the server's processes.
* the same ``perf stat`` on the filesystem's per-file sync tracepoint
  (ext4 ``ext4:ext4_sync_file_enter``, xfs ``xfs:xfs_file_fsync``, btrfs
  ``btrfs:btrfs_sync_file``). The kernel runs it for fsync and fdatasync and
  also for every write to a file opened with O_SYNC/O_DSYNC (generic_write_sync
  calls the filesystem's fsync), so it counts PostgreSQL's
  ``wal_sync_method=open_datasync`` and InnoDB's ``O_DSYNC`` log writes that no
  syscall count shows (measured here: 1.00 per commit with open_datasync and 0
  fdatasync calls). It misses O_DIRECT|O_DSYNC writes that the block layer
  completes with FUA on devices that support it, and writes completed
  asynchronously (io_uring/libaio) in a kernel worker.
* /proc/diskstats flush requests completed (and milliseconds spent flushing)
  by the disk(s) under the data directory and, for PostgreSQL, under pg_wal.
  Device-wide: flushes by every process on the machine count.

Which processes: ``perf stat -p`` takes the postmaster / mysqld and every
process below it at start, and perf's counters are inherited (its default), so
every process or thread those fork later (PostgreSQL backends, MariaDB
connection threads) is counted too, live, until it exits (measured: 1.00
fdatasync per commit from backends that connected after perf started). A
process forked between the listing and perf's attach (about 0.1 s) is missed,
which is why the durability probe starts its clients after this collector's
first record. The alternatives were worse: ``perf stat -a`` counts every
process on the machine, cgroups are not available for servers we did not
start, and ``-p`` without inheritance misses every new backend.

Cost: ``perf trace`` of all syscalls cut TPS by 60% here. Counting these
tracepoints instead makes every system call on the machine (any process: the
kernel switches all tasks to its tracepoint entry path) about 55 ns slower,
measured here as getppid() going from 215 to 271 ns with perf attached to
another process. An insert commit (hundreds of µs) makes about ten system calls
(<0.5%); a loopback point select (~50 µs, 6-8 calls client and server) ~1%.

Records are cumulative counters since the collector started (rates come from
:mod:`collectors.rates`): ``syscalls.fsync``, ``syscalls.fdatasync``,
``syscalls.sync_file_range``, ``fs.sync_file``, ``device.<name>.flushes``,
``device.<name>.flush_ms``, plus ``sources``. One record per perf interval
(``interval_s``, 1 s by default, ``options["flush_interval_s"]`` to change), its
``t`` taken when perf printed the interval, with the device counters read at
that moment so both cover the same time.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import psutil

from collectors.base import Collector, CollectorContext, Metric, Probe
from collectors.diskstats import DeviceInfo, device_for_path, read_diskstats
from collectors.flush_perf import (MIN_INTERVAL_S, IntervalAssembler, perf_error_reason,
                                   perf_stat_argv, probe_perf_tracepoints)
from diag.core.engines import Engine
from diag.core.errors import DiagError, ParseError, ToolUnavailable
from diag.core.procs import pdeathsig_preexec

SYSCALL_EVENTS = {
    "syscalls.fsync": "syscalls:sys_enter_fsync",
    "syscalls.fdatasync": "syscalls:sys_enter_fdatasync",
    "syscalls.sync_file_range": "syscalls:sys_enter_sync_file_range",
}
# Filesystem tracepoints that fire once per file sync, including O_SYNC/O_DSYNC writes.
FS_SYNC_EVENTS = {
    "ext4": "ext4:ext4_sync_file_enter",
    "xfs": "xfs:xfs_file_fsync",
    "btrfs": "btrfs:btrfs_sync_file",
}
FS_KEY = "fs.sync_file"

PERF_HINT = ("install perf (Debian: apt-get install linux-perf) and run dbdiag as root, or grant CAP_PERFMON "
             "and make tracepoints readable (mount -o remount,mode=755 /sys/kernel/tracing)")
REMOTE_HINT = "run dbdiag on the database host to count its flush calls"
START_RETRIES = 4  # a listed backend that exits before perf attaches makes perf fail; list again
START_CHECK_S = 0.3  # how long to watch a new perf for an immediate failure
STOP_TIMEOUT_S = 5.0

METRICS: tuple[Metric, ...] = (
    Metric("syscalls.fsync", "calls", "counter", "fsync() calls by the server's processes (perf tracepoint)"),
    Metric("syscalls.fdatasync", "calls", "counter", "fdatasync() calls by the server's processes"),
    Metric("syscalls.sync_file_range", "calls", "counter",
           "sync_file_range() calls by the server's processes: start writeback, never flush a device cache"),
    Metric(FS_KEY, "syncs", "counter", "file syncs run by the data directory's filesystem for the server's "
           "processes: fsync, fdatasync and O_SYNC/O_DSYNC writes (ext4, xfs, btrfs)"),
    Metric("device.<name>.flushes", "requests", "counter",
           "flush requests completed by the data directory's disk, all processes (/proc/diskstats, Linux 5.5+)"),
    Metric("device.<name>.flush_ms", "ms", "counter", "time the disk spent on flush requests (/proc/diskstats)"),
)


# --------------------------------------------------------------------------- processes and devices


def server_processes(pid: int) -> list[int]:
    """The server process and every process below it (PostgreSQL: postmaster, auxiliaries, backends)."""
    try:
        root = psutil.Process(pid)
        return [pid, *(c.pid for c in root.children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def flush_paths(engine: Engine, data_dir: str) -> list[Path]:
    """Directories whose disks take the server's commit flushes: the data directory, and its log folder (pg_wal)."""
    paths = [Path(data_dir)]
    if engine.log_directory:
        wal = Path(data_dir) / engine.log_directory
        with contextlib.suppress(OSError):
            real = wal.resolve()
            if real.is_dir() and os.stat(real).st_dev != os.stat(data_dir).st_dev:
                paths.append(real)  # the log folder symlinked to another filesystem
    return paths


def devices_of(paths: Iterable[Path]) -> list[DeviceInfo]:
    """The device info of each path (distinct filesystems only)."""
    out: list[DeviceInfo] = []
    seen: set[tuple[str | None, str | None]] = set()
    for p in paths:
        info = device_for_path(p)
        key = (info.mount_point, info.name)
        if key not in seen:
            seen.add(key)
            out.append(info)
    return out


def device_counters(devices: Iterable[str], proc_root: Path = Path("/proc")) -> dict[str, int | None]:
    """``device.<name>.flushes`` and ``.flush_ms`` now (None where the kernel has no flush counter)."""
    out: dict[str, int | None] = {}
    names = list(devices)
    if not names:
        return out
    stats = read_diskstats(proc_root)
    for name in names:
        s = stats.get(name)
        out[f"device.{name}.flushes"] = None if s is None else s.flushes_completed
        out[f"device.{name}.flush_ms"] = None if s is None else s.flush_time_ms
    return out


# --------------------------------------------------------------------------- collector


class FlushCollector(Collector):
    """Flush system calls by the server's processes and device flushes, per interval (local servers only)."""

    name = "flush"
    title = "flush tracing"
    metrics = METRICS
    interval_s = 1.0
    ready_timeout_s: ClassVar[float | None] = 10.0  # perf attaches within a second here; clients wait for its first record

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.perf = str(ctx.options.get("perf", "perf"))
        self.perf_interval_s = max(MIN_INTERVAL_S, float(ctx.options.get("flush_interval_s") or 1.0))
        self.events: dict[str, str] = {}  # record key -> perf event
        self.devices: list[str] = []
        self.fs_types: list[str] = []
        self.sources: list[str] = []
        self.notes: list[str] = []
        self._probed = False
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        self._queue: deque[dict[str, Any]] = deque()
        self._totals: dict[str, int] = {}
        self._assembler: IntervalAssembler | None = None
        self._pids: list[int] = []

    # ----------------------------------------------------------------- probe

    def probe(self) -> Probe:
        """Local server, perf tracepoints countable on it, device counters: which sources work."""
        self._probed = True
        t = self.ctx.target
        pid = self.ctx.server_pid
        if not t.is_local() or not pid:
            return Probe(False, "the server is not on this machine (or its process was not found): "
                         "its flush calls cannot be counted from here", REMOTE_HINT)
        if not psutil.pid_exists(pid):
            return Probe(False, f"server process {pid} is not running", REMOTE_HINT)
        missing = self._probe_devices()
        fs_events = [FS_SYNC_EVENTS[f] for f in self.fs_types if f in FS_SYNC_EVENTS]
        ok, why = probe_perf_tracepoints(pid, [*SYSCALL_EVENTS.values(), *fs_events], self.perf)
        if ok:
            self.events = {**SYSCALL_EVENTS, **({FS_KEY: ",".join(fs_events)} if fs_events else {})}
        elif fs_events:
            ok, why2 = probe_perf_tracepoints(pid, list(SYSCALL_EVENTS.values()), self.perf)
            if ok:
                self.events = dict(SYSCALL_EVENTS)
                missing.append(f"filesystem syncs ({', '.join(fs_events)}): {why}")
            else:
                why = why2
        if not ok:
            self.events = {}
            have = (f"device flush counters of {', '.join(self.devices)} are readable but do not say which "
                    "process flushed" if self.devices else "no other flush source works either")
            return Probe(False, f"perf cannot count flush system calls: {why}; {have}", PERF_HINT,
                         tuple(missing))
        if FS_KEY not in self.events:
            fs_list = ", ".join(self.fs_types) or "unknown"
            missing.append(f"O_SYNC/O_DSYNC writes are not counted: no file-sync tracepoint for the {fs_list} "
                           "filesystem")
        self.sources = self._source_names()
        return Probe(True, "sources: " + ", ".join(self.sources), "", tuple(missing))

    def _probe_devices(self) -> list[str]:
        """Find the disks under the data directory (and its log folder) with a flush counter: what is missing."""
        t = self.ctx.target
        missing: list[str] = []
        self.devices, self.fs_types = [], []
        if self.ctx.data_dir:
            try:
                infos = devices_of(flush_paths(t.dbms, self.ctx.data_dir))
            except DiagError as e:
                infos = []
                missing.append(f"device flushes: {e}")
            for info in infos:
                if info.fs_type and info.fs_type not in self.fs_types:
                    self.fs_types.append(info.fs_type)
                if info.name is None:
                    missing.append(f"device flushes: {info.reason}")
                    continue
                for d in info.stat_devices:
                    if d not in self.devices:
                        self.devices.append(d)
        else:
            missing.append("device flushes: the server's data directory is not known")
        if self.devices:
            try:
                now = device_counters(self.devices)
            except DiagError as e:
                missing.append(f"device flushes: {e}")
                self.devices = []
            else:
                if any(v is None for k, v in now.items() if k.endswith(".flushes")):
                    missing.append("device flushes: this kernel has no flush counter in /proc/diskstats "
                                   "(needs Linux 5.5+)")
                    self.devices = []
        return missing

    def _source_names(self) -> list[str]:
        out = []
        if self.events:
            out.append("perf:" + ",".join(e for k, e in self.events.items()))
        out += [f"diskstats:{d}" for d in self.devices]
        return out

    # ----------------------------------------------------------------- run

    def start(self) -> None:
        if not self._probed:
            p = self.probe()
            if not p.ok:
                raise ToolUnavailable(f"flush: {p.reason}")
        if not self.events:
            raise ToolUnavailable("flush: perf tracepoints were not available at probe time")
        assert self.ctx.server_pid is not None
        exe = shutil.which(self.perf) or self.perf
        perf_events = [e for v in self.events.values() for e in v.split(",")]
        self._totals = {k: 0 for k in self.events}
        last = ""
        for _ in range(START_RETRIES):
            pids = server_processes(self.ctx.server_pid)
            if not pids:
                raise DiagError(f"flush: server process {self.ctx.server_pid} is gone")
            baseline = self._baseline()
            proc = subprocess.Popen(perf_stat_argv(exe, perf_events, pids, self.perf_interval_s),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    text=True, bufsize=1, preexec_fn=pdeathsig_preexec(), start_new_session=True)
            deadline = time.monotonic() + START_CHECK_S
            while time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.02)
            if proc.poll() is None:
                self._proc, self._pids = proc, pids
                break
            err = proc.stderr.read() if proc.stderr else ""
            last = perf_error_reason(err)
            if "exited before perf could attach" not in last:
                raise ToolUnavailable(f"flush: perf stat failed: {last}")
        else:
            raise ToolUnavailable(f"flush: perf stat failed {START_RETRIES} times: {last}")
        self._assembler = IntervalAssembler(perf_events)
        self._queue.append(baseline)
        self._reader = threading.Thread(target=self._read_perf, name="dbdiag-flush-perf", daemon=True)
        self._reader.start()

    def _baseline(self) -> dict[str, Any]:
        rec: dict[str, Any] = {"t": time.time(), **{k: 0 for k in self.events}, "sources": self.sources}
        rec.update(self._devices_now())
        return rec

    def _devices_now(self) -> dict[str, int | None]:
        if not self.devices:
            return {}
        try:
            return device_counters(self.devices)
        except DiagError:
            return {f"device.{d}.flushes": None for d in self.devices}

    def _read_perf(self) -> None:
        """Reader thread: turns perf's interval lines into cumulative records as they arrive."""
        assert self._proc is not None and self._proc.stderr is not None and self._assembler is not None
        for line in self._proc.stderr:
            try:
                done = self._assembler.feed(line)
            except ParseError as e:
                self._assembler.messages.append(str(e))
                continue
            if done is not None:
                self._add_interval(*done)
        done = self._assembler.flush()
        if done is not None:
            self._add_interval(*done)

    def _add_interval(self, t_rel: float, counts: dict[str, int | None]) -> None:
        now = time.time()
        devs = self._devices_now()
        with self._lock:
            for key, evs in self.events.items():
                vals = [counts.get(e) for e in evs.split(",")]
                self._totals[key] += sum(v for v in vals if v is not None)
            rec: dict[str, Any] = {"t": now, **self._totals, **devs, "perf_t": round(t_rel, 3),
                                   "sources": self.sources}
            absent = [e for evs in self.events.values() for e in evs.split(",") if counts.get(e) is None]
            if absent:
                rec["incomplete"] = absent  # perf printed no count for these in this interval
            self._queue.append(rec)

    def sample(self) -> list[dict[str, Any]] | None:
        with self._lock:
            out = list(self._queue)
            self._queue.clear()
        if not out and self._proc is not None and self._proc.poll() is not None:
            msgs = " | ".join(self._assembler.messages) if self._assembler else ""
            alive = self.ctx.server_pid is not None and psutil.pid_exists(self.ctx.server_pid)
            why = "the server's processes are gone" if not alive else (perf_error_reason(msgs) if msgs else
                                                                     f"exit code {self._proc.returncode}")
            raise DiagError(f"flush: perf stat stopped: {why}")
        return out or None

    def stop(self) -> list[dict[str, Any]] | None:
        """Stop perf (SIGINT: it prints the last, partial interval) and return what is left."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT_S)
        if self._reader is not None:
            self._reader.join(STOP_TIMEOUT_S)
        with self._lock:
            out = list(self._queue)
            self._queue.clear()
        return out or None


class DeviceFlushCollector(FlushCollector):
    """The device flushes of :class:`FlushCollector` without perf: what ``dbdiag run`` samples through the
    measured part, while the flush calls are counted in each step's tail (:mod:`collectors.flush_tail`),
    where counting them does not slow the figures (BENCHMARKS.md: ~10% of MariaDB read-write)."""

    title = "device flushes"
    metrics = tuple(m for m in METRICS if m.name.startswith("device."))
    ready_timeout_s = None  # nothing to attach: backends forked before the first record are not missed

    def probe(self) -> Probe:
        self._probed = True
        pid = self.ctx.server_pid
        if not self.ctx.target.is_local() or not pid:
            return Probe(False, "the server is not on this machine (or its process was not found): "
                         "its disk's flushes cannot be read from here", REMOTE_HINT)
        missing = self._probe_devices()
        note = str(self.ctx.options.get("flush_note") or "")
        if not self.devices:
            return Probe(False, "no flush counter for the server's disk" + (f": {missing[0]}" if missing else ""),
                         "", tuple(missing[1:]) + ((note,) if note else ()))
        if note:  # why the server's own flush calls are not counted (a watch without --flush-trace)
            missing.append(note)
        self.sources = [f"diskstats:{d}" for d in self.devices]
        return Probe(True, "sources: " + ", ".join(self.sources), "", tuple(missing))

    def start(self) -> None:
        if not self._probed and not self.probe().ok:
            raise ToolUnavailable("flush: no device flush counter")

    def sample(self) -> list[dict[str, Any]] | None:
        return [{"t": time.time(), **self._devices_now(), "sources": self.sources}]

    def stop(self) -> list[dict[str, Any]] | None:
        return self.sample()
