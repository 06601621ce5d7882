"""The lock gate between a target's wait sampler and its blocking sampler (collectors/lockgate.py), and the
catch-up of the first read after skipped ticks (collectors/blocking.py: catch_up)."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from collectors.blocking import Wait, catch_up, catch_up_gap
from collectors.lockgate import HOLD_S, STALE_SLACK_S, STALE_TICKS, LockGate

TICK = 0.1


def test_no_wait_sampler_means_read_every_tick() -> None:
    assert not LockGate().quiet(TICK, now=100.0)  # never ticked: the blocking sampler reads for itself


def test_ticks_without_lock_waits_are_quiet() -> None:
    g = LockGate()
    g.tick(False, now=100.0)
    assert g.quiet(TICK, now=100.05)


def test_a_lock_wait_opens_the_gate_for_hold_s() -> None:
    g = LockGate()
    g.tick(True, now=100.0)
    for t in (100.1, 100.0 + HOLD_S - 0.1):
        g.tick(False, now=t)
        assert not g.quiet(TICK, now=t + 0.05), t
    g.tick(False, now=100.0 + HOLD_S + 0.1)
    assert g.quiet(TICK, now=100.0 + HOLD_S + 0.15)


def test_a_lock_wait_that_does_not_open_leaves_the_gate_shut_and_is_not_a_clear_tick() -> None:
    # PostgreSQL's wait sampler: a session seen waiting at one tick only (a wait of a few ms) does not open it
    g = LockGate()
    g.tick(False, now=100.0)
    g.tick(True, now=100.1, opens=False)
    assert g.quiet(TICK, now=100.15)
    assert g.since_s(now=100.15) == pytest.approx(0.15)  # the last tick that saw no lock wait is still 100.0
    g.tick(True, now=100.2, opens=True)  # the same session again at the next tick
    assert not g.quiet(TICK, now=100.25)
    assert g.since_s(now=100.25) == pytest.approx(0.25)  # its wait began after 100.0: the catch-up's bound


def test_a_silent_wait_sampler_opens_the_gate() -> None:
    g = LockGate()
    g.tick(False, now=100.0)
    late = 100.0 + STALE_TICKS * TICK + STALE_SLACK_S
    assert g.quiet(TICK, now=late - 0.01)
    assert not g.quiet(TICK, now=late + 0.01)


def _writer(g: LockGate, now: float) -> None:
    g.tick(True, now=now)


def test_the_gate_crosses_fork() -> None:
    g = LockGate()
    g.tick(False, now=100.0)
    assert g.quiet(TICK, now=100.05)
    p = mp.get_context("fork").Process(target=_writer, args=(g, 100.06))
    p.start()
    p.join(10)
    assert p.exitcode == 0
    assert not g.quiet(TICK, now=100.1)  # the child's lock wait is seen by the parent


def test_catch_up_counts_the_wait_by_the_server_clock_within_the_gap() -> None:
    waits = [Wait(1, (2,), "x", 0.1, wait_s=0.35), Wait(3, (2,), "x", 0.1, wait_s=5.0),
             Wait(4, (2,), "x", 0.1, wait_s=0.02), Wait(5, (2,), "x", 0.1)]
    got = [w.period_s for w in catch_up(waits, gap_s=0.6)]
    assert got == [0.35, 0.6, 0.02, 0.1]  # its own age, at most the gap; no age said: its period
    assert catch_up([Wait(6, (2,), "x", 0.3, wait_s=0.0)], gap_s=0.2)[0].period_s == 0.2  # period, within the gap


def test_catch_up_goes_back_no_further_than_the_last_tick_without_a_lock_wait() -> None:
    g = LockGate()
    assert catch_up_gap(g, 100.0, None) == 1.0  # nothing known: at most a window
    g.tick(False, now=99.8)
    g.tick(True, now=99.9)
    assert g.since_s(now=100.0) == pytest.approx(0.2)
    assert catch_up_gap(g, 100.0, None) == pytest.approx(0.2)
    assert catch_up_gap(g, 100.0, 99.95) == pytest.approx(0.05)  # a read since then: back to it
    assert catch_up_gap(None, 100.0, 97.0) == 1.0


def test_a_blocking_sampler_slows_down_once_the_gate_stays_open() -> None:
    from collectors.lockgate import QUIET_TICKS, RESET_S, SUSTAINED_S, SUSTAINED_TICKS, TickPace
    pace = TickPace()
    assert pace.tick_s(0.1, True, 100.0) == pytest.approx(0.1 * QUIET_TICKS)  # quiet
    assert pace.tick_s(0.1, False, 101.0) == 0.1  # a lock wait seen: the sampler's own tick
    assert pace.tick_s(0.1, False, 101.0 + SUSTAINED_S - 0.01) == 0.1
    assert pace.tick_s(0.1, False, 101.0 + SUSTAINED_S) == pytest.approx(0.1 * SUSTAINED_TICKS)  # lock-bound load
    assert pace.tick_s(0.1, True, 110.0) == pytest.approx(0.1 * QUIET_TICKS)  # the waits stopped
    # waits that come back within RESET_S are the same lock-bound load: the slower pace goes on
    assert pace.tick_s(0.1, False, 111.0) == pytest.approx(0.1 * SUSTAINED_TICKS)
    assert pace.tick_s(0.1, True, 112.0) == pytest.approx(0.1 * QUIET_TICKS)
    assert pace.tick_s(0.1, True, 112.0 + RESET_S) == pytest.approx(0.1 * QUIET_TICKS)  # shut RESET_S: over
    assert pace.tick_s(0.1, False, 120.0) == 0.1  # a new wait after that: its own tick again, for SUSTAINED_S
    # a wait sampler that stopped ticking: the blocking sampler is the only lock source, at its own tick
    assert pace.tick_s(0.1, False, 120.0 + SUSTAINED_S, ticking=False) == 0.1
    assert pace.tick_s(0.1, False, 120.0 + 2 * SUSTAINED_S) == 0.1  # and the sustained clock starts again


def test_a_wait_sampler_is_ticking_until_it_falls_silent() -> None:
    g = LockGate()
    assert not g.ticking(TICK, now=100.0)  # never ticked
    g.tick(True, now=100.0)
    assert g.ticking(TICK, now=100.5) and not g.ticking(TICK, now=102.0)
