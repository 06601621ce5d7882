"""Many clients per process (issue 26): a step's clients spread over a few processes (one per CPU, as
``pgbench -j`` has one thread per job), each process keeping a transaction in flight on each of its connections.

One process per client stops scaling in the hundreds on a small machine: at 1,000 clients on 2 vCPUs the
client CPU per transaction was 3.7 times that of 8 clients (BENCHMARKS.md), the processes switching. Here
the native executor's ``mx_run`` (``workloads/native/_native.c``) sends each connection's next statement without
waiting and takes the answers in as epoll reports them (on PostgreSQL it first looks for the answer right
after sending, as pgbench does, and runs up to ``EAGER_TXNS`` of a connection's transactions in a row while answers
are in at once: BENCHMARKS.md, "Sixth time"); the program, its draws, its statements' latencies and its tallies
are the ones :mod:`workloads.native` runs, on the same connections it opens.

What the parent sees does not change: every client keeps its own pipe and index and sends Ready, one
IntervalCounts per interval (its own transactions, latencies counted from the end of its previous transaction
on its connection), Lost / Aborted / Reconnected, and Done, through the same
:class:`~workloads.loop.ClientLoop` bookkeeping. The latencies are the one exception: the C side counts each
client's transactions and folds the whole process's latencies (and statement latencies) into one histogram an
interval, which the first client to report that interval carries; the parent merges every report of an interval
alike, so the interval's and the step's histograms are the same as if each client had carried its own; the
orchestrator merges one histogram per process instead of one per client, and the clients do no Python work per
transaction. The process's CPU is handed out so that the clients' figures
add up to it: each report takes the CPU since the last report of any client of the process, and the first
Done takes the process's CPU (the "busiest client" is then the busiest process).

What differs from one process per client, and why:
- A client inside a statement at an interval's end still reports the transactions it completed in the
  interval, with how long that statement has been running (``in_statement_ns``): the parent counts its
  silence from the statement's start, so ``--statement-timeout`` and the step's end find a blocked client as
  they find one blocked in its own process, while the interval is written whole and on time (a client of
  its own process, blocked in the statement, reports only once it returns). At the step's end no new
  transaction starts, those in flight finish, each client reports and sends Done; a client still in a statement never does, and the step's
  stuck-statement handling names it and terminates the process (its other clients have reported).
- A retried transaction (serialization failure, deadlock) runs synchronously on its connection while the
  process's other connections wait: rare, and bounded by ``--max-tries``.
- A lost connection is tried again at once and after ``RECONNECT_TRY_S``; then the client is out (Lost): a
  back-off of seconds per client would stall the process's other clients.

Only the closed loop is multiplexed: ``--rate``, ``--think``, ``--connect-per-transaction``, the simple
protocol, workloads without a native program (custom scripts outside its subset), TPC-C with stored procedures
(its outcomes are counted from the Python-side draws around each batch) and ``DBDIAG_PY_LOOP=1`` run one
process per client as before. ``DBDIAG_MUX=0`` forces one process per client, ``DBDIAG_MUX=1`` multiplexes from
2 clients; ``DBDIAG_MUX_PROCS`` sets the number of processes.
"""

from __future__ import annotations

import os
import signal
import time
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from diag.core.errors import DbError
from workloads.base import Runner
from workloads.steps.loop import TICK_NS, ClientLoop, ClientSpec, _Again, _End, error_key
from workloads.steps.messages import Done, Fatal, Go, Lost, Ready, Reconnected
from workloads.native.native import NativeClient, native_runner
from workloads.native.nativelib import LABEL, _native, available, enabled
from workloads.native.program import Unsupported
from workloads.steps.stuck import session_id

MUX_FROM = 32          # clients in a step from which they share processes (below: one process per client)
EAGER_TXNS = 64        # PostgreSQL: transactions a connection runs back to back while answers are in at once
END_TICK_NS = 20_000_000  # after the end: how often the clients still finishing a transaction are looked at
RECONNECT_TRY_S = 0.05
MUX_LABEL = f"{LABEL}, many connections per process"


