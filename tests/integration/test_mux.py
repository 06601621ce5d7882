"""Many connections per process (workloads.steps.mux, the native executor's mx_run) on real servers.

The server is the reference: every transaction mx_run hands back as done is one the server committed
(PostgreSQL pg_stat_database.xact_commit, MariaDB Com_commit), and it sent the same rows as the one-connection
executor sends for the same draws. Each engine gets its own throwaway server with autovacuum / nothing else
running, so the server's counters move only with what these connections do.
"""

from __future__ import annotations

import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TypeVar

import psycopg
import pytest

from diag.core import servers
from diag.core.db import Session
from diag.core.targets import Target
from workloads import hist
from workloads import load as wload
from workloads.clients.client import fastest_driver
from workloads.native.native import NativeClient, open_native
from workloads.native.nativelib import _native
from workloads.native.program import Param, Program
from workloads.steps.mux import EAGER_TXNS
from workloads.sysbench import POINT_SQL, PointSelect, sbtest_dataset
from workloads.base import ClientCtx

SCALE = 0.05
R = TypeVar("R")
CONNS = 40


@pytest.fixture(scope="module", params=["postgres", "mysql"])
def quiet(request: pytest.FixtureRequest) -> Iterator[Target]:
    """A throwaway server of each engine that commits nothing by itself (PostgreSQL: autovacuum off)."""
    if request.param == "postgres":
        srv = servers.start_postgres({"autovacuum": "off"}, instrument=False)
    else:
        srv = servers.start_mysql(instrument=False)
    t = srv.target()
    with Session(t, statement_timeout_ms=0) as s:
        wload.ensure_schema(s)
        ds = sbtest_dataset(SCALE)
        if not wload.is_loaded(s, ds):
            wload.load(s, ds, out=None)
    yield t
    srv.stop()


class Commits:
    """The server's count of committed transactions, read without adding to it: PostgreSQL's
    pg_stat_database.xact_commit from one transaction left open (stats_fetch_consistency=none: each read is
    fresh) and rolled back at the end; MariaDB's Com_commit (SHOW STATUS commits nothing)."""

    def __init__(self, t: Target) -> None:
        self.t = t
        if t.engine == "postgres":
            self.c = psycopg.connect(host=t.host or "127.0.0.1", port=t.port, user=t.user, dbname=t.database,
                                     autocommit=False)
            self.c.execute("SET stats_fetch_consistency = none")
        else:
            self.s = Session(t, statement_timeout_ms=0)
            self.s.__enter__()

    def now(self) -> int:
        if self.t.engine == "postgres":
            row = self.c.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
            return int(row.fetchone()[0])  # type: ignore[index]
        return int(self.s.query("SHOW GLOBAL STATUS LIKE 'Com_commit'")[0]["Value"])

    def settled(self) -> int:
        """The count once the backends that just ended have flushed their statistics (PostgreSQL: at exit)."""
        last, same = self.now(), 0
        while same < 3:
            time.sleep(0.3)
            now = self.now()
            same = same + 1 if now == last else 0
            last = now
        return last

    def close(self) -> None:
        if self.t.engine == "postgres":
            self.c.rollback()
            self.c.close()
        else:
            self.s.__exit__(None, None, None)


def _program() -> Program:
    p = Program()
    p.simple("BEGIN")
    p.execute(POINT_SQL, [Param(p.uniform("id", 1, int(100_000 * SCALE)))])
    p.simple("COMMIT")
    return p


def _open(t: Target, k: int, seed0: int = 1) -> list[NativeClient]:
    out = []
    for i in range(k):
        nc = open_native(t, "", fastest_driver(t.dbms), "read-committed", _program(), seed0 + i, nonblock=True)
        assert nc is not None
        assert _native.mx_init(nc.cap, nc.state) is True
        out.append(nc)
    return out


def _mx(ncs: list[NativeClient], seconds: float, call_ns: int = 100_000_000,
        group: object = None) -> tuple[list[int], list[int]]:
    """Run the connections for ``seconds`` then let every transaction in flight end: (transactions per
    connection, latencies ns). ``call_ns``: how long each mx_run call lasts at most (the step's tick)."""
    group = group or _native.mx_group(len(ncs))
    caps = tuple(nc.cap for nc in ncs)
    on = bytearray(b"\x01" * len(ncs))
    out = array("q", bytes(16 * 65536))
    busy = array("q", bytes(8 * len(ncs)))
    per, lats = [0] * len(ncs), []
    end = time.perf_counter_ns() + int(seconds * 1e9)
    while True:
        now = time.perf_counter_ns()
        if now >= end:
            on[:] = bytes(len(ncs))  # no new transaction; those in flight end
        got, errs = _native.mx_run(group, caps, on, min(now + call_ns, max(end, now + 20_000_000)), out, busy)
        assert errs == []
        for j in range(0, 2 * got, 2):
            per[out[j]] += 1
            lats.append(out[j + 1])
        if now >= end and not any(busy):
            return per, lats


