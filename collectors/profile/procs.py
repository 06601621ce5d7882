"""Which server role a process or thread plays: PostgreSQL process titles, mysqld thread names, stacks.

Everything here reads ``/proc`` under a ``proc_root`` (tests pass a saved
tree) and needs no privilege. The engine of a process comes from its name
(:attr:`Engine.process_names`, :attr:`Engine.process_title_prefix`); how its
processes or threads are told apart is the engine's own (``procs`` in collectors/pg/, collectors/mysql/,
found through :func:`collectors.engines.source_parts`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from collectors.engines import source_parts
from collectors.profile.parse import KindOf, Sample
from collectors.profile.proctree import PROC, read_cmdline, read_comm
from diag.core.engines import ENGINES, Engine

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
            out.update(source_parts(engine).process_kinds(pid, proc_root))
        else:
            out[pid] = read_comm(pid, proc_root) or "unknown"
    return out


def kind_lookup(kinds: Mapping[int, str]) -> KindOf:
    """A :data:`KindOf` from a tid -> kind table; unknown tids fall back to their comm."""
    def kind_of(tid: int, comm: str) -> str:
        return kinds.get(tid) or comm or "unknown"
    return kind_of
