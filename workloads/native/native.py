"""The native executor (``workloads/native/_native.c``): a workload's :class:`~workloads.native.program.Program` run in C
on a connection the C side opens and owns.

The C module dlopen()s the libpq that psycopg's binary wheel bundles (the system libpq when psycopg is
not the binary build) or libmariadb, connects with the target's settings, prepares the program's
statements and runs whole transactions between two ticks of the client loop
(:meth:`~workloads.steps.loop.ClientLoop.closed_batch`). Nothing is borrowed from a Python driver: no handle,
no function address, no /proc/self/maps.

A :class:`NativeClient` stands in for the workload :class:`~workloads.clients.clientbase.Client` of its client
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

from diag.core.db import DriverInfo
from diag.core.errors import DbError
from diag.core.targets import Target
from workloads.base import ClientCtx, Runner, Workload
from workloads.clients.clientbase import ISOLATION_SQL, Client, Rows
from workloads.engines import workload_parts
from workloads.native.cext import LABEL, _native, enabled
from workloads.native.program import OP_EXEC, OP_SIMPLE, Program, Tally, Unsupported, seed_state, tallied
from workloads.clients.sql import Stmt

# A statement's prepared form, by the engine's Engine.placeholder_style. How an engine's connection is opened and
# its error codes read is its native binding (NativeBinding in workloads.engines).
PREPARED_FORMS: dict[str, Callable[[Stmt], str]] = {"numbered": Stmt.numbered, "qmarks": Stmt.qmarks}


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
        self._err = workload_parts(target.dbms).native.error
        self.state = seed_state(seed)
        if not target.dbms.isolation_at_connect:
            self.execute(target.dbms.isolation_prefix_sql + ISOLATION_SQL[isolation])
        form = PREPARED_FORMS[target.dbms.placeholder_style]
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
        self._pending, self._columns = pending, columns
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

    def drain_statements(self, into: NativeClient | None = None) -> None:
        """Move the statement latencies the C side counted (``mx_run``) into what :meth:`statement_latency` hands
        out (``into``'s: a client of the same program that reports them for its group); called once per interval
        (it reads every 1 µs bin of every statement slot)."""
        for dest, counts in zip((into or self)._columns, _native.drain(self.cap)):
            if counts:
                dest.update(counts)

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
                seed: int, nonblock: bool = False) -> NativeClient | None:
    """A connected :class:`NativeClient` running ``prog``, or None when the native executor cannot run
    here (module, library, program limits, a program the C side refuses: the Python loop runs it).
    ``nonblock``: the connection will be one of many in this process (:mod:`workloads.steps.mux`).
    DbError when the server refuses the connection or a statement."""
    if not enabled():
        return None
    try:
        prog.check()
    except Unsupported:
        return None
    cap = workload_parts(target.dbms).native.open(target, isolation, nonblock)
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
                  isolation: str, ctx: ClientCtx, nonblock: bool = False) -> tuple[NativeClient, Runner] | None:
    """The client and runner of ``workload`` on the native executor, or None (the Python loop runs);
    ``nonblock``: for :mod:`workloads.steps.mux`."""
    if protocol != "prepared" or not enabled():
        return None
    try:
        prog = workload.program(ctx)
    except Unsupported:
        return None
    if prog is None:
        return None
    nc = open_native(target, product, driver, isolation, prog, ctx.key_seed(), nonblock)
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
