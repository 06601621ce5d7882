"""The native executor (``workloads/_native.c``): a workload's :class:`~workloads.program.Program` run in C
on a connection the C side opens and owns.

The C module dlopen()s the libpq that psycopg's binary wheel bundles (the system libpq when psycopg is
not the binary build) or libmariadb, connects with the target's settings, prepares the program's
statements and runs whole transactions between two ticks of the client loop
(:meth:`~workloads.loop.ClientLoop.closed_batch`). Nothing is borrowed from a Python driver: no handle,
no function address, no /proc/self/maps.

A :class:`NativeClient` stands in for the workload :class:`~workloads.clientbase.Client` of its client
process: its ``txn()`` runs one transaction (the retry after a serialization failure or deadlock), its
``batch`` many, and failures come back as the same :class:`DbError` classes as the Python loop's (the
engine's ``map_error``; a lost connection as kind "lost"; a ``\\set`` error as code "script"). The C
side rolls back a failed transaction before it returns. Besides each transaction's latency (into the
step's HDR histogram, as the Python loop's), the C side times each statement; ``statement_latency()``
hands them out per distinct statement at each report interval (the result row's
``statement_latency_ms``).

When the module is not compiled, the library cannot be loaded, the protocol is not ``prepared``, the
loop is paced (``--rate``, ``--think``) or the workload has no program (a custom script outside the
supported subset), the Python loop runs; ``DBDIAG_PY_LOOP=1`` forces it. A program with jumps (client-side
TPC-C) sends a different number of statements per transaction: the C side counts them, and its outcome
tallies, per batch (``counts``).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable
from typing import Any

from diag.db import DriverInfo
from diag.engines import MYSQL, POSTGRES
from diag.errors import DbError
from diag.targets import Target
from workloads import mylib
from workloads.base import ClientCtx, Runner, Workload
from workloads.clientbase import APP_NAME, ISOLATION_SQL, Client, Rows
from workloads.nativelib import LABEL, _native, enabled, my_library, pg_library
from workloads.pgclient import _PgFailure
from workloads.program import OP_EXEC, OP_SIMPLE, Program, Tally, Unsupported, seed_state, tallied
from workloads.sql import Stmt

CONNECT_TIMEOUT_S = 5


def _conninfo(target: Target, isolation: str = "") -> bytes:
    """A libpq conninfo string from the engine's connection settings (values quoted); with ``isolation``
    (a key of ISOLATION_SQL) the session's isolation level rides in the start-up packet, which saves the
    round trip of a SET on each connection (it counts under --connect-per-transaction)."""
    kw = POSTGRES.connect_kwargs(target, DriverInfo("libpq", "", None), True, CONNECT_TIMEOUT_S, APP_NAME)
    if isolation:
        level = ISOLATION_SQL[isolation].lower().replace(" ", "\\ ")  # a space in options is escaped
        kw["options"] = f"-c default_transaction_isolation={level}"
    parts = []
    for k, v in kw.items():
        if v is None or v == "":
            continue
        s = str(v).replace("\\", "\\\\").replace("'", "\\'")
        parts.append(f"{k}='{s}'")
    return " ".join(parts).encode()


def _open_pg(target: Target, isolation: str) -> Any:
    path = pg_library()
    if path is None:
        return None
    cap, why, detail = _native.pg_open(path.encode(), _conninfo(target, isolation))
    if cap is None and why == "connect":
        msg = detail.decode(errors="replace").strip() or "connection failed"
        raise POSTGRES.map_error(_PgFailure(msg, ""), target.label)
    return cap


def _open_my(target: Target, isolation: str) -> Any:
    path = my_library()
    if path is None:
        return None
    host = None if target.socket else (target.host or "127.0.0.1")
    port = 0 if target.socket else (target.port or 3306)
    cap, why, detail = _native.my_open(path.encode(), host, target.user.encode(), (target.password or "").encode(),
                                       target.database or None, port, target.socket or None, CONNECT_TIMEOUT_S)
    if cap is None and why == "connect":
        raise MYSQL.map_error(mylib._MyFailure(int(detail[0]), detail[1].decode(errors="replace")), target.label)
    return cap


def _pg_error(label: str, code: bytes, msg: bytes, lost: bool) -> DbError:
    text = msg.decode(errors="replace").strip() or "query failed"
    err = POSTGRES.map_error(_PgFailure(text, code.decode(errors="replace")), label)
    return DbError(str(err), code=err.code, kind="lost") if lost and err.kind not in ("lost", "connect") else err


def _my_error(label: str, code: bytes, msg: bytes, lost: bool) -> DbError:
    return MYSQL.map_error(mylib._MyFailure(int(code or b"0"), msg.decode(errors="replace")), label)


# Per engine: open a connection, the prepared form of a statement, the isolation statement, the error
# mapping. Keyed by Engine.name (tests/unit/test_architecture.py: every engine is covered).
OPENERS: dict[str, Callable[[Target, str], Any]] = {POSTGRES.name: _open_pg, MYSQL.name: _open_my}
# Engines whose opener sets the isolation level itself (no SET statement after connecting).
ISOLATION_AT_CONNECT = frozenset({POSTGRES.name})
PREPARED_FORM: dict[str, Callable[[Stmt], str]] = {POSTGRES.name: Stmt.numbered, MYSQL.name: Stmt.qmarks}
ISOLATION_PREFIX: dict[str, str] = {POSTGRES.name: "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL ",
                                    MYSQL.name: "SET SESSION TRANSACTION ISOLATION LEVEL "}
ERRORS: dict[str, Callable[[str, bytes, bytes, bool], DbError]] = {POSTGRES.name: _pg_error,
                                                                   MYSQL.name: _my_error}


class NativeClient(Client):
    """One native connection with a loaded program (see the module docstring)."""

    def __init__(self, target: Target, driver: DriverInfo, protocol: str, isolation: str, product: str,
                 prog: Program, seed: int, cap: Any) -> None:
        # Not Client.__init__: the connection is the C side's own, opened by open_native.
        self.target, self.driver, self.protocol, self.isolation = target, driver, protocol, isolation
        self.product = product or self.product
        self._n = 0
        self.conn = None
        self.cap, self.program = cap, prog
        name = target.dbms.name
        self._err = ERRORS[name]
        self.state = seed_state(seed)
        if name not in ISOLATION_AT_CONNECT:
            self.execute(ISOLATION_PREFIX[name] + ISOLATION_SQL[isolation])
        form = PREPARED_FORM[name]
        for stmt in prog.stmts:
            idx, err = _native.prepare(cap, form(stmt).encode(), stmt.nparams)
            if err is not None:
                raise self._fail(err)
        _native.load(cap, prog.packed(), tuple(t.encode() for t in prog.texts),
                     tuple(tuple(s.encode() for s in p) for p in prog.pools), len(prog.names))
        self._one = array("q", [0])
        # Outcome tallies (TPC-C's committed New-Orders) and, for a program with jumps, the statements each
        # transaction sent: counted by the C side, read once per batch.
        self.extra: Counter[str] = Counter()
        self.counted = prog.branches or bool(prog.tallies)
        self._sent = 0
        run, state, fail = _native.run, self.state, self._fail
        # Per-statement latencies: the C side counts them per statement slot ({µs: count}); they are
        # merged per distinct statement (the 10 point selects of read-only are one) at each batch's end,
        # which also empties the C side's store of long ones before it fills.
        self.labels = statement_labels(prog)
        pending: dict[str, Counter[int]] = {k: Counter() for k in sorted(set(self.labels))}
        columns = [pending[label] for label in self.labels]
        self._pending = pending
        drain = _native.drain

        def batch(t0: int, until: int, buf: array) -> tuple[int, int, DbError | None]:
            n, t1, err = run(cap, state, t0, until, buf, True)
            if n:
                for dest, counts in zip(columns, drain(cap)):
                    if counts:
                        dest.update(counts)
                if self.counted:
                    self._sent += self._take_counts()
            return n, t1, (None if err is None else fail(err))
        self.batch = batch

    def _take_counts(self) -> int:
        """Statements of the transactions completed since the last call; their tallies into ``extra``."""
        sent, tallies = _native.counts(self.cap)
        for name, k in zip(self.program.tallies, tallies):
            if k:
                self.extra[name] += k
        return int(sent)

    def sent(self) -> int:
        """Statements the batched transactions sent since the last call (a program with jumps: they differ)."""
        n, self._sent = self._sent, 0
        return n

    def _fail(self, err: tuple[bytes, bytes, bool]) -> DbError:
        code, msg, lost = err
        if code == b"script":
            return DbError(msg.decode(errors="replace"), code="script", kind="other")
        return self._err(self.target.label, code, msg, bool(lost))

    def txn(self) -> int:
        """One transaction (the retry path of the client loop); DbError when it fails."""
        n, _, err = _native.run(self.cap, self.state, 0, 0, self._one)
        if err is not None:
            raise self._fail(err)
        return self._take_counts() if self.counted else self.program.statements

    def execute(self, sql: str) -> Rows:
        err = _native.exec_simple(self.cap, sql.encode())
        if err is not None:
            raise self._fail(err)
        return ()

    def session_id(self) -> int:
        """The server's id of this connection (PostgreSQL backend PID, MySQL thread id); 0 when unknown."""
        return int(_native.session_id(self.cap))

    def statement_latency(self) -> dict[str, dict[int, int]]:
        """``{statement: {µs: count}}`` of the statements of the batched transactions since the last call
        (what an interval sends; the retry path's single transactions are not in it)."""
        out = {label: dict(counts) for label, counts in self._pending.items() if counts}
        for counts in self._pending.values():
            counts.clear()
        return out

    def after_error(self) -> None:
        """The C side rolled the failed transaction back already."""

    def stats(self) -> tuple[tuple[int, int, int], ...]:
        """(executions, result rows, ns) per prepared statement of the program."""
        return _native.stats(self.cap)

    def close(self) -> None:
        if self.cap is not None:
            _native.close(self.cap)
            self.cap = None


