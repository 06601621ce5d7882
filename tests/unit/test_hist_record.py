"""workloads.hist.record (HdrHistogram's index arithmetic inline, for the orchestrator's merges) records what
HdrHistogram's own record_value records: the same counts, total, min and max, the same encoding."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from workloads import hist

_values = st.one_of(st.integers(0, 5_000), st.integers(0, 200_000), st.integers(-5, hist.HIGHEST_US * 2))


def _reference(counts: dict[int, int]):  # type: ignore[no-untyped-def]
    h = hist.new()
    for us, n in counts.items():
        h.record_value(min(max(int(us), hist.LOWEST_US), hist.HIGHEST_US), int(n))
    return h


@settings(max_examples=100, deadline=None)
@given(parts=st.lists(st.dictionaries(_values, st.integers(0, 10**6), max_size=60), min_size=1, max_size=4))
def test_record_equals_record_value(parts: list[dict[int, int]]) -> None:
    fast, ref = hist.new(), hist.new()
    for counts in parts:  # several records into one histogram, as the step's totals get them
        hist.record(fast, counts)
        for us, n in counts.items():
            ref.record_value(min(max(int(us), hist.LOWEST_US), hist.HIGHEST_US), int(n))
    assert fast.get_total_count() == ref.get_total_count()
    assert (fast.min_value, fast.max_value) == (ref.min_value, ref.max_value)
    assert list(fast.counts) == list(ref.counts)
    assert hist.encode(fast) == hist.encode(ref)
    assert hist.summary_ms(fast) == hist.summary_ms(ref)


def test_every_bucket_boundary() -> None:
    """Each power of two and its neighbours up to the hour: the index arithmetic at every bucket's edges."""
    vals = {v: 1 for e in range(0, 32) for v in (2**e - 1, 2**e, 2**e + 1) if v <= hist.HIGHEST_US}
    vals[hist.HIGHEST_US] = 3
    fast = hist.new()
    hist.record(fast, vals)
    assert list(fast.counts) == list(_reference(vals).counts)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, hist.HIGHEST_US * 1000), max_size=200))
def test_folded_keys_are_bucket_floors_and_record_the_same(lat_ns: list[int]) -> None:
    """fold sends one key per HDR bucket (its lowest value): the histogram it records is the one the raw
    microseconds record."""
    h = hist.new()
    folded = hist.fold(lat_ns)
    assert all(h.get_lowest_equivalent_value(us) == us == hist.bucket(us) for us in folded)
    raw: dict[int, int] = {}
    for v in lat_ns:
        raw[max(v // 1000, 1)] = raw.get(max(v // 1000, 1), 0) + 1
    a, b = hist.new(), hist.new()
    hist.record(a, folded)
    hist.record(b, raw)
    assert hist.encode(a) == hist.encode(b)
    assert (a.get_min_value(), a.get_max_value(), a.get_total_count()) == (b.get_min_value(), b.get_max_value(),
                                                                          b.get_total_count())
