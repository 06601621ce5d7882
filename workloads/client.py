"""The connection a workload client drives: as thin as each driver allows.

One class per driver. A statement is prepared once per connection and returned as
a :class:`Query` whose ``rows`` and ``run`` are plain closures taking a parameter
tuple, so the query loop pays for the driver call and nothing else:

- psycopg 3: libpq through ``psycopg.pq`` (``PQexecPrepared`` / ``PQexec``);
  measured faster than ``cursor.execute(prepare=True)`` (see BENCHMARKS.md).
- psycopg2 (fallback): ``PREPARE`` / ``EXECUTE`` in SQL.
- mysqlclient: ``query`` / ``store_result`` / ``fetch_row`` on the C connection.
- PyMySQL (fallback, pure Python).
- libmariadb through ctypes (:mod:`workloads.mylib`), preferred for MySQL/MariaDB
  when the library is present: the binary protocol's prepared statements.

``--protocol prepared`` means a server-side prepared statement on both engines:
the extended protocol's named statement on PostgreSQL; ``COM_STMT_EXECUTE`` through
libmariadb on MySQL/MariaDB, or, with the Python drivers, ``PREPARE`` + ``EXECUTE
... USING`` (MariaDB accepts literals in USING since 10.2; MySQL gets ``SET @p`` +
``EXECUTE ... USING @p``). The ``mariadb`` PyPI connector also speaks the binary
protocol but was measured at over 50 µs of client CPU per point select. Driver
exceptions become :class:`DbError` through ``diag.db.map_error``, the project's one
mapping per engine.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from diag.db import DriverInfo, connect, map_error, pick_driver
from diag.errors import DbError
from diag.targets import Target
from workloads.keyloop import Batch, my_batch, pq_batch
from workloads.sql import Stmt, my_literal, pg_literal

Rows = Sequence[Sequence[Any]]
ISOLATION_SQL = {
    "read-committed": "READ COMMITTED",
    "repeatable-read": "REPEATABLE READ",
    "serializable": "SERIALIZABLE",
}
PROTOCOLS = ("simple", "prepared")
APP_NAME = "dbdiag-workload"


def driver_label(drv: DriverInfo) -> str:
    """``name version`` from the installed distribution (module attributes differ per driver)."""
    if drv.name == "libmariadb":
        return f"libmariadb {drv.version} (ctypes, binary protocol)"
    dist = {"psycopg": "psycopg", "psycopg2": "psycopg2-binary", "mysqlclient": "mysqlclient",
            "PyMySQL": "PyMySQL"}.get(drv.name, drv.name)
    for name in (dist, drv.name, "psycopg2"):
        try:
            return f"{drv.name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return f"{drv.name} {drv.version}"


def text(v: Any) -> str:
    """A column value as str (libpq text results arrive as bytes)."""
    return v.decode() if isinstance(v, (bytes, bytearray, memoryview)) else str(v)


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
    """One connection used by one workload client process."""

    engine = ""
    product = ""

    def __init__(self, target: Target, driver: DriverInfo, protocol: str, isolation: str) -> None:
        self.target = target
        self.driver = driver
        self.protocol = protocol
        self.isolation = isolation
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

    def keyed_batch(self, q: Query, lo: int, hi: int, seed: int) -> Batch | None:
        """The same transactions as :meth:`keyed_txn`, run by the C loop
        (:mod:`workloads.keyloop`), or None where that loop cannot drive this driver."""
        return None

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


class PgPqClient(Client):
    """psycopg 3 at the libpq level."""

    engine = "postgres"
    product = "postgresql"

    def __init__(self, target: Target, driver: DriverInfo, protocol: str, isolation: str) -> None:
        super().__init__(target, driver, protocol, isolation)
        from psycopg import pq

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
        return self._lost(map_error("postgres", exc or RuntimeError("query failed"), self.target.label))

    def _fail_text(self, sqlstate: bytes, message: bytes) -> DbError:
        """The DbError of a failed statement from its SQLSTATE and libpq's message."""
        msg = message.decode(errors="replace").strip() or "query failed"
        return self._lost(map_error("postgres", _PgFailure(msg, sqlstate.decode(errors="replace")), self.target.label))

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

    def keyed_batch(self, q: Query, lo: int, hi: int, seed: int) -> Batch | None:
        if self.protocol != "prepared" or q.stmt.nparams != 1:
            return None
        return pq_batch(self.pg, q.name.encode(), lo, hi, seed, self._fail_text)

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

    engine = "postgres"
    product = "postgresql"

    def __init__(self, target: Target, driver: DriverInfo, protocol: str, isolation: str) -> None:
        super().__init__(target, driver, protocol, isolation)
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
                raise map_error("postgres", e, label) from None
        return rows

    def execute(self, sql: str) -> Rows:
        try:
            self.cur.execute(sql)
            return self.cur.fetchall() if self.cur.description else ()
        except Exception as e:
            raise map_error("postgres", e, self.target.label) from None

    def after_error(self) -> None:
        if self.conn.closed:
            raise DbError(f"{self.target.label}: the connection is lost", kind="lost")
        self.rollback()


