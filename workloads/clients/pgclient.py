"""PostgreSQL workload clients: psycopg 3 at the libpq level, and psycopg2 as the fallback.

psycopg (3) is imported only inside :class:`PgPqClient`, so a run on the psycopg2
fallback never loads it, and nothing here imports psycopg2 (its connection comes
from the engine's driver pick): one libpq per client process.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from diag.core.db import DriverInfo
from diag.core.engines import POSTGRES
from diag.core.errors import DbError
from diag.core.targets import Target
from workloads.clients.clientbase import ISOLATION_SQL, Client, Query, Rows
from workloads.clients.sql import Stmt, pg_literal


class PgPqClient(Client):
    """psycopg 3 at the libpq level."""

    engine = POSTGRES.name
    product = POSTGRES.products[0]

    def __init__(self, target: Target, driver: DriverInfo, protocol: str, isolation: str,
                 product: str = "") -> None:
        super().__init__(target, driver, protocol, isolation, product)
        from psycopg import pq  # here, not at the top: a psycopg2 fallback run never imports psycopg

        self.pg = self.conn.pgconn
        self._ok = frozenset(int(x) for x in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK,
                                              pq.ExecStatus.EMPTY_QUERY))
        self._bad = pq.ConnStatus.BAD
        self._idle = pq.TransactionStatus.IDLE
        self._sqlstate = pq.DiagnosticField.SQLSTATE
        self._exc: type[BaseException] = __import__("psycopg").Error
        self.execute("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL " + ISOLATION_SQL[isolation])

    def _fail(self, res: Any = None, exc: BaseException | None = None) -> DbError:
        if res is not None:
            return self._fail_text(res.error_field(self._sqlstate) or b"", res.error_message or b"")
        return self._lost(POSTGRES.map_error(exc or RuntimeError("query failed"), self.target.label))

    def _fail_text(self, sqlstate: bytes, message: bytes) -> DbError:
        """The DbError of a failed statement from its SQLSTATE and libpq's message."""
        msg = message.decode(errors="replace").strip() or "query failed"
        return self._lost(POSTGRES.map_error(_PgFailure(msg, sqlstate.decode(errors="replace")), self.target.label))

    def _lost(self, err: DbError) -> DbError:
        """``err`` as a lost connection when libpq says the connection is gone."""
        if self.pg.status == self._bad and err.kind not in ("lost", "connect"):
            return DbError(str(err), code=err.code, kind="lost")
        return err

    def _make(self, stmt: Stmt, name: str) -> Callable[[Sequence[Any]], Rows]:
        pg, ok, fail, exc_t = self.pg, self._ok, self._fail, self._exc
        if self.protocol == "prepared":
            bname = name.encode()
            try:
                res = pg.prepare(bname, stmt.numbered().encode())
            except exc_t as e:
                raise fail(exc=e) from None
            if res.status not in ok:
                raise fail(res)
            ex = pg.exec_prepared

            def rows(params: Sequence[Any]) -> Rows:
                try:
                    res = ex(bname, [None if v is None else str(v).encode() for v in params])
                except exc_t as e:
                    raise fail(exc=e) from None
                if res.status not in ok:
                    raise fail(res)
                return _pq_rows(res)
        else:
            tmpl = stmt.template()
            ex = pg.exec_

            def rows(params: Sequence[Any]) -> Rows:
                try:
                    res = ex((tmpl % tuple([pg_literal(v) for v in params])).encode())
                except exc_t as e:
                    raise fail(exc=e) from None
                if res.status not in ok:
                    raise fail(res)
                return _pq_rows(res)
        return rows

    def _make_run(self, stmt: Stmt, name: str, rows: Callable[[Sequence[Any]], Rows]) -> Callable[[Sequence[Any]], int]:
        if self.protocol != "prepared":
            return super()._make_run(stmt, name, rows)
        ex, bname, ok, fail, exc_t = self.pg.exec_prepared, name.encode(), self._ok, self._fail, self._exc

        def run(params: Sequence[Any]) -> int:
            try:
                res = ex(bname, [None if v is None else str(v).encode() for v in params])
            except exc_t as e:
                raise fail(exc=e) from None
            if res.status not in ok:
                raise fail(res)
            return res.ntuples
        return run

    def keyed_txn(self, q: Query, lo: int, hi: int, rnd: Callable[[], float]) -> Callable[[], int]:
        if self.protocol != "prepared" or q.stmt.nparams != 1:
            return super().keyed_txn(q, lo, hi, rnd)
        # One Python frame around PQexecPrepared: 0.5 µs/txn less Python than the generic path
        # (tuple, list comprehension, the run closure), measured with a stand-in for the call.
        ex, bname, ok, fail, exc_t = self.pg.exec_prepared, q.name.encode(), self._ok, self._fail, self._exc
        span = hi - lo + 1

        def txn() -> int:
            try:
                res = ex(bname, [b"%d" % (lo + int(rnd() * span))])
            except exc_t as e:
                raise fail(exc=e) from None
            if res.status not in ok:
                raise fail(res)
            return 1
        return txn

    def execute(self, sql: str) -> Rows:
        try:
            res = self.pg.exec_(sql.encode())
        except self._exc as e:
            raise self._fail(exc=e) from None
        if res.status not in self._ok:
            raise self._fail(res)
        gv, nf = res.get_value, res.nfields
        return [tuple([gv(i, j) for j in range(nf)]) for i in range(res.ntuples)]

    def after_error(self) -> None:
        if self.pg.status == self._bad:
            raise DbError(f"{self.target.label}: the connection is lost", kind="lost")
        if self.pg.transaction_status != self._idle:
            self.rollback()


