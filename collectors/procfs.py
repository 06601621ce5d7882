"""Per-process counters read straight from /proc (Linux): the few fields the host series records.

psutil answers a process tree (``Process.children(recursive=True)``) by reading
/proc/*/stat of every process on the machine, once per tree, and builds a full
Process object per row: in the 1-hour soak that was about 80% of the host
collector's CPU (cProfile of ``HostCollector.sample``, BENCHMARKS.md, Soak). Here
a tree comes from the kernel's own child lists (``/proc/PID/task/TID/children``,
CONFIG_PROC_CHILDREN, Linux 3.5+; one scan of /proc per sample where a kernel
lacks them) and a row from three small files (stat, status, io), the same
values psutil reports (CPU seconds, context switches, resident bytes, storage
bytes, start time in Unix seconds).

``proc_root`` is a parameter so tests can feed a saved tree.
"""

from __future__ import annotations

import os
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100   # stat's time unit, per second
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096   # statm's unit
_READ_BYTES = 65536


def _read(path: str | Path) -> str | None:
    """A small /proc file's text; None when it is gone or not ours to read. os.open / os.read: half the CPU
    of open() with its text wrapper (9 against 19 µs a file measured here), and the host collector reads
    dozens a second."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = [os.read(fd, _READ_BYTES)]
        while len(chunks[-1]) == _READ_BYTES:  # /proc hands a file whole when it fits: a short read is its end
            chunks.append(os.read(fd, _READ_BYTES))
        return b"".join(chunks).decode("ascii", "replace")
    except OSError:  # gone while read
        return None
    finally:
        os.close(fd)


def boot_time(proc_root: Path = Path("/proc")) -> float:
    """The boot time in Unix seconds (``btime`` of /proc/stat); 0.0 when it cannot be read."""
    for line in (_read(proc_root / "stat") or "").splitlines():
        if line.startswith("btime"):
            try:
                return float(line.split()[1])
            except (IndexError, ValueError):
                break
    return 0.0


def stat_fields(text: str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first); None for a malformed line.

    The name is in parentheses and may itself hold spaces and ')': split after the last ')'."""
    end = text.rfind(")")
    if end < 0:
        return None
    fields = text[end + 1:].split()
    return fields if len(fields) >= 20 else None


def _field(text: str, name: str) -> int | None:
    """The number after ``name`` (a line start, with its colon) in a /proc key: value text; None when absent."""
    i = text.find(name)
    while i > 0 and text[i - 1] != "\n":  # "voluntary_ctxt_switches:" is also the tail of "nonvoluntary_..."
        i = text.find(name, i + 1)
    if i < 0:
        return None
    end = text.find("\n", i)
    return int(text[i + len(name):end if end >= 0 else None].split()[0])


def status_ctx(text: str) -> tuple[int, int] | None:
    """(voluntary, involuntary) context switches from a /proc/.../status text; None when absent.

    Raises ValueError / IndexError on a malformed value."""
    vol = _field(text, "voluntary_ctxt_switches:")
    invol = _field(text, "nonvoluntary_ctxt_switches:")
    return None if vol is None or invol is None else (vol, invol)


def thread_ctx_switches(pid: int, proc_root: Path = Path("/proc")) -> tuple[int, int] | None:
    """(voluntary, involuntary) context switches summed over all threads of ``pid``.

    /proc/PID/status counts only the main thread, which for a threaded server
    (mysqld: one thread per connection) is nearly idle; each thread's own
    counters are under /proc/PID/task/TID/status. Threads that exited are lost
    (a small undercount between samples).
    """
    vol = invol = 0
    base = f"{proc_root}/{pid}/task"
    try:
        tasks = os.listdir(base)
    except OSError:
        return None
    for tid in tasks:
        try:
            cs = status_ctx(_read(f"{base}/{tid}/status") or "")
        except (ValueError, IndexError):
            cs = None
        if cs is not None:  # else a thread that ended while we read
            vol += cs[0]
            invol += cs[1]
    return vol, invol


def schedstat_run_delay(text: str) -> float | None:
    """Seconds a task waited on a run queue (runnable, no CPU free) from /proc/PID/schedstat's
    "on-CPU ns, run-queue wait ns, timeslices"; None when the kernel has no schedstats (the file is empty)."""
    f = text.split()
    return int(f[1]) / 1e9 if len(f) >= 2 else None


def run_delay(pid: int, threads: int, proc_root: Path = Path("/proc")) -> float | None:
    """Run-queue wait (s) of ``pid``: its own schedstat, or summed over its threads for a threaded process
    (/proc/PID/schedstat is the main thread's only). Threads that exited are lost, as for context switches."""
    if threads <= 1:
        return schedstat_run_delay(_read(f"{proc_root}/{pid}/schedstat") or "")
    base = f"{proc_root}/{pid}/task"
    total, seen = 0.0, False
    for tid in _listdir(base):
        d = schedstat_run_delay(_read(f"{base}/{tid}/schedstat") or "")
        if d is not None:
            total += d
            seen = True
    return round(total, 6) if seen else None