class MyClient(Client):
    """mysqlclient (C) or PyMySQL, through plain text queries."""

    engine = "mysql"
    product = "mysql"

    def __init__(self, target: Target, driver: DriverInfo, protocol: str, isolation: str,
                 product: str = "mysql") -> None:
        super().__init__(target, driver, protocol, isolation)
        self.product = product
        if driver.name == "mysqlclient":
            q, st = self.conn.query, self.conn.store_result

            def run(sql: str) -> Rows:
                q(sql)
                r = st()
                return r.fetch_row(0) if r is not None else ()
        else:
            cur = self.conn.cursor()
            ex, fa = cur.execute, cur.fetchall

            def run(sql: str) -> Rows:
                ex(sql)
                return fa() if cur.description else ()
        self._run = run
        self.execute("SET SESSION TRANSACTION ISOLATION LEVEL " + ISOLATION_SQL[isolation])

    def _make(self, stmt: Stmt, name: str) -> Callable[[Sequence[Any]], Rows]:
        run, label = self._run, self.target.label
        lit = my_literal
        if self.protocol == "prepared":
            self.execute(f"PREPARE {name} FROM {my_literal(stmt.qmarks())}")
            n = stmt.nparams
            if n == 0:
                sql = f"EXECUTE {name}"

                def rows(params: Sequence[Any]) -> Rows:
                    try:
                        return run(sql)
                    except Exception as e:
                        raise map_error("mysql", e, label) from None
                return rows
            if self.product == "mariadb":
                tmpl = f"EXECUTE {name} USING " + ", ".join(["%s"] * n)

                def rows(params: Sequence[Any]) -> Rows:
                    try:
                        return run(tmpl % tuple([lit(v) for v in params]))
                    except Exception as e:
                        raise map_error("mysql", e, label) from None
                return rows
            # Oracle MySQL accepts only user variables in USING: one SET, one EXECUTE.
            set_tmpl = "SET " + ", ".join(f"@{name}_{i} = %s" for i in range(n))
            exe = f"EXECUTE {name} USING " + ", ".join(f"@{name}_{i}" for i in range(n))

            def rows(params: Sequence[Any]) -> Rows:
                try:
                    run(set_tmpl % tuple([lit(v) for v in params]))
                    return run(exe)
                except Exception as e:
                    raise map_error("mysql", e, label) from None
            return rows
        tmpl = stmt.template()

        def rows(params: Sequence[Any]) -> Rows:
            try:
                return run(tmpl % tuple([lit(v) for v in params]))
            except Exception as e:
                raise map_error("mysql", e, label) from None
        return rows

    def execute(self, sql: str) -> Rows:
        try:
            return self._run(sql)
        except Exception as e:
            raise map_error("mysql", e, self.target.label) from None


class MyLibClient(Client):
    """libmariadb through ctypes: binary-protocol prepared statements (see workloads.mylib)."""

    engine = "mysql"

    def __init__(self, target: Target, driver: DriverInfo, protocol: str, isolation: str,
                 product: str = "mysql") -> None:
        from workloads.mylib import LibConnection

        self.target, self.driver, self.protocol, self.isolation = target, driver, protocol, isolation
        self.product = product
        self._n = 0
        self.conn = LibConnection(target)
        self._stmts: dict[str, Any] = {}
        self.execute("SET SESSION TRANSACTION ISOLATION LEVEL " + ISOLATION_SQL[isolation])

    def _make(self, stmt: Stmt, name: str) -> Callable[[Sequence[Any]], Rows]:
        if self.protocol == "prepared":
            st = self._stmts[name] = self.conn.prepare(stmt.qmarks())
            return st.rows
        tmpl, query, lit = stmt.template(), self.conn.query, my_literal

        def rows(params: Sequence[Any]) -> Rows:
            return query(tmpl % tuple([lit(v) for v in params]))
        return rows

    def _make_run(self, stmt: Stmt, name: str, rows: Callable[[Sequence[Any]], Rows]) -> Callable[[Sequence[Any]], int]:
        st = self._stmts.get(name)
        return st.run if st is not None else super()._make_run(stmt, name, rows)

    def keyed_txn(self, q: Query, lo: int, hi: int, rnd: Callable[[], float]) -> Callable[[], int]:
        st = self._stmts.get(q.name)
        if st is None or st.nparams != 1:
            return super().keyed_txn(q, lo, hi, rnd)
        return st.keyed(lo, hi, rnd)

    def keyed_batch(self, q: Query, lo: int, hi: int, seed: int) -> Batch | None:
        st = self._stmts.get(q.name)
        if st is None or st.nparams != 1:
            return None
        st.bind_key()
        return my_batch(st, lo, hi, seed)

    def execute(self, sql: str) -> Rows:
        return self.conn.query(sql)


def fastest_driver(engine: str) -> DriverInfo:
    """libmariadb (ctypes) for MySQL/MariaDB when present, else diag.db's pick (psycopg 3, mysqlclient...)."""
    if engine == "mysql":
        from workloads.mylib import driver_info

        info = driver_info()
        if info is not None:
            return info
    return pick_driver(engine)


def open_client(target: Target, protocol: str, isolation: str, product: str = "",
                driver: DriverInfo | None = None) -> Client:
    """Connect one workload client with the fastest installed driver."""
    drv = driver or fastest_driver(target.engine)
    if target.engine == "postgres":
        cls = PgPqClient if drv.name == "psycopg" else Pg2Client
        return cls(target, drv, protocol, isolation)
    if drv.name == "libmariadb":
        return MyLibClient(target, drv, protocol, isolation, product=product or "mysql")
    return MyClient(target, drv, protocol, isolation, product=product or "mysql")
