"""Reading a process tree from ``/proc`` under a ``proc_root`` (tests pass a saved tree): names, titles, start
times, children. Needs no privilege. The engines' process roles (collectors/pg/procs.py,
collectors/mysql/procs.py) and :mod:`collectors.profile.procs` read through these.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None


def _stat_fields(pid: int, proc_root: Path) -> list[str] | None:
    """Fields of /proc/PID/stat after the comm (which may hold spaces and parens)."""
    text = _read(proc_root / str(pid) / "stat")
    if text is None or ")" not in text:
        return None
    return text[text.rindex(")") + 1:].split()


def start_times(pids: Iterable[int], proc_root: Path = PROC) -> dict[int, int]:
    """pid -> start time (clock ticks since boot) of the live, non-zombie ``pids``."""
    out: dict[int, int] = {}
    for pid in pids:
        f = _stat_fields(pid, proc_root)
        if f is not None and len(f) > 19 and f[0] not in ("Z", "X"):
            out[pid] = int(f[19])
    return out


def same_process(pid: int, start: int, proc_root: Path = PROC) -> bool:
    """Whether ``pid`` is still the process that started at ``start`` (ticks since boot)."""
    # Comparing start times keeps a recycled pid from passing for the old process.
    return start_times([pid], proc_root).get(pid) == start


def read_cmdline(pid: int, proc_root: Path = PROC) -> str:
    """/proc/PID/cmdline with its NUL separators as spaces ("" when unreadable)."""
    raw = _read(proc_root / str(pid) / "cmdline") or ""
    # PostgreSQL overwrites argv with its title and pads with NULs or spaces.
    return " ".join(part for part in raw.split("\0") if part).strip()


def read_comm(pid: int, proc_root: Path = PROC, tid: int | None = None) -> str:
    """The process name (or thread ``tid``'s name) from /proc ("" when unreadable)."""
    p = proc_root / str(pid) / "task" / str(tid) / "comm" if tid else proc_root / str(pid) / "comm"
    return (_read(p) or "").strip()


def children(ppid: int, proc_root: Path) -> list[int]:
    out: list[int] = []
    try:
        entries = list(proc_root.iterdir())
    except OSError:
        return out
    for entry in entries:
        if entry.name.isdigit():
            f = _stat_fields(int(entry.name), proc_root)
            if f is not None and len(f) > 1 and f[1] == str(ppid):
                out.append(int(entry.name))
    return sorted(out)
