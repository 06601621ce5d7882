"""A throwaway MySQL / MariaDB: its binaries (in PATH, /usr/sbin, /usr/bin, /usr/local/mysql/bin) and its
launcher (mariadb-install-db, or mysqld --initialize-insecure, then the server).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from diag.core import datadirs
from diag.core.engines import MYSQL
from diag.core.errors import ToolUnavailable
from diag.core.procs import Supervisor
from diag.core.servers.base import (ThrowawayServer, check_run, free_port, guard, instrumented, mkdir_for, run_user,
                                    wait_ready)

def find_mysql_binaries() -> tuple[Path, Path | None, bool]:
    """(server binary, install-db script or None, whether the server is MariaDB).

    ``DBDIAG_MYSQL_BINDIR`` overrides the search: only that directory is used.
    """
    forced = os.environ.get("DBDIAG_MYSQL_BINDIR")
    if forced:
        dirs = [forced]
    else:
        dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d] + ["/usr/sbin", "/usr/bin",
                                                                                 "/usr/local/mysql/bin"]
    for name, known in (("mariadbd", True), ("mysqld", None)):
        for d in dirs:
            p = Path(d) / name
            if p.exists():
                mariadb = known
                if mariadb is None:  # mysqld is MariaDB's old name too: ask it
                    out = subprocess.run([str(p), "--version"], capture_output=True, text=True, timeout=20)
                    mariadb = MYSQL.is_mariadb(out.stdout)
                install = None
                if mariadb:
                    for d2 in dirs:
                        for n2 in ("mariadb-install-db", "mysql_install_db"):
                            if (Path(d2) / n2).exists():
                                install = Path(d2) / n2
                                break
                        if install:
                            break
                    if install is None:
                        continue
                return p, install, mariadb
    where = f" in DBDIAG_MYSQL_BINDIR={forced}" if forced else ""
    raise ToolUnavailable(f"MySQL/MariaDB server binaries (mariadbd or mysqld, and mariadb-install-db) not found"
                          f"{where}: apt-get install mariadb-server")


def start_mysql(settings: dict[str, str] | None = None, port: int | None = None,
                supervisor: Supervisor | None = None, instrument: bool = True) -> ThrowawayServer:
    """mariadb-install-db (or mysqld --initialize-insecure) + the server on a free port (``supervisor``,
    ``instrument``: as for :func:`start_postgres`; here performance_schema with digests, stages, waits)."""
    settings = dict(settings or {})
    server, install, mariadb = find_mysql_binaries()
    user = run_user()
    base = mkdir_for(user, "dbdiag-my-")
    srv = ThrowawayServer(MYSQL.name, port or free_port(), base, settings, binary=str(server),
                          supervisor=guard(supervisor))
    data = srv.data_dir
    user_args = [f"--user={user.pw_name}"] if user is not None else []
    # Its own temporary directory: in the shared /tmp, mariadb-install-db failed now and then on this
    # machine ("Could not remove temporary table '/tmp/#sql-temptable-...'": removed by someone else).
    tmp = [f"--tmpdir={base}"]
    try:
        srv.supervise()
        if mariadb and install is not None:
            init, what = [str(install), "--no-defaults", f"--datadir={data}", "--auth-root-authentication-method=normal",
                          "--skip-test-db", "--skip-name-resolve", *tmp, *user_args], "mariadb-install-db"
        else:
            init = [str(server), "--no-defaults", "--initialize-insecure", f"--datadir={data}", *tmp, *user_args]
            what = "mysqld --initialize-insecure"
        datadirs.initialise(f"mysql {server}", data, lambda: check_run(init, None, what), user)
        sock = base / "mysqld.sock"
        args = [str(server), "--no-defaults", f"--datadir={data}", f"--port={srv.port}", f"--socket={sock}", *tmp,
                "--bind-address=127.0.0.1", f"--pid-file={base / 'mysqld.pid'}", "--skip-name-resolve",
                f"--log-error={base / 'server.log'}", "--max-connections=300", *user_args]
        for k, v in instrumented(MYSQL, 0, settings, instrument):
            args.append(f"--{k}={v}")
        srv.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
                                       start_new_session=True)
        srv.supervise()
        srv.socket_path = str(sock)
        wait_ready(srv)
        return srv
    except BaseException:
        srv.stop()
        raise
