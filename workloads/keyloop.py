"""The C point-lookup loop (``workloads/_keyloop.c``), wrapped for the client loop.

A *batch* is ``batch(t0_ns, until_ns, buf) -> (n, t_last_ns, error)``: it runs point
lookups until the clock passes ``until_ns`` (or ``buf``, an ``array('q')``, is full),
writes each transaction's latency in ns (from the previous one's end, the first from
``t0_ns``) into ``buf[:n]`` and returns the time the last one ended. ``error`` is None or
the :class:`DbError` of the statement that failed (not counted in ``n``; ``t_last_ns`` is
then when that transaction started); the caller handles it as it handles a failed Python
transaction.

The C code is handed the addresses of the very library functions that the Python driver
uses for this connection (psycopg's libpq, or the libmariadb loaded by ctypes), checked
against the connection before use. Without the compiled module, or with
``DBDIAG_PY_LOOP=1``, there is no batch and the Python loop runs.
"""

from __future__ import annotations

import ctypes
import os
from array import array
from collections.abc import Callable
from typing import Any

from diag.errors import DbError

Batch = Callable[[int, int, array], tuple[int, int, "DbError | None"]]
LABEL = "C query loop"

try:
    from workloads import _keyloop  # type: ignore[attr-defined]
except ImportError:  # not compiled (no C compiler at install time)
    _keyloop = None

_PQ_FUNCS = ("PQexecPrepared", "PQresultStatus", "PQclear", "PQresultErrorField", "PQresultErrorMessage",
             "PQerrorMessage")


def enabled() -> bool:
    return _keyloop is not None and os.environ.get("DBDIAG_PY_LOOP", "") in ("", "0")


def _seed_state(seed: int) -> bytearray:
    return bytearray(((seed * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"))


def _addr(fn: Any) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


def _psycopg_libpq() -> Any | None:
    """The libpq that psycopg's ``pq`` module calls, as a ctypes library."""
    from psycopg import pq

    if pq.__impl__ == "python":
        return getattr(getattr(pq, "_pq_ctypes", None), "pq", None)
    # The binary wheel bundles its own libpq; the C build links the system one. psycopg2-binary
    # bundles another: dbdiag never loads it beside psycopg 3, but a caller might; never take that one.
    paths = []
    with open("/proc/self/maps", encoding="ascii", errors="replace") as f:
        for line in f:
            path = line.rsplit(None, 1)[-1]
            name = os.path.basename(path)
            if name.startswith("libpq") and ".so" in name and "psycopg2" not in path and path not in paths:
                paths.append(path)
    if pq.__impl__ == "binary":
        paths = [p for p in paths if "psycopg_binary" in p] or paths
    return ctypes.CDLL(paths[0]) if len(paths) == 1 else None


def pq_batch(pgconn: Any, name: bytes, lo: int, hi: int, seed: int,
             fail: Callable[[bytes, bytes], DbError]) -> Batch | None:
    """A batch of ``EXECUTE name(key)`` through libpq, or None when the C loop cannot run here.

    ``fail(sqlstate, message)`` turns a failed statement into the client's DbError.
    """
    if not enabled():
        return None
    try:
        lib = _psycopg_libpq()
        if lib is None:
            return None
        lib.PQbackendPID.restype = ctypes.c_int
        lib.PQbackendPID.argtypes = [ctypes.c_void_p]
        conn = pgconn.pgconn_ptr
        # The same library owns this connection: it reads the same backend pid psycopg does.
        if not conn or lib.PQbackendPID(conn) != pgconn.backend_pid:
            return None
        fns = tuple(_addr(getattr(lib, f)) for f in _PQ_FUNCS)
    except (OSError, AttributeError, ImportError):
        return None
    state, span, loop = _seed_state(seed), hi - lo + 1, _keyloop.pq_loop

    def batch(t0: int, until: int, buf: array) -> tuple[int, int, DbError | None]:
        n, t1, err = loop(conn, fns, name, lo, span, state, t0, until, buf)
        return n, t1, (None if err is None else fail(err[0], err[1]))
    return batch


def my_batch(stmt: Any, lo: int, hi: int, seed: int) -> Batch | None:
    """A batch of executions of a libmariadb statement (workloads.mylib) whose one parameter
    is bound as a 64-bit integer, or None when the C loop cannot run here."""
    if not enabled():
        return None
    lib = stmt.lib
    fns = tuple(_addr(f) for f in (lib.mysql_stmt_execute, lib.mysql_stmt_fetch, lib.mysql_stmt_free_result))
    st, key, rows = stmt.st, ctypes.addressof(stmt.ints[0]), stmt.nfields > 0
    state, span, loop, error = _seed_state(seed), hi - lo + 1, _keyloop.my_loop, stmt.conn.error

    def batch(t0: int, until: int, buf: array) -> tuple[int, int, DbError | None]:
        n, t1, failed = loop(st, key, fns, rows, lo, span, state, t0, until, buf)
        return n, t1, (error(st) if failed else None)
    return batch
