"""A step's tail (workloads.steps.steptail, workloads.steps.merge with a tail): the load's run-on after the measured part,
where profiles record, summed apart from the step's figures."""

from __future__ import annotations

from workloads.steps.merge import IntervalMerger, Totals
from workloads.steps.messages import Go, IntervalCounts
from workloads.steps.stepresult import WallClock
from workloads.steps.steptail import TailSum, measured_cpu, tail_line

S = 1_000_000_000
# measured part 10-13 s (3 intervals of 1 s), tail 13-15.5 s
PLAN = Go(start_ns=9 * S, measure_ns=10 * S, end_ns=15 * S + S // 2, interval_ns=S)


def iv(k: int, txns: int, us: int, cpu: float = 0.1) -> IntervalCounts:
    return IntervalCounts(k, txns, txns, {}, 0, {us: txns}, cpu, {}, 0)


def test_tail_intervals_add_into_the_tail_not_the_step() -> None:
    step, tail = Totals(), Totals()
    m = IntervalMerger(PLAN, step, tail, measured_k=3)
    for k, (n, us) in enumerate([(100, 100), (100, 100), (100, 100), (10, 5000), (10, 5000), (5, 5000)]):
        m.add(0, iv(k, n, us))
    merged = m.rest(PLAN.end_ns)
    assert [x.k for x in merged] == [0, 1, 2, 3, 4, 5]
    assert [m.in_tail(x.k) for x in merged] == [False, False, False, True, True, True]
    assert (step.transactions, tail.transactions) == (300, 25)
    assert step.latency.get_total_count() == 300 and tail.latency.get_total_count() == 25
    assert step.latency.get_max_value() < 1000  # the tail's 5 ms latencies are not the step's

    s = TailSum()
    for x in merged:
        if m.in_tail(x.k):
            s.add(x)
    out = s.summary(WallClock(0), measured_tps=100.0)
    assert (out["seconds"], out["transactions"], out["tps"]) == (2.5, 25, 10.0)
    assert (out["t_start"], out["t_end"]) == (13.0, 15.5)
    assert out["tps_ratio"] == 0.1 and out["latency_ms"]["p50"] >= 4.9
    assert "10.0 tps for 2.5 s (0.10x" in tail_line(out)


def test_without_a_tail_every_interval_is_the_step_s() -> None:
    step = Totals()
    m = IntervalMerger(PLAN, step)
    for k in range(6):
        m.add(0, iv(k, 10, 100))
    assert step.transactions == 60 and not any(m.in_tail(k) for k in range(6))


def test_client_cpu_is_the_measured_intervals() -> None:
    t = Totals()
    t.cpu_s, t.cpu_by_client = 4.0, {0: 3.0, 1: 1.0}
    measured_cpu(t, 2.0)
    assert t.cpu_s == 2.0 and t.cpu_by_client == {0: 1.5, 1: 0.5}


def test_an_empty_tail_says_so() -> None:
    assert TailSum().summary(WallClock(0), 100.0) == {"seconds": 0.0, "transactions": 0, "tps": None,
                                                      "tps_ratio": None}
