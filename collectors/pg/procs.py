"""Which role a PostgreSQL process plays, from its process title (``/proc/PID/cmdline``): one process per role
(postmaster, backend, checkpointer, walwriter...). Reads ``/proc`` under a ``proc_root``; needs no privilege.
"""

from __future__ import annotations

import re
from pathlib import Path

from collectors.profile.proctree import PROC, children, read_cmdline
from diag.core.engines import POSTGRES

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
    for pid in children(postmaster_pid, proc_root):
        kinds[pid] = postgres_title_kind(read_cmdline(pid, proc_root))
    return kinds


def process_kinds(pid: int, proc_root: Path = PROC) -> dict[int, str]:
    """pid -> kind of one PostgreSQL process, from its title."""
    # One process per role: the pid is the only "thread".
    return {pid: postgres_title_kind(read_cmdline(pid, proc_root))}
