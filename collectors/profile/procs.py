"""Which server role a process or thread plays: PostgreSQL process titles, mysqld thread names, stacks.

Everything here reads ``/proc`` under a ``proc_root`` (tests pass a saved
tree) and needs no privilege. The engine of a process comes from its name
(:attr:`Engine.process_names`, :attr:`Engine.process_title_prefix`); how its
processes or threads are told apart is registered per engine below.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from collectors.profile.parse import KindOf, Sample
from diag.engines import ENGINES, MYSQL, POSTGRES, Engine

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


# --------------------------------------------------------------------------- PostgreSQL

_PG_AUX = {
    "checkpointer": "checkpointer",
    "background writer": "bgwriter",
    "walwriter": "walwriter",
    "autovacuum launcher": "autovacuum launcher",
    "autovacuum worker": "autovacuum worker",
    "logical replication launcher": "logical replication launcher",
    "stats collector": "stats collector",
    "archiver": "archiver",
    "startup": "startup",
    "walreceiver": "walreceiver",
    "walsummarizer": "walsummarizer",
    "io worker": "io worker",
}
_PG_PREFIX = [  # titles that carry details after a fixed start
    ("autovacuum: ", "autovacuum worker"),
    ("autovacuum worker", "autovacuum worker"),
    ("walsender ", "walsender"),
    ("walreceiver ", "walreceiver"),
    ("startup ", "startup"),
    ("archiver ", "archiver"),
    ("parallel worker for PID", "parallel worker"),
    ("logical replication worker", "logical replication worker"),
    ("logical replication apply worker", "logical replication worker"),
    ("logical replication tablesync worker", "logical replication worker"),
    ("logical replication parallel apply worker", "logical replication worker"),
]
# "user db host(port) state" or "user db [local] state" (no state before the first
# query, nor ever with update_process_title off).
_PG_BACKEND = re.compile(r"^\S+ \S+ (\[local\]|\S+\(\d+\))( .*)?$")


def postgres_title_kind(cmdline: str) -> str:
    """The role of a PostgreSQL process from its title (``/proc/PID/cmdline``).

    "postgres: 15/main: walwriter" -> "walwriter" (Debian puts ``cluster_name``
    first); "postgres: app shop 10.0.0.5(41000) idle" -> "backend"; the
    postmaster (title untouched: the binary path) -> "postmaster"; other
    background workers -> "bgworker".
    """
    title = cmdline.strip()
    prefix = POSTGRES.process_title_prefix
    if not title.startswith(prefix):
        return "postmaster" if title else "postgres"
    rest = title[len(prefix):].strip()
    for candidate in _title_candidates(rest):
        if candidate in _PG_AUX:
            return _PG_AUX[candidate]
        for start, kind in _PG_PREFIX:
            if candidate.startswith(start):
                return kind
    for candidate in _title_candidates(rest):
        if _PG_BACKEND.match(candidate):
            return "backend"
    return "bgworker"


def _title_candidates(rest: str) -> list[str]:
    # With cluster_name set the title is "<cluster>: <what>"; try both readings.
    out = [rest]
    if ": " in rest:
        out.append(rest.split(": ", 1)[1].strip())
    return out


def postgres_process_kinds(postmaster_pid: int, proc_root: Path = PROC) -> dict[int, str]:
    """pid -> kind for the postmaster and its children, from their process titles.

    Reads ``/proc/*/stat`` (parent pid) and ``/proc/PID/cmdline``; needs no
    privilege. Titles stay as first set when ``update_process_title`` is off,
    which still names each role.
    """
    kinds = {postmaster_pid: "postmaster"}
    for pid in _children(postmaster_pid, proc_root):
        kinds[pid] = postgres_title_kind(read_cmdline(pid, proc_root))
    return kinds


def _children(ppid: int, proc_root: Path) -> list[int]:
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


def _postgres_kinds(pid: int, proc_root: Path) -> dict[int, str]:
    # One process per role: the pid is the only "thread".
    return {pid: postgres_title_kind(read_cmdline(pid, proc_root))}


# --------------------------------------------------------------------------- MySQL / MariaDB


def mysql_thread_kind(thread_name: str, program: str = "mariadbd") -> str:
    """A mysqld/mariadbd thread's role from its name (``/proc/PID/task/TID/comm``).

    MySQL 8 names threads ("connection", "ib_io_rd-1", "ib_pg_flush_co");
    MariaDB 10.11 leaves them all as the program name, which gives "thread"
    (unknown: :func:`stack_thread_kinds` tells them apart).
    """
    name = thread_name.strip()
    low = name.lower()
    if not name or name == program or low in MYSQL.process_names:
        return "thread"
    if "connection" in low or low.startswith("tp_") or "thread_pool" in low:
        return "connection"
    if low.startswith(("ib_", "innodb", "page_cleaner", "io_", "buf_")):
        return "innodb"
    return low


def mysql_thread_kinds(pid: int, proc_root: Path = PROC) -> dict[int, str]:
    """tid -> kind for each thread of a mysqld/mariadbd process (see :func:`mysql_thread_kind`)."""
    program = read_comm(pid, proc_root)
    out: dict[int, str] = {}
    try:
        tids = [int(t.name) for t in (proc_root / str(pid) / "task").iterdir() if t.name.isdigit()]
    except OSError:
        return out
    for tid in sorted(tids):
        out[tid] = mysql_thread_kind(read_comm(pid, proc_root, tid), program)
    return out


# The function a thread starts in names its role; checked leaf-to-root on each stack.
_THREAD_ENTRY = (
    ("do_handle_one_connection", "connection"),
    ("handle_one_connection", "connection"),
    ("tp_callback", "connection"),
    ("buf_flush_page_cleaner", "innodb"),
    ("tpool::thread_pool_generic::worker_main", "innodb"),
    ("signal_hand", "signal"),
    ("handle_manager", "manager"),
    ("ma_checkpoint_background", "aria"),
)


def stack_thread_kinds(samples: Iterable[Sample]) -> dict[int, str]:
    """tid -> kind from thread entry functions seen in the stacks (mysqld/mariadbd).

    A thread with any stack through ``handle_one_connection`` serves a client
    connection; InnoDB's thread pool and page cleaner are "innodb". Threads
    whose stacks show no known entry get no entry here.
    """
    entries = dict(_THREAD_ENTRY)
    out: dict[int, str] = {}
    for s in samples:
        if out.get(s.tid) == "connection":
            continue
        for frame in s.frames:
            kind = entries.get(frame)
            if kind is not None:
                if out.get(s.tid) is None or kind == "connection":
                    out[s.tid] = kind
                break
    return out


# --------------------------------------------------------------------------- any server

# How each engine's processes name their roles: pid -> {tid: kind}.
_KINDS_OF: Mapping[str, Callable[[int, Path], dict[int, str]]] = {
    POSTGRES.name: _postgres_kinds,
    MYSQL.name: mysql_thread_kinds,
}


def engine_of_process(pid: int, proc_root: Path = PROC) -> Engine | None:
    """The engine whose server program ``pid`` runs (by process name, then by title), or None."""
    comm = read_comm(pid, proc_root)
    for e in ENGINES:
        if comm in e.process_names:
            return e
    cmdline = read_cmdline(pid, proc_root)
    return next((e for e in ENGINES if e.process_title_prefix and cmdline.startswith(e.process_title_prefix)),
                None)


def process_kinds(pids: Iterable[int], proc_root: Path = PROC) -> dict[int, str]:
    """tid -> kind for the given server processes: PostgreSQL titles, mysqld threads, else comm."""
    out: dict[int, str] = {}
    for pid in pids:
        engine = engine_of_process(pid, proc_root)
        if engine is not None:
            out.update(_KINDS_OF[engine.name](pid, proc_root))
        else:
            out[pid] = read_comm(pid, proc_root) or "unknown"
    return out


def kind_lookup(kinds: Mapping[int, str]) -> KindOf:
    """A :data:`KindOf` from a tid -> kind table; unknown tids fall back to their comm."""
    def kind_of(tid: int, comm: str) -> str:
        return kinds.get(tid) or comm or "unknown"
    return kind_of
