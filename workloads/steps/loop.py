"""The client process: one connection, one query loop, figures sent once per interval.

The closed loop holds only the transaction call, one ``perf_counter_ns``, a list
append and one integer comparison; everything else (folding latencies into a
histogram, CPU times, talking to the parent, checking the stop flag) happens at
"ticks", at most every 100 ms and at each report-interval boundary. Failures
leave the fast path through the ``except`` branch: serialization failures and
deadlocks are retried up to ``max_tries``; other errors are counted by code with
a few sample messages (``--on-error abort``: the first of them ends the step). A
lost connection counts as an error and is re-established with a bounded back-off
(:data:`RECONNECT_FIRST_S` doubling to :data:`RECONNECT_MAX_S`, for at most
:data:`RECONNECT_GIVE_UP_S`): the client goes on with a new connection and the
workload's statements prepared again, or, when the server does not answer, ends
with a "lost" record, from which the parent decides whether the server is gone.

Messages to the parent: one duplex pipe per client, the named messages of
:mod:`workloads.steps.messages` (Ready or Fatal, then IntervalCounts per interval,
Reconnected, Lost or Aborted, and Done last); the parent's Go starts the loop.
"""

from __future__ import annotations

import os
import random
import signal
import time
from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from diag.core.db import DriverInfo
from diag.core.errors import DbError
from diag.core.targets import Target
from workloads.base import ClientCtx, Runner, Workload
from workloads.churn import per_transaction
from workloads.clients.client import Client, open_client
from workloads.hist import fold
from workloads.steps.messages import Aborted, Done, Fatal, Go, IntervalCounts, Lost, Ready, Reconnected
from workloads.native.native import LABEL as NATIVE_LABEL
from workloads.native.native import NativeClient, native_runner
from workloads.steps.stuck import session_id

TICK_NS = 100_000_000
BATCH_CAP = 1 << 16  # latencies one C batch may write: far above a tick's worth at 1 µs per query
LOST_KINDS = ("lost", "connect")
# MariaDB 11.6+ with innodb_snapshot_isolation: "Record has changed since last read".
RETRY_CODES = ("1020",)
SAMPLES_PER_CODE = 3
# Reconnecting after a lost connection: the first try after 50 ms (a terminated backend is replaced at
# once), doubling to 1 s between tries; after 5 s of failed tries the server is taken as gone (a restart
# with crash recovery can take longer: the step is then cut, not stretched past what it measured).
RECONNECT_FIRST_S = 0.05
RECONNECT_MAX_S = 1.0
RECONNECT_GIVE_UP_S = 5.0


@dataclass(frozen=True)
class ClientSpec:
    """Everything a client process needs (inherited through fork, never pickled)."""

    target: Target
    product: str
    driver: DriverInfo
    workload: Workload
    clients: int
    scale: float
    protocol: str
    isolation: str
    max_tries: int
    rate: float | None
    think: bool
    seed: int
    on_error: str = "continue"  # "continue" | "abort" (DriverOptions.on_error)
    # Where this pool's clients sit among the step's: a Dask worker runs clients first_index ..
    # first_index + clients - 1 of step_clients (0: this pool is the whole step).
    first_index: int = 0
    step_clients: int = 0
    connect_per_txn: bool = False  # a new connection for each transaction (workloads.churn)

    def ctx(self, index: int) -> ClientCtx:
        """Who this pool's client ``index`` is within the whole step: on a Dask worker its index counts the
        other workers' clients too, so TPC-C home warehouses (index mod W) do not repeat across workers."""
        return ClientCtx(self.first_index + index, self.step_clients or self.clients, self.scale, self.think,
                         self.seed)

    def client_rate(self) -> float:
        """Transactions/s one client is paced at under ``--rate`` (the step's total): the rate over all the
        step's clients, so W workers together send the rate, not W times it. 0 without --rate."""
        return (self.rate or 0) / max(self.step_clients or self.clients, 1)


def error_key(e: DbError) -> str:
    """SQLSTATE or MySQL error number; the kind when the driver gave no code."""
    return e.code or e.kind or "other"


def retryable(e: DbError) -> bool:
    return e.kind in ("serialization", "deadlock") or e.code in RETRY_CODES


class _End(Exception):
    """This client stops: connection lost for good, the step aborted, or told to stop."""


class _Again(Exception):
    """The connection was re-established: the loop starts over with the new client and runner."""


class _Lost(Exception):
    """The connection of the failed transaction is gone (``error``)."""

    def __init__(self, error: DbError) -> None:
        super().__init__(str(error))
        self.error = error


