"""Connections and driver-error mapping, one place per engine.

Drivers are picked by measurement (see BENCHMARKS.md): psycopg 3 before psycopg2
on PostgreSQL, mysqlclient (MySQLdb) before PyMySQL on MySQL/MariaDB. Nothing
outside this module imports a driver's exception types; everything is mapped to
:class:`diag.errors.DbError` with a ``kind`` the caller can act on.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from diag.errors import DbError
from diag.targets import Target

# SQLSTATE classes / codes (PostgreSQL) -> kind.
_PG_KINDS = {
    "28P01": "auth", "28000": "auth", "42501": "privilege", "40001": "serialization",
    "40P01": "deadlock", "57014": "timeout", "57P01": "lost", "57P02": "lost", "57P03": "connect",
    "3D000": "connect", "0A000": "unsupported", "42P01": "undefined", "42883": "undefined", "55000": "unsupported",
}
# MySQL / MariaDB error numbers -> kind.
_MY_KINDS = {
    1045: "auth", 1044: "privilege", 1142: "privilege", 1143: "privilege", 1227: "privilege", 1370: "privilege",
    1049: "connect", 2003: "connect", 2005: "connect", 2002: "connect", 2006: "lost", 2013: "lost", 2055: "lost",
    4031: "lost", 1927: "lost", 1053: "lost", 1213: "deadlock", 1205: "lock_timeout", 1969: "timeout", 3024: "timeout",
    1146: "undefined", 1054: "undefined", 1193: "undefined", 1109: "undefined", 1289: "unsupported",
}
_HINTS = {
    "auth": "check the user and password",
    "connect": "is the server running, and are host, port and database right?",
    "privilege": "the user lacks a privilege",
    "lost": "the server closed the connection",
}


@dataclass(frozen=True)
class DriverInfo:
    """Which Python driver talks to an engine, e.g. ``psycopg 3.3.9``."""

    name: str
    version: str
    module: Any

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


def pick_driver(engine: str) -> DriverInfo:
    """The fastest installed driver for ``engine`` ("postgres" or "mysql")."""
    order = [("psycopg", "psycopg"), ("psycopg2", "psycopg2")] if engine == "postgres" else \
        [("mysqlclient", "MySQLdb"), ("PyMySQL", "pymysql")]
    for name, mod in order:
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = str(getattr(m, "__version__", "")).split(" ")[0]
        return DriverInfo(name, version, m)
    wanted = "psycopg[binary] or psycopg2-binary" if engine == "postgres" else "pymysql"
    raise DbError(f"no {engine} driver installed: pip install {wanted}", kind="connect")


def map_error(engine: str, exc: BaseException, where: str = "") -> DbError:
    """Turn a driver exception into a DbError with code, kind and one clear line."""
    if isinstance(exc, DbError):
        return exc
    prefix = f"{where}: " if where else ""
    if engine == "postgres":
        code = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None) or ""
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        kind = _PG_KINDS.get(code, "")
        low = msg.lower()
        if not kind:
            if "password authentication failed" in low or "no password supplied" in low:
                kind = "auth"
            elif code.startswith("08") or "connection refused" in low or "could not connect" in low or \
                    "timeout expired" in low or "could not translate host" in low or "no such file" in low or \
                    "does not exist" in low and "database" in low:
                kind = "connect"
            elif "server closed the connection" in low or "terminating connection" in low or \
                    "consuming input failed" in low or "the connection is lost" in low or \
                    "connection is closed" in low:
                kind = "lost"
            elif "permission denied" in low:
                kind = "privilege"
            else:
                kind = "other"
    else:
        args = getattr(exc, "args", ())
        num = args[0] if args and isinstance(args[0], int) else 0
        code = str(num) if num else ""
        msg = str(args[1]) if len(args) > 1 else (str(exc) or type(exc).__name__)
        msg = msg.strip().splitlines()[0] if msg.strip() else type(exc).__name__
        kind = _MY_KINDS.get(num, "lost" if type(exc).__name__ == "InterfaceError" else "other")
    hint = _HINTS.get(kind, "")
    text = f"{prefix}{msg}" + (f" ({hint})" if hint and hint not in msg else "")
    return DbError(text, code=code, kind=kind)


@contextlib.contextmanager
def translate_errors(engine: str, where: str = "") -> Iterator[None]:
    """Re-raise any driver exception inside the block as a DbError."""
    try:
        yield
    except DbError:
        raise
    except Exception as e:  # driver exceptions only reach here; mapped, never swallowed
        if type(e).__module__.split(".")[0] in ("psycopg", "psycopg2", "pymysql", "MySQLdb", "socket") or \
                isinstance(e, (OSError, ConnectionError)):
            raise map_error(engine, e, where) from None
        raise


def connect(target: Target, *, autocommit: bool = True, timeout_s: int = 5,
            application_name: str = "dbdiag", driver: DriverInfo | None = None) -> Any:
    """Open a driver connection to ``target``; raises DbError with one clear line.

    ``timeout_s`` bounds the TCP/socket connect (seconds).
    """
    drv = driver or pick_driver(target.engine)
    where = target.label
    with translate_errors(target.engine, where):
        if target.engine == "postgres":
            kw: dict[str, Any] = dict(dbname=target.database, user=target.user, connect_timeout=timeout_s,
                                      application_name=application_name)
            kw["host"] = target.socket or target.host
            if target.port:
                kw["port"] = target.port
            if target.password is not None:
                kw["password"] = target.password
            if drv.name == "psycopg":
                conn = drv.module.connect(autocommit=autocommit, **kw)
            else:
                conn = drv.module.connect(**kw)
                conn.autocommit = autocommit
            return conn
        kw = dict(user=target.user, password=target.password or "", connect_timeout=timeout_s,
                  autocommit=autocommit, charset="utf8mb4")
        if target.database:
            kw["database" if drv.name == "PyMySQL" else "db"] = target.database
        if target.socket:
            kw["unix_socket"] = target.socket
        else:
            kw["host"] = target.host or "127.0.0.1"
            kw["port"] = target.port or 3306
        if drv.name == "mysqlclient":
            kw["passwd"] = kw.pop("password")
        return drv.module.connect(**kw)


class Session:
    """A small autocommit connection for catalog/status queries (collectors, probes).

    ``query`` returns rows as dicts. ``statement_timeout_ms`` bounds each
    statement (PostgreSQL statement_timeout; MariaDB max_statement_time;
    MySQL max_execution_time for SELECTs).
    """

    def __init__(self, target: Target, statement_timeout_ms: int = 5000, application_name: str = "dbdiag") -> None:
        self.target = target
        self.engine = target.engine
        self.driver = pick_driver(target.engine)
        self.conn = connect(target, driver=self.driver, application_name=application_name)
        self.version_text = ""
        self.product = "postgresql" if self.engine == "postgres" else "mysql"
        self.version_num = 0
        self._identify()
        if statement_timeout_ms:
            self.set_statement_timeout(statement_timeout_ms)

    def _identify(self) -> None:
        if self.engine == "postgres":
            row = self.query("SELECT version() AS v, current_setting('server_version_num')::int AS n")[0]
            self.version_text, self.version_num = row["v"], int(row["n"])
        else:
            row = self.query("SELECT VERSION() AS v")[0]
            self.version_text = str(row["v"])
            if "mariadb" in self.version_text.lower():
                self.product = "mariadb"
            nums = [int(x) for x in self.version_text.split("-")[0].split(".")[:3] if x.isdigit()]
            while len(nums) < 3:
                nums.append(0)
            self.version_num = nums[0] * 10000 + nums[1] * 100 + nums[2]

    def set_statement_timeout(self, ms: int) -> None:
        """Bound each statement to ``ms`` milliseconds where the server supports it."""
        try:
            if self.engine == "postgres":
                self.execute(f"SET statement_timeout = {int(ms)}")
            elif self.product == "mariadb":
                self.execute(f"SET SESSION max_statement_time = {ms / 1000.0:.3f}")
            else:
                self.execute(f"SET SESSION max_execution_time = {int(ms)}")
        except DbError:
            pass  # an old server without the variable: queries simply run unbounded

    def query(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        """Run one statement and return its rows as dicts (empty list when none)."""
        with translate_errors(self.engine, self.target.label):
            cur = self.conn.cursor()
            try:
                cur.execute(sql, params) if params is not None else cur.execute(sql)
                if cur.description is None:
                    return []
                cols = [d[0] for d in cur.description]
                return [dict(zip(cols, r)) for r in cur.fetchall()]
            finally:
                cur.close()

    def execute(self, sql: str, params: Any = None) -> None:
        """Run one statement, ignoring any result."""
        self.query(sql, params)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
