"""Facts about this machine and about each local server (PID, data directory, device).

Written into run.json so a report can say what hardware and storage a result came from.
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from typing import Any

import psutil

from diag.db import Session


def host_facts() -> dict[str, Any]:
    """CPU model, core counts, memory (bytes), kernel, Python."""
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "hostname": platform.node(),
        "cpu_model": model or platform.processor(),
        "cpus_logical": psutil.cpu_count(logical=True),
        "cpus_physical": psutil.cpu_count(logical=False),
        "memory_bytes": psutil.virtual_memory().total,
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def storage_facts(path: str | None) -> dict[str, Any]:
    """Filesystem and block device of a local directory (empty dict when unknown)."""
    if not path:
        return {}
    try:
        from collectors.diskstats import device_for_path
    except ImportError:
        return {"path": path}
    try:
        info = device_for_path(Path(path))
    except Exception as e:  # unreadable path, odd /sys: still record the rest of the run
        return {"path": path, "error": str(e)}
    d = info.__dict__ if hasattr(info, "__dict__") else {}
    return {"path": path, **{k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}}


def server_pid(session: Session) -> int | None:
    """PID of the postmaster / mysqld of a local server, found from our own connection.

    PostgreSQL: the parent of our backend. MySQL/MariaDB: the process listening on
    the target's port (or holding its unix socket).
    """
    t = session.target
    if not t.is_local():
        return None
    if session.engine == "postgres":
        with contextlib.suppress(Exception):
            pid = int(session.query("SELECT pg_backend_pid() AS p")[0]["p"])
            return psutil.Process(pid).ppid()
        return None
    with contextlib.suppress(Exception):
        if t.port and not t.socket:
            for c in psutil.net_connections(kind="tcp"):
                if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == t.port and c.pid:
                    return int(c.pid)
        for p in psutil.process_iter(["name"]):
            if p.info["name"] in ("mariadbd", "mysqld"):
                with contextlib.suppress(psutil.Error):
                    for c in p.net_connections(kind="unix" if t.socket else "tcp"):
                        if (t.socket and c.laddr == t.socket) or (not t.socket and c.laddr and
                                                                  getattr(c.laddr, "port", None) == t.port):
                            return p.pid
    return None


def data_directory(session: Session) -> str | None:
    """The server's data directory when visible to this user, else None."""
    with contextlib.suppress(Exception):
        if session.engine == "postgres":
            return str(session.query("SELECT current_setting('data_directory') AS d")[0]["d"])
        return str(session.query("SELECT @@datadir AS d")[0]["d"])
    return None


def server_binary(pid: int | None) -> str | None:
    """Executable of a server process (for perf symbol hints)."""
    if not pid:
        return None
    with contextlib.suppress(psutil.Error, OSError):
        return os.path.realpath(psutil.Process(pid).exe())
    return None
