"""diag.core.stats against known values: scipy 1.17's mannwhitneyu (computed once, here as numbers), the
binomial order-statistic table for the median, R's wilcox.test interval for 10 vs 10, Mann-Kendall by hand."""

import pytest

from diag.core.stats import hodges_lehmann, mann_kendall, mann_whitney, median, median_ci, relative_spread


def test_median():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    with pytest.raises(ValueError):
        median([])


def test_u_exact_known_values():
    # scipy.stats.mannwhitneyu(..., method="exact")
    a = [19.1, 20.3, 18.7, 21.0, 19.9, 20.6]
    b = [22.4, 21.8, 23.0, 22.9, 21.5, 24.1, 22.2]
    t = mann_whitney(a, b)
    assert t.u == 0 and t.p == pytest.approx(0.0011655011655011655, rel=1e-12) and "exact" in t.method
    assert mann_whitney([1, 2, 3], [4, 5, 6]).p == pytest.approx(0.1)  # 2 / C(6,3): 3 vs 3 can never reach 5%
    assert mann_whitney([1, 2, 3, 4], [5, 6, 7, 8]).p == pytest.approx(0.02857142857142857)
    assert mann_whitney([5, 6, 7, 8], [1, 2, 3, 4]).u == 16  # U of the first sample: its larger pairs


def test_u_normal_known_values():
    # scipy.stats.mannwhitneyu(..., method="asymptotic"): continuity- and tie-corrected
    x = [1.83, 0.50, 1.62, 2.48, 1.68, 1.88, 1.55, 3.06, 1.30]
    y = [0.878, 0.647, 0.598, 2.05, 1.06, 1.29, 1.06, 3.14, 1.29]
    t = mann_whitney(x, y)
    assert t.u == 58 and t.p == pytest.approx(0.13291945818531892, rel=1e-9) and "normal" in t.method
    t = mann_whitney([3, 1, 4, 1, 5, 9, 2, 6], [5, 3, 5, 8, 9, 7, 9, 3, 2, 3])
    assert t.u == 27 and t.p == pytest.approx(0.2617363764241847, rel=1e-9)
    assert mann_whitney([2, 2, 2], [2, 2]).p == 1.0


def test_median_interval():
    ci = median_ci(list(range(1, 11)))  # n = 10: ranks 2 and 9, coverage 1 - 2 * 11/1024
    assert (ci.estimate, ci.low, ci.high) == (5.5, 2, 9) and ci.level == pytest.approx(0.9785, abs=1e-4)
    ci = median_ci([5, 1, 3])  # too few for 95%: [min, max] and the 75% it really covers
    assert (ci.low, ci.high, ci.level) == (1, 5, 0.75)
    ci = median_ci(list(range(100)))  # n = 100: ranks 40 and 61 (coverage 0.9648)
    assert (ci.low, ci.high) == (39, 60) and ci.level == pytest.approx(0.9648, abs=1e-4)


def test_hodges_lehmann_interval():
    # R: wilcox.test(y, x, conf.int = TRUE) for 10 vs 10: d(24) .. d(77), achieved 95.67%
    x = list(range(10))
    y = [i + 3.5 for i in range(10)]
    hl = hodges_lehmann(x, y)
    d = sorted(b - a for a in x for b in y)
    assert hl.estimate == 3.5 and (hl.low, hl.high) == (d[23], d[76]) and hl.level == pytest.approx(0.9567, abs=1e-4)


def test_mann_kendall():
    t = mann_kendall(list(range(1, 11)))  # S = 45, var = 10*9*25/18, z = 44 / sqrt(125)
    assert t.s == 45 and t.p == pytest.approx(8.303070332644999e-05, rel=1e-9) and t.slope == 1.0
    flat = mann_kendall([5, 5, 5, 5, 5])
    assert flat.s == 0 and flat.p == 1.0
    assert mann_kendall([3, 1, 2, 5, 4]).p > 0.05


def test_relative_spread():
    assert relative_spread([90, 100, 110]) == pytest.approx(0.2)
    assert relative_spread([100]) == 0.0
