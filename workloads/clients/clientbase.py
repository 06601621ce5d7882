"""The workload client contract: :class:`Client` (one connection of one client process) and
:class:`Query` (a prepared statement as plain closures). The classes per driver are in
:mod:`workloads.clients.pgclient` and :mod:`workloads.clients.myclient`; :mod:`workloads.clients.client` picks one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from diag.core.db import DriverInfo, connect
from diag.core.targets import Target
from workloads.clients.sql import Stmt

Rows = Sequence[Sequence[Any]]
ISOLATION_SQL = {
    "read-committed": "READ COMMITTED",
    "repeatable-read": "REPEATABLE READ",
    "serializable": "SERIALIZABLE",
}
PROTOCOLS = ("simple", "prepared")
APP_NAME = "dbdiag-workload"


def text(v: Any) -> str:
    """A column value as str (libpq text results arrive as bytes)."""
    return bytes(v).decode() if isinstance(v, (bytes, bytearray, memoryview)) else str(v)


@dataclass(frozen=True)
class Query:
    """A prepared statement.

    ``rows(params)`` runs it and returns all rows (empty for DML); ``run(params)``
    runs it, reads the whole result off the wire as the driver always does, and
    returns only the row count, without making Python objects of the values
    (pgbench does not read the values either).
    """

    rows: Callable[[Sequence[Any]], Rows]
    stmt: Stmt
    run: Callable[[Sequence[Any]], int]
    name: str = ""


class Client:
    """One connection used by one workload client process.

    ``product`` is what the server said it is on connect ("mariadb", "mysql",
    "postgresql"; empty: the class's default).
    """

    engine: ClassVar[str] = ""
    product = ""

    def __init__(self, target: Target, driver: DriverInfo, protocol: str, isolation: str,
                 product: str = "") -> None:
        self.target = target
        self.driver = driver
        self.protocol = protocol
        self.isolation = isolation
        self.product = product or self.product
        self._n = 0
        self.conn = connect(target, driver=driver, application_name=APP_NAME)

    def prepare(self, sql: str | Stmt) -> Query:
        """Prepare ``sql`` (``?`` placeholders) for the chosen protocol."""
        stmt = sql if isinstance(sql, Stmt) else Stmt.parse(sql)
        self._n += 1
        name = f"dbdiag_s{self._n}"
        rows = self._make(stmt, name)
        return Query(rows, stmt, self._make_run(stmt, name, rows), name)

    def keyed_txn(self, q: Query, lo: int, hi: int, rnd: Callable[[], float]) -> Callable[[], int]:
        """A one-statement transaction: ``q`` with one integer key drawn uniformly from
        ``lo``..``hi`` by ``rnd()`` (a float in [0, 1)); it returns 1, the statements sent.

        The point-select shape (pgbench -S, sysbench oltp_point_select). Drivers whose
        generic path costs measurably more per call build it with nothing but the
        driver call on it (see BENCHMARKS.md).
        """
        run, span = q.run, hi - lo + 1

        def txn() -> int:
            run((lo + int(rnd() * span),))
            return 1
        return txn

    def _make(self, stmt: Stmt, name: str) -> Callable[[Sequence[Any]], Rows]:
        raise NotImplementedError

    def _make_run(self, stmt: Stmt, name: str, rows: Callable[[Sequence[Any]], Rows]) -> Callable[[Sequence[Any]], int]:
        return lambda params: len(rows(params))

    def execute(self, sql: str) -> Rows:
        """Run one statement through the simple protocol (transaction control, SET...)."""
        raise NotImplementedError

    def begin(self) -> None:
        self.execute("BEGIN")

    def commit(self) -> None:
        self.execute("COMMIT")

    def rollback(self) -> None:
        self.execute("ROLLBACK")

    def after_error(self) -> None:
        """Leave no transaction open after a failed one; DbError when the connection is gone."""
        self.rollback()

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # closing a dead connection: nothing left to release
            pass
