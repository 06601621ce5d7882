"""Connections for catalog and status queries; driver errors become DbError.

Which driver, how to connect and how to map its errors is the engine's business
(:mod:`diag.core.engines`: ``target.dbms.map_error`` and friends); this module keeps
:func:`connect` and the :class:`Session` collectors and probes use. Nothing outside the engines imports a
driver's exception types.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from diag.core.engines import DriverInfo
from diag.core.errors import DbError
from diag.core.targets import Target

__all__ = ["OWN_PREFIX", "DriverInfo", "Session", "connect", "own_app_name"]

# Every session dbdiag opens for itself (collectors, data loads, probes, workers) is named with this prefix
# (application_name; MySQL / MariaDB: the program_name connection attribute), so the wait samplers leave
# them all out by one rule. The workload's clients ("dbdiag-workload") are what is measured: not this prefix.
OWN_PREFIX = "dbdiag:"


def own_app_name(kind: str) -> str:
    """The application_name of one of dbdiag's own sessions: "dbdiag:pg_waits", "dbdiag:load"."""
    return OWN_PREFIX + kind


def connect(target: Target, *, autocommit: bool = True, timeout_s: int = 5,
            application_name: str = "dbdiag", driver: DriverInfo | None = None) -> Any:
    """Open a driver connection to ``target``; raises DbError with one clear line.

    ``timeout_s`` bounds the TCP/socket connect (seconds).
    """
    return target.dbms.connect(target, autocommit=autocommit, timeout_s=timeout_s,
                               application_name=application_name, driver=driver)


class Session:
    """A small autocommit connection for catalog/status queries (collectors, probes).

    ``query`` returns rows as dicts. ``statement_timeout_ms`` bounds each
    statement (PostgreSQL statement_timeout; MariaDB max_statement_time;
    MySQL max_execution_time for SELECTs).
    """

    def __init__(self, target: Target, statement_timeout_ms: int = 5000, application_name: str = "dbdiag") -> None:
        self.target = target
        self.dbms = target.dbms
        self.engine = self.dbms.name
        self.driver = self.dbms.pick_driver()
        self.conn = self.dbms.connect(target, driver=self.driver, application_name=application_name)
        ident = self.dbms.identify(self.query)
        self.product, self.version_text, self.version_num = ident.product, ident.version_text, ident.version_num
        if statement_timeout_ms:
            self.set_statement_timeout(statement_timeout_ms)

    def set_statement_timeout(self, ms: int) -> None:
        """Bound each statement to ``ms`` milliseconds where the server supports it."""
        try:
            self.execute(self.dbms.statement_timeout_sql(self.product, ms))
        except DbError:
            pass  # an old server without the variable: queries simply run unbounded

    def query(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        """Run one statement and return its rows as dicts (empty list when none)."""
        with self.dbms.translate_errors(self.target.label):
            cur = self.conn.cursor()
            try:
                cur.execute(sql, params) if params is not None else cur.execute(sql)
                desc = cur.description  # read once: psycopg builds its column objects at each access
                if desc is None:
                    return []
                cols = [d[0] for d in desc]
                return [dict(zip(cols, r)) for r in cur.fetchall()]
            finally:
                cur.close()

    def rows(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement and return its rows as tuples in its column order: no dict a row, for a caller that
        reads hundreds of rows a second (my_status: SHOW GLOBAL STATUS's ~560 rows a second)."""
        with self.dbms.translate_errors(self.target.label):
            cur = self.conn.cursor()
            try:
                cur.execute(sql, params) if params is not None else cur.execute(sql)
                return [tuple(r) for r in cur.fetchall()] if cur.description is not None else []
            finally:
                cur.close()

    def text_rows(self, sql: str) -> list[tuple[str | None, ...]]:
        """Run one statement without parameters and return its rows as tuples of text (None for NULL), in its
        column order: what the server sent, before any driver conversion (``'12'``, not ``12``). Read straight
        off the connection where the engine can (``Engine.text_rows``: PyMySQL, for the MySQL samplers' 10 Hz
        and 1 Hz reads), else through a cursor with each value turned into text."""
        with self.dbms.translate_errors(self.target.label):
            fast = self.dbms.text_rows(self.conn, self.driver, sql)
        if fast is not None:
            return fast
        return [tuple(None if v is None else v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                      for v in r) for r in self.rows(sql)]

    def prepared(self, sql: str, params: Any = None) -> Callable[[], list[dict[str, Any]]]:
        """``sql`` with ``params`` fixed, as a callable returning its rows as :meth:`query` does: prepared once on
        the server where the driver allows (``Engine.prepare_rows``: psycopg 3), else a cursor each call. Each
        call raises DbError as :meth:`query` does."""
        try:
            with self.dbms.translate_errors(self.target.label):
                fast = self.dbms.prepare_rows(self.conn, self.driver, sql, params)
        except DbError:
            fast = None  # refused or timed out: each call runs it as a query and meets the error there

        def run() -> list[dict[str, Any]]:
            if fast is None:
                return self.query(sql, params)
            with self.dbms.translate_errors(self.target.label):
                return fast()
        return run

    def execute(self, sql: str, params: Any = None) -> None:
        """Run one statement, ignoring any result."""
        self.query(sql, params)

    def key_settings(self) -> dict[str, str]:
        """The engine's durability and sizing settings (name -> value text)."""
        return self.dbms.read_key_settings(self.query)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
