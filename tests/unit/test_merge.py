"""The interval merger (workloads.steps.merge) fed named messages by hand: sums, latencies, edges, late clients.

Times are ``perf_counter_ns`` values of a made-up plan: the measured part starts
at 10 s, intervals of 1 s, the end at 13.5 s (so the last interval is half long).
"""

from __future__ import annotations

import pytest

from workloads import hist
from workloads.steps.merge import IntervalMerger, Totals
from workloads.steps.messages import Done, Go, IntervalCounts, decode

S = 1_000_000_000
PLAN = Go(start_ns=9 * S, measure_ns=10 * S, end_ns=13 * S + S // 2, interval_ns=S)
GRACE = 2 * S  # how long an interval waits for a silent client: max(interval, 2 s)


def iv(k: int, txns: int = 0, lat: dict[int, int] | None = None, *, queries: int | None = None,
       errors: dict[str, int] | None = None, retries: int = 0, cpu: float = 0.0,
       extra: dict[str, int] | None = None, reconnects: int = 0) -> IntervalCounts:
    return IntervalCounts(k, txns, txns if queries is None else queries, errors or {}, retries,
                          lat if lat is not None else {100: txns}, cpu, extra or {}, reconnects)


def at(k: int, frac: float = 0.0) -> int:
    """The end of interval ``k`` plus ``frac`` of an interval."""
    return PLAN.measure_ns + (k + 1) * PLAN.interval_ns + int(frac * PLAN.interval_ns)


def test_two_clients_sum_into_one_interval_with_merged_latencies() -> None:
    m = IntervalMerger(PLAN)
    m.add(0, iv(0, 90, {100: 90}, queries=180, errors={"40001": 2}, retries=3, cpu=0.25, extra={"new_order": 4}))
    m.add(1, iv(0, 10, {2000: 10}, queries=20, errors={"40001": 1, "40P01": 1}, retries=1, cpu=0.5))
    (out,) = m.ready(at(0), live=[0, 1])
    assert (out.k, out.end_ns, out.seconds) == (0, at(0), 1.0)
    assert (out.transactions, out.queries, out.errors, out.retries, out.cpu_s) == (100, 200, 4, 4, 0.75)
    # 90 at 100 µs and 10 at 2 ms (exact in a 3-digit HDR histogram): p50 is a fast one, p95 and max slow ones
    assert out.latency_ms == {"p50": 0.1, "p95": 2.0, "p99": 2.0, "max": 2.0}
    t = m.totals
    assert (t.transactions, t.queries, t.retries) == (100, 200, 4)
    assert dict(t.errors) == {"40001": 3, "40P01": 1} and dict(t.extra) == {"new_order": 4}
    assert t.latency.get_total_count() == 100


def test_an_interval_waits_for_its_end_and_for_every_live_client() -> None:
    m = IntervalMerger(PLAN)
    m.add(0, iv(0, 5))
    assert m.ready(at(0, -0.01), live=[0]) == []          # all reported, but not over yet
    m.add(1, iv(0, 7))
    assert m.ready(at(-1, 0.99), live=[0, 1]) == []
    m2 = IntervalMerger(PLAN)
    m2.add(0, iv(0, 5))
    assert m2.ready(at(0), live=[0, 1]) == []             # client 1 not heard from: wait
    assert m2.ready(at(0) + GRACE - 1, live=[0, 1]) == []
    (late,) = m2.ready(at(0) + GRACE, live=[0, 1])        # overdue: written without it
    assert late.k == 0 and late.transactions == 5


def test_a_late_report_counts_in_the_first_open_interval_not_twice() -> None:
    m = IntervalMerger(PLAN)
    m.add(0, iv(0, 5))
    (first,) = m.ready(at(0) + GRACE, live=[0, 1])
    assert first.transactions == 5
    m.add(1, iv(0, 3, {200: 3}))   # client 1's interval 0 arrives after it was written
    m.add(0, iv(1, 4))
    (second,) = m.ready(at(1), live=[0, 1])
    assert second.k == 1 and second.transactions == 7     # 4 of its own + the 3 that came late
    assert m.totals.transactions == 12 and m.totals.latency.get_total_count() == 12
    assert m.moved == 3


def test_an_interval_is_not_overdue_while_the_parent_has_unread_reports() -> None:
    """200 clients on 2 busy CPUs: the parent read their reports seconds late. Its own lateness is not
    the clients': with messages still unread (``drained`` False) an interval waits for every client."""
    m = IntervalMerger(PLAN)
    m.add(0, iv(0, 5))
    assert m.ready(at(0) + 3 * GRACE, live=[0, 1], drained=False) == []
    m.add(1, iv(0, 3))                                     # read at last: counted where it belongs
    (out,) = m.ready(at(0) + 3 * GRACE, live=[0, 1], drained=False)
    assert (out.k, out.transactions) == (0, 8) and m.moved == 0


def test_the_last_interval_waits_for_every_client_so_a_late_report_is_never_lost() -> None:
    m = IntervalMerger(PLAN)
    for k in range(3):
        m.add(0, iv(k, 1))
    m.add(0, iv(3, 1))
    out = m.ready(at(3) + 10 * GRACE, live=[0, 1])         # client 1 silent: 0-2 overdue, 3 is the last
    assert [x.k for x in out] == [0, 1, 2]
    m.add(1, iv(1, 6))                                     # late for 1: into 3, the first still open
    m.add(1, iv(3, 2))
    (last,) = m.rest(PLAN.end_ns)
    assert (last.k, last.transactions) == (3, 9) and m.moved == 6
    assert sum(x.transactions for x in [*out, last]) == m.totals.transactions == 12


def test_a_client_past_k_is_through_with_earlier_intervals() -> None:
    m = IntervalMerger(PLAN)
    m.add(0, iv(0, 5))
    m.add(0, iv(1, 5))
    m.add(1, iv(2, 9))            # one long transaction: client 1 says nothing for 0 and 1
    out = m.ready(at(1), live=[0, 1])
    assert [(x.k, x.transactions) for x in out] == [(0, 5), (1, 5)]   # not held for client 1's grace


def test_a_client_that_left_does_not_hold_intervals() -> None:
    m = IntervalMerger(PLAN)
    m.add(0, iv(0, 5))
    (out,) = m.ready(at(0), live=[0])   # client 1 is out (done or failed): only 0 counts
    assert out.transactions == 5


def test_several_intervals_come_out_at_once_in_order_and_only_once() -> None:
    m = IntervalMerger(PLAN)
    for k in range(3):
        m.add(0, iv(k, k + 1))
    out = m.ready(at(2), live=[0])
    assert [(x.k, x.transactions) for x in out] == [(0, 1), (1, 2), (2, 3)]
    assert m.ready(at(2, 0.9), live=[0]) == []
    assert m.next_k == 3


def test_rest_at_the_end_fills_empty_intervals_and_cuts_the_last_at_the_end() -> None:
    m = IntervalMerger(PLAN)
    m.add(0, iv(0, 5))
    m.add(0, iv(3, 2))
    out = m.rest(PLAN.end_ns)
    assert [(x.k, x.transactions) for x in out] == [(0, 5), (1, 0), (2, 0), (3, 2)]
    assert [x.seconds for x in out] == [1.0, 1.0, 1.0, 0.5]   # the end is half-way through interval 3
    assert out[-1].end_ns == PLAN.end_ns
    assert out[1].latency_ms == {"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    assert m.rest(PLAN.end_ns) == []   # nothing twice


def test_rest_after_a_stop_ends_at_the_stop_but_keeps_later_figures() -> None:
    m = IntervalMerger(PLAN)
    m.add(0, iv(0, 5))
    stop = PLAN.measure_ns + S + S // 4               # Ctrl-C a quarter into interval 1
    out = m.rest(stop)
    assert [(x.k, x.seconds) for x in out] == [(0, 1.0), (1, 0.25)]
    m2 = IntervalMerger(PLAN)
    m2.add(0, iv(2, 3))                               # a client that ticked past the stop
    out2 = m2.rest(PLAN.measure_ns + S // 2)
    assert [(x.k, x.transactions) for x in out2] == [(0, 0), (1, 0), (2, 3)]
    assert out2[2].seconds == pytest.approx(1e-9)     # begins after the stop: a zero-length interval


def test_rest_without_any_report_and_stopped_at_the_start_is_empty() -> None:
    assert IntervalMerger(PLAN).rest(PLAN.measure_ns) == []


def test_the_step_histogram_is_every_interval_merged() -> None:
    m = IntervalMerger(PLAN)
    m.add(0, iv(0, 3, {100: 1, 200: 2}))
    m.add(1, iv(0, 1, {100: 1}))
    m.add(0, iv(1, 2, {9000: 2}))
    m.ready(at(0), live=[0, 1])
    m.rest(PLAN.end_ns)
    want = hist.new()
    hist.record(want, {100: 2, 200: 2, 9000: 2})
    assert hist.summary_ms(m.totals.latency) == hist.summary_ms(want)
    assert m.totals.latency.get_total_count() == 6


def test_totals_take_client_errors_done_messages_and_keep_three_distinct_samples() -> None:
    t = Totals()
    m = IntervalMerger(PLAN, t)
    assert m.totals is t
    t.client_error("timeout", "client not ready within 60 s")
    m.add(0, iv(0, 1, errors={"timeout": 1, "23505": 2}))
    t.client_done(0, Done(1.5, {"23505": ["dup a", "dup b"]}))
    t.client_done(1, Done(0.5, {"23505": ["dup a", "dup c", "dup d"]}))
    assert dict(t.errors) == {"timeout": 2, "23505": 2}
    assert t.samples == {"timeout": ["client not ready within 60 s"], "23505": ["dup a", "dup b", "dup c"]}
    assert t.cpu_s == 2.0 and t.cpu_by_client == {0: 1.5, 1: 0.5}


def test_reconnects_sum_per_interval_and_per_step_and_an_old_sender_counts_none() -> None:
    m = IntervalMerger(PLAN)
    m.add(0, iv(0, 5, errors={"57P01": 1}, reconnects=1))
    m.add(1, iv(0, 4, reconnects=2))
    m.add(1, decode(("iv", 1, 3, 3, {}, 0, {100: 3}, 0.0, {})))   # no reconnects field on the wire: 0
    m.add(0, iv(1, 2, reconnects=1))
    out = m.rest(PLAN.end_ns)
    assert [(x.k, x.reconnects, x.errors) for x in out[:2]] == [(0, 3, 1), (1, 1, 0)]
    assert all(x.reconnects == 0 for x in out[2:])
    assert m.totals.reconnects == 4 and m.totals.transactions == 14
