"""The pure parts of ``--workers``: splitting clients, streaming intervals in order, merging rows exactly."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diag.core.errors import UsageError
from workloads import hist
from workloads.steps.merge import summary_ms
from diag.core.schema import ResultRow
from workloads.remote.dask_steps import IntervalStream, connect, merge_interval, merge_rows, split_clients


@given(st.integers(1, 500), st.integers(1, 20))
def test_split_adds_up_and_is_even(n: int, workers: int) -> None:
    parts = split_clients(n, workers)
    assert sum(parts) == n and len(parts) == min(n, workers) and max(parts) - min(parts) <= 1


def _iv(t: float, tx: int) -> dict:
    return {"t": t, "interval_s": 1.0, "transactions": tx, "queries": tx, "errors": 0, "retries": 0,
            "reconnects": 0, "workload": "point-select", "clients": 2}


def test_an_interval_waits_for_every_share_or_its_end() -> None:
    s = IntervalStream(2)
    s.add(0, _iv(1.0, 10))
    assert s.ready() == []  # share 1 has not sent interval 0
    s.add(1, _iv(1.01, 5))
    ((first, parts),) = s.ready()
    assert [i for i, _ in parts] == [0, 1] and [p["transactions"] for _, p in parts] == [10, 5]
    assert first["transactions"] == 15 and first["workers"] == 2 and first["t"] == 1.01 and first["clients"] == 4
    s.add(0, _iv(2.0, 7))
    s.end(1)  # lost after its first interval: interval 1 is share 0's alone
    ((second, parts),) = s.ready()
    assert second["transactions"] == 7 and second["workers"] == 1 and [i for i, _ in parts] == [0]
    assert s.ready() == []


def test_an_answer_replaces_what_the_share_streamed() -> None:
    s = IntervalStream(1)
    s.add(0, _iv(1.0, 3))
    s.end(0, [_iv(1.0, 3), _iv(2.0, 4)])  # an event that never arrived is in the answer
    assert [r["transactions"] for r, _ in s.ready()] == [3, 4]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(20, 50_000), max_size=200), min_size=1, max_size=4))
def test_an_interval_histogram_is_the_hdr_sum_of_the_shares(shares: list[list[int]]) -> None:
    """Interval k of several workers: its ``hdr`` is the HDR sum of theirs, its percentiles those of the sum
    (as a local step's interval of the same latencies, :func:`workloads.steps.merge.summary_ms`)."""
    parts, want, into = [], hist.new(), hist.new()
    for lat in shares:
        counts = hist.fold(us * 1000 for us in lat)
        hist.record(want, counts)
        parts.append({**_iv(1.0, len(lat)), "hdr": hist.encode_counts(counts, into)})
    rec = merge_interval(parts, into)
    got = hist.decode(rec["hdr"])
    assert got.get_total_count() == want.get_total_count() == rec["transactions"]
    assert all(got.get_count_at_value(v) == want.get_count_at_value(v) for v in {u for lat in shares for u in lat})
    assert rec["latency_ms"] == hist.summary_ms(want, with_p999=False) == summary_ms(
        hist.fold(x * 1000 for lat in shares for x in lat))
    assert "hdr" not in merge_interval([*parts, _iv(1.0, 0)])  # a part without one: counts only


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.integers(20, 50_000), min_size=1, max_size=200), min_size=1, max_size=4))
def test_merged_row_counts_add_and_its_latency_is_the_hdr_sum(shares: list[list[int]]) -> None:
    rows, hdrs, want = [], [], hist.new()
    for i, lat in enumerate(shares):
        h = hist.new()
        hist.record(h, hist.fold(us * 1000 for us in lat))  # latencies in ns -> {µs: count}
        want.add(h)
        hdrs.append(hist.encode(h))
        rows.append(ResultRow.from_dict({
            "transactions": h.get_total_count(), "queries": 2 * h.get_total_count(), "retries": i,
            "reconnects": 0, "tps": 10.0 * (i + 1), "qps": 20.0, "client_cpu_s": 0.5, "client_cpu_pct": 3.0,
            "errors": {"40001": i}, "t_start": 100.0 + i, "t_end": 102.0 + i, "complete": True,
            "latency_ms": {}, "workload": "point-select", "interval_tps": [1.0]}))
    m = merge_rows(rows, hdrs)
    assert m.transactions == sum(r.transactions or 0 for r in rows) == want.get_total_count()
    assert m.retries == sum(range(len(shares))) and m.errors == {"40001": sum(range(len(shares)))}
    assert m.tps == round(sum(r.tps or 0 for r in rows), 3) and m.extra["queries"] == 2 * m.transactions
    assert m.latency_ms == hist.summary_ms(want)
    assert (m.t_start, m.t_end) == (100.0, 101.0 + len(shares))
    assert m.client_cpu_pct is None and m.interval_tps == () and m.complete is True


@pytest.mark.parametrize("address", ["bogus", "tcp://db1", "foo://db1:8786"])
def test_a_malformed_scheduler_address_is_one_line_at_once(address: str) -> None:
    """Not a Dask address: a usage error naming it, before any Client exists (one used to print a traceback)."""
    t0 = time.monotonic()
    with pytest.raises(UsageError, match=f"--workers {address}: not a Dask scheduler address"):
        connect(address)
    assert time.monotonic() - t0 < 5


def test_a_busy_remote_worker_host_is_flagged_and_a_local_one_is_left_to_the_host_evidence() -> None:
    from workloads.remote.dask_steps import SATURATED_PCT, worker_saturated
    assert worker_saturated(SATURATED_PCT, this_host=False)
    assert not worker_saturated(SATURATED_PCT - 0.1, this_host=False)
    # on the orchestrator's host the busy share includes the server: flagging it would blame the clients
    # of every busy local run
    assert not worker_saturated(100.0, this_host=True)
