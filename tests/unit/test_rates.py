"""The one rate function: first sample, counter reset, true zero."""

from hypothesis import given, strategies as st

from collectors.rates import counter_delta, counter_rate, series_rates, total_delta


def test_first_sample_has_no_rate():
    assert counter_rate(None, 10, 1.0) is None
    assert series_rates([(0.0, 5)])[0] == (0.0, None)


def test_true_zero_is_zero_not_none():
    assert counter_rate(7, 7, 1.0) == 0.0


def test_normal_rate():
    assert counter_rate(100, 350, 2.5) == 100.0


def test_reset_counts_from_zero():
    # pg_stat_reset / restart: the counter went from 1000 down to 40; 40 accrued since the reset.
    assert counter_delta(1000, 40) == 40.0
    assert counter_rate(1000, 40, 2.0) == 20.0


def test_bad_interval():
    assert counter_rate(1, 2, 0.0) is None
    assert counter_rate(1, 2, -1.0) is None


def test_series_and_total():
    pts = [(0.0, 10), (1.0, 20), (2.0, 5), (3.0, 5)]
    assert [r for _, r in series_rates(pts)] == [None, 10.0, 5.0, 0.0]
    assert total_delta([10, 20, 5, 5]) == 15.0  # 10, then a reset to 5, then 0
    assert total_delta([10, None, 30]) == 20.0
    assert total_delta([10]) is None


@given(st.lists(st.integers(min_value=0, max_value=10**12), min_size=2, max_size=50))
def test_total_delta_never_negative(values):
    assert total_delta(values) >= 0
