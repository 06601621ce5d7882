"""An interval's percentiles from its sparse counts equal an HDR histogram's of the same counts, and merging
intervals allocates no histogram per interval (what grew the orchestrator over a long step)."""

from __future__ import annotations

import gc
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from workloads import hist
from workloads.steps.merge import IntervalMerger, summary_ms
from workloads.steps.messages import Go, IntervalCounts


def _hdr(counts: dict[int, int]) -> dict[str, float]:
    h = hist.new()
    hist.record(h, counts)
    return hist.summary_ms(h, with_p999=False)


LATENCY_US = st.one_of(st.integers(0, 3000), st.integers(2000, 10**7), st.integers(10**9, 10**10))


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(LATENCY_US, st.integers(0, 5000), max_size=40))
def test_sparse_counts_read_as_hdr_does(counts: dict[int, int]) -> None:
    assert summary_ms(counts) == _hdr(counts)


def test_real_shaped_intervals() -> None:
    rng = random.Random(7)
    for _ in range(50):
        lat = [int(rng.lognormvariate(6.0, 0.6)) for _ in range(rng.randint(1, 3000))]  # µs, ~400 µs median
        counts = dict(hist.fold([v * 1000 for v in lat]))
        assert summary_ms(counts) == _hdr(counts)
    assert summary_ms({}) == {"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}


def _msg(k: int, counts: dict[int, int]) -> IntervalCounts:
    return IntervalCounts(k=k, transactions=sum(counts.values()), queries=sum(counts.values()), errors={},
                          retries=0, reconnects=0, latency_us=counts, cpu_s=0.01, extra={})


def test_merging_many_intervals_keeps_one_histogram() -> None:
    plan = Go.plan(0, 0.0, 600.0, 1.0)
    m = IntervalMerger(plan)
    gc.collect()
    gc.disable()   # what the cyclic collector would have to free is what piled up
    try:
        before = sum(1 for o in gc.get_objects() if type(o).__name__ == "HdrHistogram")
        for k in range(600):
            m.add(0, _msg(k, {300 + k % 50: 10, 900: 1}))
            assert len(m.ready(plan.measure_ns + (k + 1) * plan.interval_ns, [0])) == 1
        after = sum(1 for o in gc.get_objects() if type(o).__name__ == "HdrHistogram")
    finally:
        gc.enable()
    assert after == before
    assert m.totals.latency.get_total_count() == 600 * 11


def test_statement_latencies_go_into_the_histograms_once_per_interval() -> None:
    """200 clients' reports of one interval: each statement's counts are summed, then recorded when the interval
    merges (before: each report was recorded on arrival, about one HDR record per transaction in the
    orchestrator, issue 26), and the step's histogram holds exactly what the reports held."""
    plan = Go.plan(0, 0.0, 2.0, 1.0)
    m = IntervalMerger(plan)
    rng = random.Random(3)
    want = hist.new()
    for i in range(200):
        counts = dict(hist.fold([int(rng.lognormvariate(8.0, 0.5)) * 1000 for _ in range(50)]))
        hist.record(want, counts)
        m.add(i, IntervalCounts(k=0, transactions=50, queries=50, errors={}, retries=0, latency_us=counts,
                                cpu_s=0.0, extra={}, statement_latency_us={"SELECT 1": counts}))
    h = m.totals.statements["SELECT 1"]
    assert h.get_total_count() == 0  # nothing recorded per report
    assert len(m.ready(plan.measure_ns + plan.interval_ns, range(200))) == 1
    assert h.get_total_count() == 200 * 50
    assert hist.encode(h) == hist.encode(want) == hist.encode(m.totals.latency)