def _committed(t: Target, run: Callable[[list[NativeClient]], R]) -> tuple[R, int, int]:
    """``run`` on CONNS fresh connections: (what it returned, the transactions the server committed meanwhile,
    what opening and preparing the connections commits by itself). That set-up (PostgreSQL: each prepare's
    implicit transaction) is counted by opening the same connections and running nothing, then taken off."""
    c = Commits(t)
    try:
        base = c.settled()
        for nc in _open(t, CONNS, 1000):
            nc.close()
        mid = c.settled()
        setup = mid - base
        ncs = _open(t, CONNS)
        try:
            got = run(ncs)
        finally:
            for nc in ncs:
                nc.close()
        return got, c.settled() - mid - setup, setup
    finally:
        c.close()


def test_every_transaction_counted_is_one_the_server_committed(quiet: Target) -> None:
    (per, lats), server, setup = _committed(quiet, lambda ncs: _mx(ncs, 1.5))
    assert sum(per) > CONNS * 5, per
    assert all(n > 0 for n in per), per  # every connection ran: none starved by the others
    assert server == sum(per), (server, sum(per), setup)
    assert len(lats) == sum(per) and all(v > 0 for v in lats)


def _mx_folding(ncs: list[NativeClient], seconds: float, group: object = None) -> tuple[list[int], dict[int, int], int]:
    """As _mx on a folding group (the step's): (transactions per connection, {µs bucket: count}, the longest
    wall time of one mx_run call in ns)."""
    group = group or _native.mx_group(len(ncs), True)
    caps = tuple(nc.cap for nc in ncs)
    on = bytearray(b"\x01" * len(ncs))
    out = array("q", bytes(16))  # a folding group writes no pairs: out needs no room
    busy = array("q", bytes(8 * len(ncs)))
    per, lat = [0] * len(ncs), Counter[int]()
    ended, longest = 0, 0
    end = time.perf_counter_ns() + int(seconds * 1e9)
    while True:
        now = time.perf_counter_ns()
        if now >= end:
            on[:] = bytes(len(ncs))
        got, errs = _native.mx_run(group, caps, on, max(end, now + 20_000_000), out, busy)
        longest = max(longest, time.perf_counter_ns() - now)
        assert errs == []
        ended += got
        counts, h = _native.mx_take(group)
        for i, c in enumerate(array("q", counts)):
            per[i] += c
        lat.update(h)
        if now >= end and not any(busy):
            assert ended == sum(per)  # mx_run's count is what it folded
            return per, dict(lat), longest


def test_a_folding_group_counts_what_the_server_committed(quiet: Target) -> None:
    """The step's groups count in C (mx_take): per connection, the server's commits; the latencies, one count
    per transaction, each key the lowest value of its histogram bucket, none longer than the run."""
    (per, lat, longest), server, setup = _committed(quiet, lambda ncs: _mx_folding(ncs, 1.5))
    assert sum(per) > CONNS * 5 and all(n > 0 for n in per), per
    assert server == sum(per), (server, sum(per), setup)
    assert sum(lat.values()) == sum(per)
    assert all(hist.bucket(us) == us and us >= 1 for us in lat), sorted(lat)[:20]
    assert max(lat) * 1000 <= longest + 1_000_000, (max(lat), longest)  # µs bucket lows within a call


def test_answers_looked_for_right_after_sending_are_counted_as_the_server_committed(quiet: Target) -> None:
    """The step's groups (EAGER_TXNS) look for a PostgreSQL answer right after sending and run a connection's
    next transactions while answers are in at once: on this 2-vCPU machine the woken backend mostly runs on the
    sender's CPU and has answered by then. Every transaction is still one the server committed, each connection
    ran, and the early answers were found (PostgreSQL) or never looked for (MariaDB: its group waits for epoll)."""
    group = _native.mx_group(CONNS, True, EAGER_TXNS)
    (per, lat, _), server, setup = _committed(quiet, lambda ncs: _mx_folding(ncs, 1.5, group))
    assert sum(per) > CONNS * 5 and all(n > 0 for n in per), per
    assert server == sum(per), (server, sum(per), setup)
    assert sum(lat.values()) == sum(per)
    _, _, early = _native.mx_stats(group)
    if quiet.engine == "postgres":
        assert early > sum(per) // 100, ("answers found right after sending", early, sum(per))
    else:
        assert early == 0, early
    none = _native.mx_group(CONNS, True, 0)
    _committed(quiet, lambda ncs: _mx_folding(ncs, 0.3, none))
    assert _native.mx_stats(none)[2] == 0  # a bound of 0: every answer waits for epoll