class _Abort(_Lost):
    """``--on-error abort``: ``error`` ends the step."""


Connect = Callable[[], "tuple[Client, Runner]"]


class ClientLoop:
    """One client's measuring loops; ``connect()`` opens a client and builds its runner again after a
    lost connection."""

    def __init__(self, spec: ClientSpec, client: Client, runner: Runner, pipe: Any, stop: Any,
                 measure_ns: int, end_ns: int, interval_ns: int, start_ns: int, connect: Connect) -> None:
        self.spec, self.client, self.runner, self.pipe, self.stop = spec, client, runner, pipe, stop
        self.measure_ns, self.end_ns, self.interval_ns = measure_ns, end_ns, interval_ns
        self.connect = connect
        self.errors: Counter[str] = Counter()
        self.samples: dict[str, list[str]] = {}
        self.retries = self.reconnects = 0
        # Transactions counted outside ``lat`` since the last flush (a folding group of many clients counts them
        # in C: workloads.steps.mux), and latencies {µs: count} this client carries for its group's clients.
        self.folded = 0
        self.folded_us: Counter[int] = Counter()
        if start_ns >= measure_ns:
            self.k, self.boundary = 0, measure_ns + interval_ns
            self.cpu0 = self.cpu_mark = self._cpu()
        else:
            self.k, self.boundary = -1, measure_ns
            self.cpu0 = self.cpu_mark = 0.0

    @staticmethod
    def _cpu() -> float:
        t = os.times()
        return t.user + t.system

    def _reset_cpu(self) -> None:
        """The measured part begins (the warmup's end): CPU counts from here."""
        self.cpu0 = self.cpu_mark = self._cpu()

    def _take_cpu(self) -> float:
        """CPU seconds of this client since the last interval it reported."""
        cpu = self._cpu()
        d, self.cpu_mark = cpu - self.cpu_mark, cpu
        return d

    # -- failures (off the fast path) --------------------------------------------------

    def record(self, e: DbError) -> None:
        key = error_key(e)
        self.errors[key] += 1
        s = self.samples.setdefault(key, [])
        msg = str(e)
        if len(s) < SAMPLES_PER_CODE and msg not in s:
            s.append(msg)

    def failed(self, e: DbError) -> int | None:
        """Roll back, retry when allowed; queries of the successful retry, or None. Raises _Lost when
        the connection is gone, _Abort (with ``--on-error abort``) for an error that ends the step."""
        tries = 1
        txn = self.runner.txn
        while True:
            if e.kind not in LOST_KINDS:
                try:
                    self.client.after_error()
                except DbError as e2:
                    if e2.kind in LOST_KINDS:
                        e = e2
            if e.kind in LOST_KINDS:
                self.record(e)
                raise (_Abort if self.spec.on_error == "abort" else _Lost)(e)
            if tries < self.spec.max_tries and retryable(e):
                tries += 1
                self.retries += 1
                try:
                    return txn()
                except DbError as e3:
                    e = e3
                    continue
            self.record(e)
            # Serialization failures and deadlocks that ran out of tries do not abort (as in pgbench).
            if self.spec.on_error == "abort" and not retryable(e):
                raise _Abort(e)
            return None

    def recover(self, e: DbError, lat: list[int], nq: int, t0: int) -> tuple[int, int]:
        """After a failed transaction that started at ``t0``: (queries of its successful retry or
        0, now), its latency appended when a retry succeeded. On a lost connection or an abort the
        figures so far are flushed and _Again (connected again) or _End is raised."""
        try:
            q = self.failed(e)
        except _Abort as a:
            self.flush(lat, nq)
            self.pipe.send(Aborted(code=error_key(a.error), message=str(a.error), t_ns=time.perf_counter_ns(),
                                   kind=a.error.kind))
            raise _End from None
        except _Lost as lost:
            self.flush(lat, nq)
            self.reconnect(lost.error)
        t1 = time.perf_counter_ns()
        if q is None:
            return 0, t1
        lat.append(t1 - t0)
        return q, t1

    def reconnect(self, e: DbError) -> None:
        """Connect again with a bounded back-off after ``e`` lost the connection; raises _Again once
        connected (the reconnect counted), _End (a "lost" record sent) when the back-off gives up,
        the step ends or the parent says stop."""
        pcn = time.perf_counter_ns
        lost_ns = pcn()
        give_up = min(lost_ns + int(RECONNECT_GIVE_UP_S * 1e9), self.end_ns)
        self.client.close()
        delay, last = RECONNECT_FIRST_S, e
        while True:
            now = pcn()
            if self.stop.value or now >= give_up:  # the error that lost it; the kind of the last try's
                self.pipe.send(Lost(code=error_key(e), message=str(e), t_ns=lost_ns, kind=last.kind))
                raise _End
            time.sleep(min(delay, (give_up - now) / 1e9))
            delay = min(delay * 2, RECONNECT_MAX_S)
            if self.stop.value:
                continue
            try:
                self.client, self.runner = self.connect()
                break
            except DbError as e2:
                last = e2
        now = pcn()
        if not self.tick(now, [], 0)[0]:  # the boundaries passed while away (nothing to flush), or the end
            raise _End
        self.reconnects += 1
        self.pipe.send(Reconnected(code=error_key(e), message=str(e), t_ns=lost_ns,
                                   waited_s=round((now - lost_ns) / 1e9, 3)))
        raise _Again

    # -- ticks ----------------------------------------------------------------------

    def tick(self, t1: int, lat: list[int], nq: int, in_statement_ns: int = 0) -> tuple[int, int]:
        """Flush at interval boundaries: (the next tick time or 0 to stop, the query count
        going on: 0 after a flush, else ``nq``). ``in_statement_ns``: how long the client's statement in flight
        has run (a process of many clients reports a client inside one; 0: between transactions)."""
        if t1 >= self.end_ns or self.stop.value:
            self.flush(lat, nq, in_statement_ns)
            return 0, 0
        if t1 >= self.boundary:
            self.flush(lat, nq, in_statement_ns)
            self.k = (t1 - self.measure_ns) // self.interval_ns
            self.boundary = self.measure_ns + (self.k + 1) * self.interval_ns
            nq = 0
        return min(t1 + TICK_NS, self.boundary, self.end_ns), nq

    def flush(self, lat: list[int], nq: int, in_statement_ns: int = 0) -> None:
        if self.k < 0:  # warmup: nothing counts
            self.errors.clear()
            self.retries = self.reconnects = 0
            self.runner.extra.clear()
            if self.runner.statement_latency is not None:
                self.runner.statement_latency()
            if self.runner.connect_ns is not None:
                self.runner.connect_ns()
            self._reset_cpu()
            lat.clear()
            self.folded = 0
            self.folded_us.clear()
            return
        latency_us = fold(lat)
        if self.folded_us:
            self.folded_us.update(latency_us)
            latency_us = dict(self.folded_us)
        self.pipe.send(IntervalCounts(k=self.k, transactions=len(lat) + self.folded, queries=nq,
                                      errors=dict(self.errors), retries=self.retries, latency_us=latency_us,
                                      cpu_s=self._take_cpu(),
                                      extra=dict(self.runner.extra), reconnects=self.reconnects,
                                      statement_latency_us=(self.runner.statement_latency() if
                                                            self.runner.statement_latency is not None else {}),
                                      connect_ns=self.runner.connect_ns() if self.runner.connect_ns is not None else 0,
                                      in_statement_ns=in_statement_ns))
        self.errors.clear()
        self.retries = self.reconnects = 0
        self.runner.extra.clear()
        lat.clear()
        self.folded = 0
        self.folded_us.clear()

    # -- loops ----------------------------------------------------------------------

    def closed(self) -> None:
        """As fast as the server answers: latency from the previous transaction's end."""
        pcn = time.perf_counter_ns
        txn = self.runner.txn
        lat: list[int] = []
        ap = lat.append
        nq = 0
        t0 = pcn()
        next_tick = min(t0 + TICK_NS, self.boundary, self.end_ns)
        while True:
            try:
                nq += txn()
                t1 = pcn()
                ap(t1 - t0)
            except DbError as e:
                q, t1 = self.recover(e, lat, nq, t0)
                nq += q
            if t1 >= next_tick:
                next_tick, nq = self.tick(t1, lat, nq)
                if not next_tick:
                    return
                t1 = pcn()  # time spent in the tick is not the next transaction's
            t0 = t1

    def closed_batch(self) -> None:
        """The closed loop with the transactions run in C (``runner.batch``) until each
        tick; failures take the same path as in :meth:`closed` (a retry runs ``runner.txn``)."""
        pcn = time.perf_counter_ns
        batch = self.runner.batch
        assert batch is not None
        per_txn, sent = self.runner.statements, self.runner.sent
        buf = array("q", bytes(8 * BATCH_CAP))
        lat: list[int] = []
        nq = 0
        t0 = pcn()
        next_tick = min(t0 + TICK_NS, self.boundary, self.end_ns)
        while True:
            n, t1, err = batch(t0, next_tick, buf)
            if n:
                lat += buf[:n]
                nq += sent() if sent is not None else n * per_txn
            if err is not None:
                q, t1 = self.recover(err, lat, nq, t1)
                nq += q
            if t1 >= next_tick:
                next_tick, nq = self.tick(t1, lat, nq)
                if not next_tick:
                    return
                t1 = pcn()
            t0 = t1

    def paced(self, start_ns: int) -> None:
        """Open loop (``--rate``: Poisson arrivals, latency from the scheduled start, so a
        stalled server shows up as latency, not as fewer samples) or think time (TPC-C
        ``--think``: latency from the actual start)."""
        pcn = time.perf_counter_ns
        txn = self.runner.txn
        lat: list[int] = []
        ap = lat.append
        nq = 0
        rate = self.spec.client_rate()
        rng = random.Random(self.spec.seed * 7919 + os.getpid())
        pause = self.runner.pause_ns if self.spec.think else None

        def gap() -> int:
            if pause is not None:
                return pause()
            return int(rng.expovariate(rate) * 1e9)

        sched = max(start_ns, pcn()) + gap()
        next_tick = min(pcn() + TICK_NS, self.boundary, self.end_ns)
        while True:
            now = pcn()
            if now >= next_tick:
                next_tick, nq = self.tick(now, lat, nq)
                if not next_tick:
                    return
                continue
            if sched > now:
                time.sleep((min(sched, next_tick) - now) / 1e9)
                continue
            t0 = sched if pause is None else now
            try:
                nq += txn()
                t1 = pcn()
                ap(t1 - t0)
            except DbError as e:
                q, t1 = self.recover(e, lat, nq, t0)
                nq += q
            sched = (sched if pause is None else t1) + gap()