def _pq_rows(res: Any) -> Rows:
    """All rows of a libpq result as tuples of bytes (None for NULL); one-row one-column fast."""
    n = res.ntuples
    if n == 0:
        return ()
    gv, nf = res.get_value, res.nfields
    if n == 1:
        return ((gv(0, 0),),) if nf == 1 else (tuple([gv(0, j) for j in range(nf)]),)
    return [tuple([gv(i, j) for j in range(nf)]) for i in range(n)]


class _PgFailure(Exception):
    """An error result from libpq, shaped like a driver exception for map_error."""

    def __init__(self, message: str, sqlstate: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class Pg2Client(Client):
    """psycopg2: PREPARE/EXECUTE in SQL (the fallback when psycopg 3 is missing)."""

    engine = POSTGRES.name
    product = POSTGRES.products[0]

    def __init__(self, target: Target, driver: DriverInfo, protocol: str, isolation: str,
                 product: str = "") -> None:
        super().__init__(target, driver, protocol, isolation, product)
        self.cur = self.conn.cursor()
        self.execute("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL " + ISOLATION_SQL[isolation])

    def _make(self, stmt: Stmt, name: str) -> Callable[[Sequence[Any]], Rows]:
        if self.protocol == "prepared":
            self.execute(f"PREPARE {name} AS {stmt.numbered()}")
            tmpl = f"EXECUTE {name}(" + ", ".join(["%s"] * stmt.nparams) + ")" if stmt.nparams else f"EXECUTE {name}"
        else:
            tmpl = stmt.template()
        cur, label = self.cur, self.target.label

        def rows(params: Sequence[Any]) -> Rows:
            try:
                cur.execute(tmpl % tuple([pg_literal(v) for v in params]))
                return cur.fetchall() if cur.description else ()
            except Exception as e:
                raise POSTGRES.map_error(e, label) from None
        return rows

    def execute(self, sql: str) -> Rows:
        try:
            self.cur.execute(sql)
            return self.cur.fetchall() if self.cur.description else ()
        except Exception as e:
            raise POSTGRES.map_error(e, self.target.label) from None

    def after_error(self) -> None:
        if self.conn.closed:
            raise DbError(f"{self.target.label}: the connection is lost", kind="lost")
        self.rollback()
