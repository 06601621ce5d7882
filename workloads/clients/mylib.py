"""MySQL/MariaDB binary-protocol prepared statements through libmariadb (ctypes).

No Python MySQL driver exposes ``COM_STMT_PREPARE`` / ``COM_STMT_EXECUTE`` at C
speed, and the text protocol costs both sides more per query (the server parses
every statement; the client formats and converts). So for ``--protocol
prepared`` the workload client calls MariaDB Connector/C (``libmariadb.so.3``,
the library sysbench itself links; Debian's ``libmariadb3``, present wherever the
``mariadb`` client is) directly: ``mysql_stmt_execute`` + ``mysql_stmt_fetch``
with bound buffers. Measured in BENCHMARKS.md: about 18 µs of client CPU per
point select against 20-24 µs for mysqlclient's text queries, and the server no
longer parses each statement.

Parameters are bound by Python type (int -> LONGLONG, float/Decimal -> DOUBLE,
str/bytes -> STRING, None -> NULL); results come back as bytes (None for NULL),
like libpq's text results, so workloads treat both engines alike. Errors are
turned into DbError by ``MYSQL.map_error`` (the code and message shaped like a
driver exception), the one mapping per engine.

Only the MariaDB Connector/C structure layout (``MYSQL_BIND``, mariadb_stmt.h,
stable since 3.0) is assumed; when the library is missing, the caller falls back
to mysqlclient / PyMySQL.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from diag.core.engines import MYSQL, DriverInfo
from diag.core.errors import DbError
from diag.core.targets import Target

_vp = ctypes.c_void_p
MYSQL_TYPE_DOUBLE, MYSQL_TYPE_NULL, MYSQL_TYPE_LONGLONG, MYSQL_TYPE_STRING = 5, 6, 8, 254
MYSQL_NO_DATA, MYSQL_DATA_TRUNCATED = 100, 101
MYSQL_OPT_CONNECT_TIMEOUT = 0
RESULT_BUFFER = 1024  # bytes per result column; longer values are re-read at their length


class Bind(ctypes.Structure):
    """``MYSQL_BIND`` of MariaDB Connector/C 3.x."""

    _fields_ = [("length", ctypes.POINTER(ctypes.c_ulong)), ("is_null", ctypes.POINTER(ctypes.c_byte)),
                ("buffer", _vp), ("error", ctypes.POINTER(ctypes.c_byte)), ("u", _vp),
                ("store_param_func", _vp), ("fetch_result", _vp), ("skip_result", _vp),
                ("buffer_length", ctypes.c_ulong), ("offset", ctypes.c_ulong), ("length_value", ctypes.c_ulong),
                ("flags", ctypes.c_uint), ("pack_length", ctypes.c_uint), ("buffer_type", ctypes.c_int),
                ("error_value", ctypes.c_byte), ("is_unsigned", ctypes.c_byte), ("long_data_used", ctypes.c_byte),
                ("is_null_value", ctypes.c_byte), ("extension", _vp)]


_LIB: Any = None
_TRIED = False


def library() -> Any:
    """The loaded libmariadb with argument types declared, or None when it is not installed."""
    global _LIB, _TRIED
    if _TRIED:
        return _LIB
    _TRIED = True
    for name in ("libmariadb.so.3", ctypes.util.find_library("mariadb")):
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        sigs: dict[str, tuple[Any, list[Any]]] = {
            "mysql_init": (_vp, [_vp]), "mysql_close": (None, [_vp]),
            "mysql_real_connect": (_vp, [_vp, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                         ctypes.c_uint, ctypes.c_char_p, ctypes.c_ulong]),
            "mysql_options": (ctypes.c_int, [_vp, ctypes.c_int, _vp]),
            "mysql_set_character_set": (ctypes.c_int, [_vp, ctypes.c_char_p]),
            "mysql_errno": (ctypes.c_uint, [_vp]), "mysql_error": (ctypes.c_char_p, [_vp]),
            "mysql_real_query": (ctypes.c_int, [_vp, ctypes.c_char_p, ctypes.c_ulong]),
            "mysql_store_result": (_vp, [_vp]), "mysql_free_result": (None, [_vp]),
            "mysql_num_fields": (ctypes.c_uint, [_vp]), "mysql_field_count": (ctypes.c_uint, [_vp]),
            "mysql_fetch_row": (ctypes.POINTER(ctypes.c_void_p), [_vp]),
            "mysql_fetch_lengths": (ctypes.POINTER(ctypes.c_ulong), [_vp]),
            "mysql_get_client_info": (ctypes.c_char_p, []),
            "mysql_stmt_init": (_vp, [_vp]), "mysql_stmt_close": (ctypes.c_byte, [_vp]),
            "mysql_stmt_prepare": (ctypes.c_int, [_vp, ctypes.c_char_p, ctypes.c_ulong]),
            "mysql_stmt_param_count": (ctypes.c_ulong, [_vp]),
            "mysql_stmt_result_metadata": (_vp, [_vp]),
            "mysql_stmt_bind_param": (ctypes.c_byte, [_vp, _vp]),
            "mysql_stmt_bind_result": (ctypes.c_byte, [_vp, _vp]),
            "mysql_stmt_execute": (ctypes.c_int, [_vp]), "mysql_stmt_fetch": (ctypes.c_int, [_vp]),
            "mysql_stmt_fetch_column": (ctypes.c_int, [_vp, _vp, ctypes.c_uint, ctypes.c_ulong]),
            "mysql_stmt_free_result": (ctypes.c_byte, [_vp]),
            "mysql_stmt_errno": (ctypes.c_uint, [_vp]), "mysql_stmt_error": (ctypes.c_char_p, [_vp]),
        }
        try:
            for fn, (res, args) in sigs.items():
                f = getattr(lib, fn)
                f.restype, f.argtypes = res, args
        except AttributeError:
            continue
        _LIB = lib
        break
    return _LIB


def driver_info() -> DriverInfo | None:
    """``libmariadb <version>`` when the library loads, else None."""
    lib = library()
    if lib is None:
        return None
    return DriverInfo("libmariadb", (lib.mysql_get_client_info() or b"").decode(), lib)


class _MyFailure(Exception):
    """A libmariadb error shaped like a driver exception (args = (errno, message)) for map_error."""


class LibConnection:
    """One libmariadb connection (autocommit on, utf8mb4)."""

    def __init__(self, target: Target, timeout_s: int = 5) -> None:
        lib = library()
        if lib is None:
            raise DbError("libmariadb is not installed (apt-get install libmariadb3)", kind="connect")
        self.lib, self.label = lib, target.label
        self.m = lib.mysql_init(None)
        if not self.m:
            raise DbError("libmariadb: out of memory", kind="connect")
        t = ctypes.c_uint(timeout_s)
        lib.mysql_options(self.m, MYSQL_OPT_CONNECT_TIMEOUT, ctypes.byref(t))
        ok = lib.mysql_real_connect(
            self.m, None if target.socket else (target.host or "127.0.0.1").encode(), target.user.encode(),
            (target.password or "").encode(), target.database.encode() if target.database else None,
            target.port or 3306 if not target.socket else 0, target.socket.encode() if target.socket else None, 0)
        if not ok:
            err = self.error()
            self.close()
            raise err
        lib.mysql_set_character_set(self.m, b"utf8mb4")

    def error(self, stmt: Any = None) -> DbError:
        lib = self.lib
        if stmt:
            code, msg = lib.mysql_stmt_errno(stmt), lib.mysql_stmt_error(stmt)
        else:
            code, msg = lib.mysql_errno(self.m), lib.mysql_error(self.m)
        return MYSQL.map_error(_MyFailure(int(code), (msg or b"").decode(errors="replace")), self.label)

    def query(self, sql: str) -> list[tuple[bytes | None, ...]]:
        """A text-protocol statement (BEGIN, COMMIT, SET...); rows as bytes."""
        lib, m = self.lib, self.m
        b = sql.encode()
        if lib.mysql_real_query(m, b, len(b)):
            raise self.error()
        res = lib.mysql_store_result(m)
        if not res:
            if lib.mysql_field_count(m):
                raise self.error()
            return []
        try:
            n = lib.mysql_num_fields(res)
            out = []
            while True:
                row = lib.mysql_fetch_row(res)
                if not row:
                    break
                lens = lib.mysql_fetch_lengths(res)
                out.append(tuple(None if row[i] is None else ctypes.string_at(row[i], lens[i]) for i in range(n)))
            return out
        finally:
            lib.mysql_free_result(res)

    def prepare(self, sql: str) -> "_Statement":
        """A prepared statement: ``.rows(params)`` -> rows of bytes, ``.run(params)`` -> row count."""
        return _Statement(self, sql)

    def close(self) -> None:
        if self.m:
            self.lib.mysql_close(self.m)
            self.m = None


class _Statement:
    """A server-side prepared statement with bound parameter and result buffers."""

    def __init__(self, conn: LibConnection, sql: str) -> None:
        lib = self.lib = conn.lib
        self.conn = conn
        st = self.st = lib.mysql_stmt_init(conn.m)
        if not st:
            raise conn.error()
        b = sql.encode()
        if lib.mysql_stmt_prepare(st, b, len(b)):
            raise conn.error(st)
        n = self.nparams = lib.mysql_stmt_param_count(st)
        self.pbind = (Bind * max(n, 1))()
        self.ints = [ctypes.c_longlong() for _ in range(n)]
        self.dbls = [ctypes.c_double() for _ in range(n)]
        self.lens = [ctypes.c_ulong() for _ in range(n)]
        self.sbufs: list[Any] = [None] * n
        for i in range(n):
            self.pbind[i].length = ctypes.pointer(self.lens[i])
        self.sig: tuple[int, ...] = ()
        meta = lib.mysql_stmt_result_metadata(st)
        self.nfields = 0
        if meta:
            self.nfields = lib.mysql_num_fields(meta)
            lib.mysql_free_result(meta)
        nf = self.nfields
        self.rbind = (Bind * max(nf, 1))()
        self.rbufs = [ctypes.create_string_buffer(RESULT_BUFFER) for _ in range(nf)]
        self.rviews = [memoryview(b) for b in self.rbufs]
        self.rlens = [ctypes.c_ulong() for _ in range(nf)]
        self.rnulls = [ctypes.c_byte() for _ in range(nf)]
        for j in range(nf):
            rb = self.rbind[j]
            rb.buffer_type = MYSQL_TYPE_STRING
            rb.buffer = ctypes.cast(self.rbufs[j], _vp)
            rb.buffer_length = RESULT_BUFFER
            rb.length = ctypes.pointer(self.rlens[j])
            rb.is_null = ctypes.pointer(self.rnulls[j])
        if nf and lib.mysql_stmt_bind_result(st, self.rbind):
            raise conn.error(st)
        self.rows, self.run = self._make()

    def _bind(self, params: Sequence[Any]) -> None:
        """Fill the parameter buffers; rebind when types (or a string buffer) changed.

        libmariadb copies the bind array at ``mysql_stmt_bind_param``, so buffers must
        stay put between executions: strings are copied into a per-parameter buffer
        and only their length changes.
        """
        sig = []
        for i, v in enumerate(params):
            if v is None:
                sig.append(MYSQL_TYPE_NULL)
            elif isinstance(v, int):
                self.ints[i].value = v
                sig.append(MYSQL_TYPE_LONGLONG)
            elif isinstance(v, (float, Decimal)):
                self.dbls[i].value = float(v)
                sig.append(MYSQL_TYPE_DOUBLE)
            else:
                b = v if isinstance(v, bytes) else str(v).encode()
                buf = self.sbufs[i]
                if buf is None or len(b) > len(buf):
                    buf = self.sbufs[i] = ctypes.create_string_buffer(max(len(b), 64) * 2)
                    self.sig = ()  # force a rebind to the new buffer
                ctypes.memmove(buf, b, len(b))
                self.lens[i].value = len(b)
                sig.append(MYSQL_TYPE_STRING)
        t = tuple(sig)
        if t != self.sig:
            pb = self.pbind
            for i, kind in enumerate(t):
                pb[i].buffer_type = kind
                if kind == MYSQL_TYPE_LONGLONG:
                    pb[i].buffer = ctypes.cast(ctypes.byref(self.ints[i]), _vp)
                elif kind == MYSQL_TYPE_DOUBLE:
                    pb[i].buffer = ctypes.cast(ctypes.byref(self.dbls[i]), _vp)
                elif kind == MYSQL_TYPE_STRING:
                    buf = self.sbufs[i]
                    assert buf is not None
                    pb[i].buffer = ctypes.cast(buf, _vp)
                    pb[i].buffer_length = len(buf)
            if self.lib.mysql_stmt_bind_param(self.st, pb):
                raise self.conn.error(self.st)
            self.sig = t

    def _make(self) -> tuple[Callable[[Sequence[Any]], Sequence[Sequence[Any]]], Callable[[Sequence[Any]], int]]:
        lib, st, conn = self.lib, self.st, self.conn
        ex, fe, fr = lib.mysql_stmt_execute, lib.mysql_stmt_fetch, lib.mysql_stmt_free_result
        nf = self.nfields
        views, lens, nulls = self.rviews, self.rlens, self.rnulls
        ints, bind = self.ints, self._bind
        one_int = self.nparams == 1

        def rows(params: Sequence[Any]) -> Sequence[Sequence[Any]]:
            if one_int and type(params[0]) is int and self.sig == (MYSQL_TYPE_LONGLONG,):
                ints[0].value = params[0]  # the point-select fast path
            else:
                bind(params)
            if ex(st):
                raise conn.error(st)
            if not nf:
                return ()
            out = []
            while True:
                rc = fe(st)
                if rc == 0:
                    out.append(tuple([None if nulls[j].value else bytes(views[j][:lens[j].value])
                                      for j in range(nf)]))
                elif rc == MYSQL_NO_DATA:
                    break
                elif rc == MYSQL_DATA_TRUNCATED:
                    out.append(self._long_row())
                else:
                    err = conn.error(st)
                    fr(st)
                    raise err
            fr(st)
            return out

        def run(params: Sequence[Any]) -> int:
            if one_int and type(params[0]) is int and self.sig == (MYSQL_TYPE_LONGLONG,):
                ints[0].value = params[0]
            else:
                bind(params)
            if ex(st):
                raise conn.error(st)
            if not nf:
                return 0
            n = 0
            while True:
                rc = fe(st)
                if rc == 0 or rc == MYSQL_DATA_TRUNCATED:
                    n += 1
                elif rc == MYSQL_NO_DATA:
                    break
                else:
                    err = conn.error(st)
                    fr(st)
                    raise err
            fr(st)
            return n
        return rows, run

    def bind_key(self) -> None:
        """Bind the one parameter as a 64-bit integer buffer (``ints[0]``); from then on only
        its value changes (the point-lookup paths, Python and C, write it)."""
        self._bind((1,))

    def keyed(self, lo: int, hi: int, rnd: Callable[[], float]) -> Callable[[], int]:
        """A transaction of this one-integer-parameter statement with a key drawn uniformly from
        lo..hi; it returns 1 (statements sent). Rows are read off the wire, not turned into bytes."""
        self.bind_key()
        lib, st, conn = self.lib, self.st, self.conn
        ex, fe, fr = lib.mysql_stmt_execute, lib.mysql_stmt_fetch, lib.mysql_stmt_free_result
        key, nf, span = self.ints[0], self.nfields, hi - lo + 1

        def txn() -> int:
            key.value = lo + int(rnd() * span)
            if ex(st):
                raise conn.error(st)
            if nf:
                while True:
                    rc = fe(st)
                    if rc == MYSQL_NO_DATA:
                        break
                    if rc != 0 and rc != MYSQL_DATA_TRUNCATED:
                        err = conn.error(st)
                        fr(st)
                        raise err
                fr(st)
            return 1
        return txn

    def _long_row(self) -> tuple[bytes | None, ...]:
        """A row with a value longer than the buffer: re-read those columns at their full length."""
        vals: list[bytes | None] = []
        for j in range(self.nfields):
            if self.rnulls[j].value:
                vals.append(None)
                continue
            n = self.rlens[j].value
            if n <= RESULT_BUFFER:
                vals.append(bytes(self.rviews[j][:n]))
                continue
            buf = ctypes.create_string_buffer(n)
            got = ctypes.c_ulong()
            b = Bind()
            b.buffer_type, b.buffer, b.buffer_length = MYSQL_TYPE_STRING, ctypes.cast(buf, _vp), n
            b.length = ctypes.pointer(got)
            if self.lib.mysql_stmt_fetch_column(self.st, ctypes.byref(b), j, 0):
                raise self.conn.error(self.st)
            vals.append(buf.raw[:got.value])
        return tuple(vals)