def run_loops(loop: ClientLoop, start_ns: int) -> None:
    """The loop this client's options and runner call for, started over after each reconnect (the new
    runner may differ: the native executor may not be available again) until the client ends."""
    spec = loop.spec
    while True:
        runner = loop.runner
        try:
            if spec.rate or (spec.think and runner.pause_ns is not None):
                loop.paced(start_ns)
            elif runner.batch is not None and not spec.think:
                loop.closed_batch()
            else:
                loop.closed()
            return
        except _Again:
            continue
        except _End:
            return


def client_main(index: int, spec: ClientSpec, pipe: Any, stop: Any) -> None:
    """Entry point of one forked client process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the parent, which tells us to stop
    ctx = spec.ctx(index)
    client: Client | None = None
    loop: ClientLoop | None = None

    # The native executor runs the closed loop only; a paced loop (--rate, --think) calls txn() itself.
    native_ok = not spec.rate and not spec.think

    def connect() -> tuple[Client, Runner]:
        got = native_runner(spec.workload, spec.target, spec.product, spec.driver, spec.protocol, spec.isolation,
                            ctx) if native_ok else None
        if got is not None:
            return got
        c = open_client(spec.target, spec.protocol, spec.isolation, spec.product, spec.driver)
        try:
            return c, spec.workload.client(c, ctx)
        except BaseException:
            c.close()
            raise
    if spec.connect_per_txn:
        connect = per_transaction(connect)
    try:
        t_connect = time.perf_counter()
        try:
            client, runner = connect()
        except DbError as e:
            pipe.send(Fatal(code=error_key(e), message=str(e), kind=e.kind))
            return
        c_loop = runner.batch is not None and isinstance(client, NativeClient) and not spec.rate and not spec.think
        pipe.send(Ready(pid=os.getpid(), c_loop=c_loop, loop=NATIVE_LABEL if c_loop else "",
                        session=session_id(client, spec.target), connect_s=time.perf_counter() - t_connect))
        msg = pipe.recv()
        if not isinstance(msg, Go):
            return
        start_ns, measure_ns, end_ns, interval_ns = msg
        delay = start_ns - time.perf_counter_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
        loop = ClientLoop(spec, client, runner, pipe, stop, measure_ns, end_ns, interval_ns, start_ns, connect)
        run_loops(loop, start_ns)
        cpu = loop._cpu() - loop.cpu0 if loop.k >= 0 else 0.0
        pipe.send(Done(cpu_s=cpu, samples=loop.samples))
    except (EOFError, BrokenPipeError, OSError):
        pass  # the parent is gone: nothing left to report to
    except Exception as e:  # a bug in a workload: report it as this client's end, not a silent hang
        try:
            pipe.send(Fatal(code="internal", message=f"{type(e).__name__}: {e}", kind="internal"))
        except OSError:
            pass
    finally:
        for c in {id(x): x for x in (client, loop.client if loop is not None else None) if x is not None}.values():
            c.close()
        try:
            pipe.close()
        except OSError:
            pass
