"""Facts about this machine and about each local server (PID, data directory, device, binary).

Written into run.json so a report can say what hardware and storage a result came from.
Where a server keeps its data and which process serves it is the engine's knowledge
(:attr:`diag.core.engines.base.Engine.data_directory_sql`, ``backend_pid_sql``,
``process_names``); this module only runs those questions and looks at processes.
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path
from typing import Any

import psutil

from collectors.diskstats import device_for_path
from diag.core.db import Session
from diag.core.targets import Target


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
        info = device_for_path(Path(path))
    except Exception as e:  # unreadable path, odd /sys: still record the rest of the run
        return {"path": path, "error": str(e)}
    d = info.__dict__ if hasattr(info, "__dict__") else {}
    return {"path": path, **{k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}}


def _listener_pid(t: Target, names: tuple[str, ...]) -> int | None:
    """The process listening on the target's TCP port, or (among ``names``) holding its unix socket."""
    if t.port and not t.socket:
        for c in psutil.net_connections(kind="tcp"):
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == t.port and c.pid:
                return int(c.pid)
    for p in psutil.process_iter(["name"]):
        if p.info["name"] in names:
            with contextlib.suppress(psutil.Error):
                for pc in p.net_connections(kind="unix" if t.socket else "tcp"):
                    # A unix socket's laddr is its path, a str (types-psutil says an address tuple only).
                    laddr: Any = pc.laddr
                    if (t.socket and laddr == t.socket) or (not t.socket and laddr and
                                                            getattr(laddr, "port", None) == t.port):
                        return p.pid
    return None


def server_pid(session: Session) -> int | None:
    """PID of the server process (postmaster / mysqld) of a local server, found from our own connection.

    Process-per-connection engines: the parent of the process serving us. Threaded
    ones: the process listening on the target's port (or holding its unix socket).
    """
    t = session.target
    if not t.is_local():
        return None
    sql = session.dbms.backend_pid_sql
    with contextlib.suppress(Exception):  # no permission to see the process, odd /proc: PID unknown
        if sql:
            return psutil.Process(int(session.query(sql)[0]["p"])).ppid()
        return _listener_pid(t, session.dbms.process_names)
    return None


def data_directory(session: Session) -> str | None:
    """The server's data directory when visible to this user, else None."""
    with contextlib.suppress(Exception):  # a user without the privilege to read it
        return str(session.query(session.dbms.data_directory_sql)[0]["d"])
    return None


def server_binary(pid: int | None) -> str | None:
    """Executable of a server process (for perf symbol hints)."""
    if not pid:
        return None
    with contextlib.suppress(psutil.Error, OSError):
        return os.path.realpath(psutil.Process(pid).exe())
    return None