class ProcReader:
    """Process trees and per-process rows from ``proc_root``; make one per collector (boot time read once).

    Call :meth:`begin` at the start of each sample: a kernel without child lists
    gets one scan of every process's parent per sample, shared by all trees.
    """

    def __init__(self, proc_root: Path = Path("/proc")) -> None:
        self.root = Path(proc_root)
        self.btime = boot_time(self.root)
        self._parents: dict[int, list[int]] | None = None
        self._child_lists = (self.root / "self" / "task").exists() and any(
            (self.root / "self" / "task" / t / "children").exists() for t in _listdir(self.root / "self" / "task"))

    def begin(self) -> None:
        """A new sample: forget the last scan of parents."""
        self._parents = None

    def children(self, pid: int) -> list[int]:
        """Direct children of ``pid`` (of every thread of it)."""
        if not self._child_lists:
            return self._scan().get(pid, [])
        out: list[int] = []
        base = f"{self.root}/{pid}/task"
        for tid in _listdir(base):
            out.extend(int(x) for x in (_read(f"{base}/{tid}/children") or "").split() if x.isdigit())
        return out

    def tree(self, pid: int) -> list[int]:
        """``pid`` and all its descendants, parents before children; [] when ``pid`` is gone."""
        if not os.path.exists(f"{self.root}/{pid}"):
            return []
        out, todo, seen = [], [pid], set()
        while todo:
            p = todo.pop(0)
            if p in seen:
                continue
            seen.add(p)
            out.append(p)
            todo.extend(self.children(p))
        return out

    def _scan(self) -> dict[int, list[int]]:
        """parent PID -> child PIDs, from every /proc/PID/stat (the fallback; once per sample)."""
        if self._parents is None:
            self._parents = {}
            for name in _listdir(self.root):
                if not name.isdigit():
                    continue
                f = stat_fields(_read(f"{self.root}/{name}/stat") or "")
                if f is not None:
                    self._parents.setdefault(int(f[1]), []).append(int(name))
        return self._parents

    def row(self, pid: int) -> list[float] | None:
        """[user_s, system_s, ctx_voluntary, ctx_involuntary, rss_bytes, read_bytes, write_bytes, create_time,
        reaped_user_s, reaped_system_s, ppid, run_delay_s] of ``pid`` (collectors.host.PROC_FIELDS); None when it is
        gone or unreadable. Context switches and run-queue waits are summed over the threads of a threaded
        process; storage bytes are 0 where /proc/PID/io is not readable; run_delay_s is -1.0 where the kernel
        keeps no schedstats."""
        d = f"{self.root}/{pid}"
        f = stat_fields(_read(f"{d}/stat") or "")
        status = _read(f"{d}/status")
        if f is None or status is None:
            return None
        try:
            rss = _rss_bytes(status, d)
            if rss is None:
                return None
            cs = status_ctx(status) if int(f[17]) <= 1 else thread_ctx_switches(pid, self.root)
            if cs is None:
                return None
            io = _read(f"{d}/io") or ""
            rd, wr = _field(io, "read_bytes:") or 0, _field(io, "write_bytes:") or 0
            # cutime/cstime (the CPU of children it waited for) and the parent PID: a child that exits between
            # two samples is in its parent's c*time at the next one, which is how a report keeps its last
            # interval (reports.model.series.group_deltas).
            # The run-queue wait: a server thread that is runnable but has no CPU is "active" to the wait
            # sampler and not on a CPU; this tells that time apart from waits the server does not instrument.
            delay = run_delay(pid, int(f[17]), self.root)
            return [round(int(f[11]) / CLK_TCK, 3), round(int(f[12]) / CLK_TCK, 3), cs[0], cs[1],
                    rss, rd, wr, round(self.btime + int(f[19]) / CLK_TCK, 3),
                    round(int(f[13]) / CLK_TCK, 3), round(int(f[14]) / CLK_TCK, 3), int(f[1]),
                    -1.0 if delay is None else delay]
        except (ValueError, IndexError):
            return None


def _rss_bytes(status: str, d: str) -> int | None:
    """Resident bytes: status's VmRSS (statm's resident pages, in KiB: one file fewer a row), else statm."""
    kib = _field(status, "VmRSS:")
    if kib is not None:
        return kib * 1024
    statm = (_read(f"{d}/statm") or "").split()
    return int(statm[1]) * PAGE_BYTES if len(statm) >= 2 else None


def _listdir(path: str | Path) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