def processes(spec: ClientSpec, n: int) -> int:
    """How many processes share the step's ``n`` clients; 0: one process per client (the clients cannot be
    multiplexed, or too few to need it)."""
    env = os.environ.get("DBDIAG_MUX", "")
    if env == "0" or n < 2 or (n < MUX_FROM and env != "1") or not multiplexable(spec):
        return 0
    want = os.environ.get("DBDIAG_MUX_PROCS", "")
    procs = os.cpu_count() or 1
    return min(int(want) if want.isdigit() and int(want) > 0 else procs, n)


def multiplexable(spec: ClientSpec) -> bool:
    """Whether this step's clients can run in :func:`group_main` (see the module docstring)."""
    if not enabled() or _native is None or not hasattr(_native, "mx_run"):
        return False
    if spec.protocol != "prepared" or spec.rate or spec.think or spec.connect_per_txn:
        return False
    if not available(spec.target.dbms) or spec.workload.outcomes() is not None:
        return False
    try:
        prog = spec.workload.program(spec.ctx(0))
        if prog is None:
            return False
        prog.check()
    except Unsupported:
        return False
    return prog.statements > 0 or prog.branches


@dataclass
class _Cpu:
    """The process's CPU as its clients hand it out (seconds of user + system)."""

    mark: float = 0.0   # up to here reported in some client's interval
    done: float = 0.0   # up to here reported in some client's Done

    @staticmethod
    def now() -> float:
        t = os.times()
        return t.user + t.system


class MemberLoop(ClientLoop):
    """One client of a group: ClientLoop's bookkeeping (errors, retries, intervals) with the process's CPU
    shared out (:class:`_Cpu`) and a reconnect that does not wait seconds (the other clients would)."""

    shared: _Cpu

    def _reset_cpu(self) -> None:
        self.cpu0 = self.cpu_mark = self.shared.mark = self.shared.done = self._cpu()

    def _take_cpu(self) -> float:
        cpu = self._cpu()
        d, self.shared.mark = max(cpu - self.shared.mark, 0.0), cpu
        return d

    def reconnect(self, e: DbError) -> None:
        lost_ns = time.perf_counter_ns()
        self.client.close()
        last = e
        for wait in (0.0, RECONNECT_TRY_S):
            if self.stop.value or time.perf_counter_ns() >= self.end_ns:
                break
            time.sleep(wait)
            try:
                self.client, self.runner = self.connect()
            except DbError as e2:
                last = e2
                continue
            now = time.perf_counter_ns()
            if not self.tick(now, [], 0)[0]:
                raise _End
            self.reconnects += 1
            self.pipe.send(Reconnected(code=error_key(e), message=str(e), t_ns=lost_ns,
                                       waited_s=round((now - lost_ns) / 1e9, 3)))
            raise _Again
        self.pipe.send(Lost(code=error_key(e), message=str(e), t_ns=lost_ns, kind=last.kind))
        raise _End


@dataclass
class _Member:
    idx: int
    pipe: Any
    client: NativeClient
    runner: Runner
    connect_s: float
    loop: MemberLoop | None = None
    lat: list[int] = field(default_factory=list)
    nq: int = 0           # queries of retried transactions (programs with jumps: and of the C side's counts)
    ending: bool = False
    done: bool = False


def _connector(spec: ClientSpec, idx: int) -> Any:
    def connect() -> tuple[NativeClient, Runner]:
        got = native_runner(spec.workload, spec.target, spec.product, spec.driver, spec.protocol, spec.isolation,
                            spec.ctx(idx), nonblock=True)
        if got is None or not _native.mx_init(got[0].cap, got[0].state):
            if got is not None:
                got[0].close()
            raise DbError("the native executor cannot run this client with others in one process",
                          code="internal", kind="other")
        return got
    return connect