def test_a_folding_group_buckets_as_the_parent_does(quiet: Target) -> None:
    """Past 2,048 µs a folding group keys each latency by its bucket of the parent's histograms (as
    workloads.hist.fold): transactions that sleep 3.1 ms land at or above hist.bucket(3,100), never below."""
    p = Program()
    p.simple("SELECT pg_sleep(0.0031)" if quiet.engine == "postgres" else "DO SLEEP(0.0031)")
    ncs = []
    for i in range(4):
        nc = open_native(quiet, "", fastest_driver(quiet.dbms), "read-committed", p, 500 + i, nonblock=True)
        assert nc is not None and _native.mx_init(nc.cap, nc.state) is True
        ncs.append(nc)
    try:
        per, lat, longest = _mx_folding(ncs, 0.6)
    finally:
        for nc in ncs:
            nc.close()
    assert sum(per) >= 4 * 10 and sum(lat.values()) == sum(per), (per, lat)
    assert min(lat) >= hist.bucket(3100), sorted(lat)
    assert all(us > 2048 and hist.bucket(us) == us for us in lat), sorted(lat)
    assert max(lat) * 1000 <= longest + 1_000_000, (max(lat), longest)


def test_statements_and_rows_equal_one_connection_runs(quiet: Target) -> None:
    """A connection in the group sends what the one-connection executor sends for the same seed: the same
    statements, the same rows (point selects on distinct ids each return one row)."""
    ncs = _open(quiet, 4, 77)
    try:
        per, _ = _mx(ncs, 0.5)
        stats = [nc.stats() for nc in ncs]
    finally:
        for nc in ncs:
            nc.close()
    for n, st in zip(per, stats):
        ((execs, rows, ns),) = st
        assert execs == rows == n and ns > 0  # one statement per transaction, one row each
    ref = open_native(quiet, "", fastest_driver(quiet.dbms), "read-committed", _program(), 77)
    assert ref is not None
    try:
        buf = array("q", bytes(8 * per[0]))
        t0 = time.perf_counter_ns()
        got, _, err = ref.batch(t0, t0 + 10**13, buf)
        assert (got, err) == (per[0], None)
        assert ref.stats()[0][:2] == stats[0][0][:2]
    finally:
        ref.close()


def test_the_workload_program_multiplexes(quiet: Target) -> None:
    """point-select's own program (no BEGIN/COMMIT) through the group: every statement a row."""
    prog = PointSelect().program(ClientCtx(0, 1, SCALE, seed=5))
    assert prog is not None
    ncs = []
    for i in range(8):
        nc = open_native(quiet, "", fastest_driver(quiet.dbms), "read-committed", prog, i, nonblock=True)
        assert nc is not None and _native.mx_init(nc.cap, nc.state)
        ncs.append(nc)
    try:
        per, _ = _mx(ncs, 0.5)
        for n, nc in zip(per, ncs):
            assert n > 0 and nc.stats()[0][:2] == (n, n)
    finally:
        for nc in ncs:
            nc.close()


def test_a_connection_is_registered_once_not_at_every_call(quiet: Target) -> None:
    """The step calls mx_run every tick (100 ms) and each call ends with connections idle (the deadline came
    between two of their transactions). Before: each of them left the epoll set then came back at the next
    call, two epoll_ctl per connection per call (0.2-0.3 per transaction at 200 clients, bench/pg_many_events.py).
    Now a connection is registered once: about one epoll_ctl per connection over a run of 50 short calls."""
    ncs = _open(quiet, CONNS, 300)
    group = _native.mx_group(len(ncs))
    try:
        t0 = time.perf_counter_ns()
        per, _ = _mx(ncs, 0.5, call_ns=10_000_000, group=group)
        calls = (time.perf_counter_ns() - t0) // 10_000_000
    finally:
        for nc in ncs:
            nc.close()
    waits, ctls, _ = _native.mx_stats(group)
    assert all(n > 0 for n in per), per
    assert calls >= 40 and waits >= calls, (calls, waits)
    assert ctls <= 2 * CONNS, (ctls, CONNS, calls)
