"""Which role a mysqld / mariadbd thread plays, from its name (``/proc/PID/task/TID/comm``). Reads ``/proc``
under a ``proc_root``; needs no privilege. Threads that keep the program's name are told apart by their stacks
(:func:`collectors.profile.procs.stack_thread_kinds`).
"""

from __future__ import annotations

from pathlib import Path

from collectors.profile.proctree import PROC, read_comm
from diag.core.engines import MYSQL

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