def group_main(indexes: list[int], spec: ClientSpec, pipes: list[Any], stop: Any) -> None:
    """Entry point of one forked process running the clients ``indexes`` (each with its pipe in ``pipes``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the parent, which tells us to stop
    members: list[_Member] = []
    try:
        for idx, pipe in zip(indexes, pipes):
            t = time.perf_counter()
            try:
                client, runner = _connector(spec, idx)()
            except DbError as e:
                pipe.send(Fatal(code=error_key(e), message=str(e), kind=e.kind))
                pipe.close()
                continue
            pipe.send(Ready(pid=os.getpid(), c_loop=True, loop=MUX_LABEL, session=session_id(client, spec.target),
                            connect_s=time.perf_counter() - t))
            members.append(_Member(idx, pipe, client, runner, time.perf_counter() - t))
        go: Go | None = None
        for m in list(members):
            msg = m.pipe.recv()
            if not isinstance(msg, Go):
                members.remove(m)
                m.client.close()
                continue
            go = msg
        if go is None:
            return
        start_ns, measure_ns, end_ns, interval_ns = go
        delay = start_ns - time.perf_counter_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
        shared = _Cpu(_Cpu.now(), _Cpu.now())
        for m in members:
            m.loop = MemberLoop(spec, m.client, m.runner, m.pipe, stop, measure_ns, end_ns, interval_ns, start_ns,
                                _connector(spec, m.idx))
            m.loop.shared = shared
        _Group(members, stop, interval_ns).run()
    except (EOFError, BrokenPipeError, OSError):
        pass  # the parent is gone
    except Exception as e:  # a bug: each client still running reports it, not a silent hang
        for m in members:
            if not m.done:
                try:
                    m.pipe.send(Fatal(code="internal", message=f"{type(e).__name__}: {e}", kind="internal"))
                except OSError:
                    pass
    finally:
        for m in members:
            for c in {id(x): x for x in (m.client, m.loop.client if m.loop else None) if x is not None}.values():
                c.close()
            try:
                m.pipe.close()
            except OSError:
                pass


class _Group:
    """The closed loop of a process's clients: ``mx_run`` until each tick, then each client's bookkeeping."""

    def __init__(self, members: list[_Member], stop: Any, interval_ns: int) -> None:
        self.m, self.stop, self.interval_ns = members, stop, interval_ns
        n = len(members)
        # The C side counts the transactions and folds their latencies for the whole group (mx_take): no Python
        # object per transaction, and one latency histogram per interval for the orchestrator to merge, carried
        # by one client's report (the parent merges every report of an interval alike), not one per client.
        # (A module built from another source is not loaded at all: workloads.native.cext.)
        self.pending: Counter[int] = Counter()  # the group's latencies not handed to a reporting client yet
        self.drained = False  # this tick's statement latencies went into a reporting client's
        eager = os.environ.get("DBDIAG_MUX_EAGER", "")  # bench/many_clients.py compares bounds
        self.cap = _native.mx_group(n, True, int(eager) if eager.isdigit() else EAGER_TXNS)
        self.caps = tuple(m.client.cap for m in members)
        self.on = bytearray(b"\x01" * n)
        self.out = array("q", bytes(16))  # a folding group writes no (client, latency) pairs
        self.busy = array("q", bytes(8 * n))

    def run(self) -> None:
        """Until every client is done. The clients' bookkeeping runs at interval boundaries, the end and a stop
        only (1,000 clients looked at every 100 ms cost a microsecond each); the C side returns every
        ``TICK_NS`` so that a stop is seen within it."""
        first = self.m[0].loop
        assert first is not None
        nxt = min(first.boundary, first.end_ns)
        while any(not m.done for m in self.m):
            until = min(nxt, time.perf_counter_ns() + TICK_NS)
            _, errs = _native.mx_run(self.cap, self.caps, self.on, until, self.out, self.busy)
            for i, t0, err in errs:
                self._failed(i, t0, err)
            now = time.perf_counter_ns()
            if now >= nxt or self.stop.value:
                nxt = self._tick(now)

    def _tick(self, now: int) -> int:
        """Each client's tick (reports at interval boundaries, the end); the next tick time."""
        self._take()
        self.drained = False
        boundary, ending = 0, False
        for i, m in enumerate(self.m):
            loop = m.loop
            if m.done or loop is None:
                continue
            if now >= loop.end_ns or self.stop.value:
                m.ending, self.on[i] = True, 0
            if m.ending:
                ending = True
                if self.busy[i]:  # finishing its transaction (or stuck in it: the parent will say so)
                    continue
                self._report(m, now)
                self._done(m)
                continue
            # Inside a statement it still reports what it completed in the interval, saying since when it
            # has been in that statement: the interval is then whole at its end, however long a statement
            # takes under load (1,000 MariaDB sessions on 2 CPUs: seconds), and the parent takes the
            # client's silence (--statement-timeout, a stop) from when the statement started.
            self._report(m, now, now - self.busy[i] if self.busy[i] else 0)
            boundary = loop.boundary
        if ending:
            return now + END_TICK_NS
        end = min((m.loop.end_ns for m in self.m if m.loop is not None), default=now)
        return min(boundary or now + TICK_NS, end)

    def _report(self, m: _Member, now: int, in_statement_ns: int = 0) -> None:
        """Client ``m``'s tick: at a boundary (or the end) it reports the interval (``in_statement_ns``: how long
        its statement in flight has run; 0: none)."""
        loop = m.loop
        assert loop is not None
        if now < loop.boundary and now < loop.end_ns and not self.stop.value:
            return
        if self.pending:  # this client's report carries the group's latencies
            loop.folded_us.update(self.pending)
            self.pending.clear()
        if loop.runner.statement_latency is not None and not self.drained:  # and the group's statement latencies
            for x in self.m:
                if not x.done:
                    x.client.drain_statements(into=m.client)
            self.drained = True
        if m.client.counted:
            m.nq += m.client._take_counts()
        _, left = loop.tick(now, m.lat, self._nq(m), in_statement_ns)
        m.nq = left if m.client.counted else 0

    def _take(self) -> None:
        """A folding group's transactions since the last take into its clients' loops, its latencies into
        ``pending``."""
        counts, lat = _native.mx_take(self.cap)
        if lat:
            self.pending.update(lat)
            for m, c in zip(self.m, array("q", counts)):
                if c and m.loop is not None:
                    m.loop.folded += c

    def _done(self, m: _Member) -> None:
        loop = m.loop
        assert loop is not None
        if self.pending and all(x.done for x in self.m if x is not m):
            # the last client: latencies no report carried yet (the others ended on an error) go with it
            loop.folded_us.update(self.pending)
            self.pending.clear()
            loop.flush([], 0)
        cpu = 0.0
        if loop.k >= 0:
            now = _Cpu.now()
            cpu, loop.shared.done = max(now - loop.shared.done, 0.0), now
        m.pipe.send(Done(cpu_s=cpu, samples=loop.samples))
        m.done = True

    def _failed(self, i: int, t0: int, err: tuple[bytes, bytes, bool]) -> None:
        """Client ``i``'s transaction failed (rolled back by the C side): the client loop's recovery (retry,
        count, reconnect, abort); the client is back in the loop unless it ended."""
        m = self.m[i]
        loop = m.loop
        assert loop is not None
        self._take()  # its transactions so far, for a flush on the way (a lost connection, an abort)
        e = m.client._fail(err)
        if m.client.counted:
            m.nq += m.client._take_counts()
        try:
            q, _ = loop.recover(e, m.lat, self._nq(m), t0)
            if m.client.counted:  # else a retried transaction is one more latency, of `statements` queries
                m.nq += q
            self.on[i] = 1
        except _Again:
            m.client, m.runner = loop.client, loop.runner  # type: ignore[assignment]
            m.nq = 0
            self.caps = self.caps[:i] + (m.client.cap,) + self.caps[i + 1:]
            self.on[i] = 1
        except _End:
            m.ending = True
            self.on[i] = 0
            self._done(m)

    @staticmethod
    def _nq(m: _Member) -> int:
        """Queries of client ``m``'s transactions not reported yet."""
        loop = m.loop
        assert loop is not None
        return m.nq if m.client.counted else (len(m.lat) + loop.folded) * loop.runner.statements
