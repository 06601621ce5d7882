"""MySQL/MariaDB workload clients: libmariadb through ctypes (:mod:`workloads.clients.mylib`), else
mysqlclient or PyMySQL through text queries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from diag.core.db import DriverInfo
from diag.core.engines import MYSQL
from diag.core.targets import Target
from workloads.clients import mylib
from workloads.clients.clientbase import ISOLATION_SQL, Client, Query, Rows
from workloads.clients.sql import Stmt, my_literal


class MyClient(Client):
    """mysqlclient (C) or PyMySQL, through plain text queries."""

    engine = MYSQL.name
    product = MYSQL.products[0]

    def __init__(self, target: Target, driver: DriverInfo, protocol: str, isolation: str,
                 product: str = "") -> None:
        super().__init__(target, driver, protocol, isolation, product)
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
                        raise MYSQL.map_error(e, label) from None
                return rows
            if MYSQL.is_mariadb(self.product):
                tmpl = f"EXECUTE {name} USING " + ", ".join(["%s"] * n)

                def rows(params: Sequence[Any]) -> Rows:
                    try:
                        return run(tmpl % tuple([lit(v) for v in params]))
                    except Exception as e:
                        raise MYSQL.map_error(e, label) from None
                return rows
            # Oracle MySQL accepts only user variables in USING: one SET, one EXECUTE.
            set_tmpl = "SET " + ", ".join(f"@{name}_{i} = %s" for i in range(n))
            exe = f"EXECUTE {name} USING " + ", ".join(f"@{name}_{i}" for i in range(n))

            def rows(params: Sequence[Any]) -> Rows:
                try:
                    run(set_tmpl % tuple([lit(v) for v in params]))
                    return run(exe)
                except Exception as e:
                    raise MYSQL.map_error(e, label) from None
            return rows
        tmpl = stmt.template()

        def rows(params: Sequence[Any]) -> Rows:  # type: ignore[no-redef]  # the other branch's rows, not both
            try:
                return run(tmpl % tuple([lit(v) for v in params]))
            except Exception as e:
                raise MYSQL.map_error(e, label) from None
        return rows

    def execute(self, sql: str) -> Rows:
        try:
            return self._run(sql)
        except Exception as e:
            raise MYSQL.map_error(e, self.target.label) from None


class MyLibClient(Client):
    """libmariadb through ctypes: binary-protocol prepared statements (see workloads.clients.mylib)."""

    engine = MYSQL.name
    product = MYSQL.products[0]

    def __init__(self, target: Target, driver: DriverInfo, protocol: str, isolation: str,
                 product: str = "") -> None:
        # Not Client.__init__: the connection is libmariadb's own, not a Python driver's.
        self.target, self.driver, self.protocol, self.isolation = target, driver, protocol, isolation
        self.product = product or self.product
        self._n = 0
        self.conn = mylib.LibConnection(target)
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

    def execute(self, sql: str) -> Rows:
        return self.conn.query(sql)
