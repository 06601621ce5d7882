"""The pipe protocol's named messages, and the client pool with stand-in child functions (no database).

The stand-ins are forked like the real client (:func:`workloads.steps.loop.client_main`,
which the integration tests run); they only speak the protocol.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from workloads.steps.messages import Done, Fatal, Go, IntervalCounts, Lost, Ready, decode
from workloads.steps.pool import ClientPool


def test_tagged_tuples_decode_to_named_messages() -> None:
    assert decode(("ready", 42, True)) == Ready(pid=42, c_loop=True)
    assert decode(("fatal", "28P01", "password authentication failed")).code == "28P01"
    m = decode(("iv", 3, 10, 20, {"40001": 1}, 2, {150: 10}, 0.125, {"new_order": 1}))
    assert isinstance(m, IntervalCounts)
    assert (m.k, m.transactions, m.queries, m.errors, m.retries, m.latency_us, m.cpu_s, m.extra) == \
        (3, 10, 20, {"40001": 1}, 2, {150: 10}, 0.125, {"new_order": 1})
    assert decode(("lost", "lost", "server closed the connection")) == Lost("lost", "server closed the connection")
    assert decode(("done", 1.5, {})) == Done(1.5, {})
    d = Done(0.5, {"x": ["y"]})
    assert decode(d) is d


@pytest.mark.parametrize("raw", [("iv", 1, 2), ("bogus", 1), (), "iv", ["done", 1.0, {}], Go(1, 2, 3, 4)])
def test_anything_else_is_refused(raw: Any) -> None:
    with pytest.raises(ValueError):
        decode(raw)


def test_go_plans_the_step_and_goes_out_as_the_loop_reads_it() -> None:
    g = Go.plan(1_000, warmup_s=2.0, duration_s=10.0, interval_s=0.0001)
    assert g == Go(50_001_000, 2_050_001_000, 12_050_001_000, 1_000_000)   # intervals of at least 1 ms
    assert g.wire() == ("go", 50_001_000, 2_050_001_000, 12_050_001_000, 1_000_000)


# -- stand-in children (run in a forked process) ------------------------------------


def _good(index: int, spec: Any, pipe: Any, stop: Any) -> None:
    pipe.send(("ready", os.getpid(), index == 0))
    go = pipe.recv()
    assert isinstance(go, Go)
    pipe.send(("iv", 0, index + 1, 2, {}, 0, {100: index + 1}, 0.0, {}))
    while not stop.value and time.perf_counter_ns() < go.end_ns:
        time.sleep(0.01)
    pipe.send(Done(0.25, {}))   # a named message passes as well as a tagged tuple


def _exits(index: int, spec: Any, pipe: Any, stop: Any) -> None:
    pipe.close()


def _fails(index: int, spec: Any, pipe: Any, stop: Any) -> None:
    pipe.send(("fatal", "28P01", "password authentication failed"))


def _hangs(index: int, spec: Any, pipe: Any, stop: Any) -> None:
    time.sleep(60)


def _vanishes(index: int, spec: Any, pipe: Any, stop: Any) -> None:
    pipe.send(("ready", os.getpid(), False))
    pipe.recv()
    os._exit(0)


def _collect(pool: ClientPool, seconds: float) -> list[tuple[int, Any]]:
    got: list[tuple[int, Any]] = []
    deadline = time.monotonic() + seconds
    while pool.live and time.monotonic() < deadline:
        got += pool.receive(0.1)
    return got


def test_pool_starts_clients_and_hands_out_their_messages_by_index() -> None:
    with ClientPool(None, 3, main=_good) as pool:  # type: ignore[arg-type]
        ready = dict(pool.wait_ready(10))
        assert sorted(ready) == [0, 1, 2] and all(isinstance(m, Ready) for m in ready.values())
        assert ready[0].c_loop and not ready[1].c_loop and len({m.pid for m in ready.values()}) == 3
        pool.start(Go.plan(time.perf_counter_ns(), 0, 0.2, 0.1))
        assert sorted(pool.live.values()) == [0, 1, 2]
        got = _collect(pool, 10)
    assert not pool.live
    ivs = sorted((i, m.transactions) for i, m in got if isinstance(m, IntervalCounts))
    assert ivs == [(0, 1), (1, 2), (2, 3)]
    assert sorted(i for i, m in got if isinstance(m, Done)) == [0, 1, 2]


def test_pool_stop_flag_ends_clients_early() -> None:
    with ClientPool(None, 2, main=_good) as pool:  # type: ignore[arg-type]
        list(pool.wait_ready(10))
        pool.start(Go.plan(time.perf_counter_ns(), 0, 60, 1))
        t0 = time.monotonic()
        pool.stop()
        got = _collect(pool, 10)
    assert time.monotonic() - t0 < 5
    assert sorted(i for i, m in got if isinstance(m, Done)) == [0, 1]


@pytest.mark.parametrize("main,code,text", [
    (_exits, "internal", "client process exited before it was ready"),
    (_fails, "28P01", "password authentication failed"),
    (_hangs, "timeout", "client not ready within 1 s"),
])
def test_clients_that_never_get_ready_come_out_as_fatal(main: Any, code: str, text: str) -> None:
    t0 = time.monotonic()
    with ClientPool(None, 2, main=main) as pool:  # type: ignore[arg-type]
        got = list(pool.wait_ready(1.0))
        pool.start(Go.plan(time.perf_counter_ns(), 0, 1, 1))
        assert not pool.live
    assert sorted(i for i, _ in got) == [0, 1]
    assert all(m == Fatal(code, text) for _, m in got)
    assert time.monotonic() - t0 < 8   # close() terminated the hanging ones


def test_a_client_that_vanishes_mid_run_comes_out_as_fatal() -> None:
    with ClientPool(None, 1, main=_vanishes) as pool:  # type: ignore[arg-type]
        list(pool.wait_ready(10))
        pool.start(Go.plan(time.perf_counter_ns(), 0, 60, 1))
        got = _collect(pool, 10)
    assert got == [(0, Fatal("internal", "client process ended without reporting"))]


def _group(indexes: list[int], spec: Any, pipes: list[Any], stop: Any) -> None:
    """A stand-in for workloads.steps.mux.group_main: several clients, one process, a pipe each."""
    for i, pipe in zip(indexes, pipes):
        pipe.send(("ready", os.getpid(), True))
    for i, pipe in zip(indexes, pipes):
        assert isinstance(pipe.recv(), Go)
        pipe.send(("iv", 0, i + 1, 1, {}, 0, {100: i + 1}, 0.0, {}))
        pipe.send(Done(0.0, {}))


def test_pool_groups_share_processes_and_keep_a_pipe_per_client() -> None:
    with ClientPool(None, 7, groups=3, group_main=_group) as pool:  # type: ignore[arg-type]
        ready = dict(pool.wait_ready(10))
        assert sorted(ready) == list(range(7))
        assert len({m.pid for m in ready.values()}) == 3  # contiguous shares of 2, 2 and 3 clients
        pool.start(Go.plan(time.perf_counter_ns(), 0, 0.2, 0.1))
        got = _collect(pool, 10)
    ivs = sorted((i, m.transactions) for i, m in got if isinstance(m, IntervalCounts))
    assert ivs == [(i, i + 1) for i in range(7)]
    assert sorted(i for i, m in got if isinstance(m, Done)) == list(range(7))