def open_native(target: Target, product: str, driver: DriverInfo, isolation: str, prog: Program,
                seed: int) -> NativeClient | None:
    """A connected :class:`NativeClient` running ``prog``, or None when the native executor cannot run
    here (module, library, program limits, a program the C side refuses: the Python loop runs it).
    DbError when the server refuses the connection or a statement."""
    if not enabled() or target.dbms.name not in OPENERS:
        return None
    try:
        prog.check()
    except Unsupported:
        return None
    cap = OPENERS[target.dbms.name](target, isolation)
    if cap is None:
        return None
    try:
        return NativeClient(target, driver, "prepared", isolation, product, prog, seed, cap)
    except ValueError:  # the C loader refused what Program.check passed, or prepare's parameter count differs
        _native.close(cap)
        return None
    except BaseException:
        _native.close(cap)
        raise


def native_runner(workload: Workload, target: Target, product: str, driver: DriverInfo, protocol: str,
                  isolation: str, ctx: ClientCtx) -> tuple[NativeClient, Runner] | None:
    """The client and runner of ``workload`` on the native executor, or None (the Python loop runs)."""
    if protocol != "prepared" or not enabled():
        return None
    try:
        prog = workload.program(ctx)
    except Unsupported:
        return None
    if prog is None:
        return None
    nc = open_native(target, product, driver, isolation, prog, ctx.key_seed())
    if nc is None:
        return None
    runner = Runner(nc.txn, nc.extra, batch=nc.batch, statements=prog.statements,
                    statement_latency=nc.statement_latency, sent=nc.sent if prog.branches else None)
    tally = workload.outcomes()
    if tally is not None:
        _count_outcomes(nc, runner, tally)
    return nc, runner


def _count_outcomes(nc: NativeClient, runner: Runner, tally: Tally) -> None:
    """Make ``runner``'s batch and txn count the workload's outcomes into ``runner.extra`` from the generator's
    state around them (one int conversion per batch: nothing added to the C loop)."""
    st, extra, inner = nc.state, runner.extra, nc.batch

    def state() -> int:
        return int.from_bytes(st, "little")

    def batch(t0: int, until: int, buf: array) -> tuple[int, int, DbError | None]:
        s0 = state()
        out = inner(t0, until, buf)
        tally(s0, state(), out[2] is not None, extra)
        return out
    runner.batch = batch
    runner.txn = tallied(nc.txn, state, tally, extra)


def statement_labels(prog: Program) -> list[str]:
    """The label of each statement a transaction sends, in order: its text with ``?`` placeholders."""
    out = []
    for op, pc in prog.ops():
        if op == OP_EXEC:
            out.append(prog.stmts[prog.words[pc + 1]].qmarks())
        elif op == OP_SIMPLE:
            out.append(prog.texts[prog.words[pc + 1]])
    return out
