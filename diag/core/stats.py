"""Distribution-free statistics for repeated measurements: medians, their intervals, the Mann-Whitney U test.

Pure functions of lists of numbers (no numpy/scipy: neither is a dependency),
used where a run combines its repeats (the result row's interval) and where the
reports compare two sides or judge a window steady. The methods, so a report can
name them:

* :func:`median_ci`: the exact order-statistic (binomial) interval for the
  median: [x_(k), x_(n-k+1)] with the largest k whose coverage is still at least
  the level asked; with too few values the widest one, [min, max], and the
  coverage it really has (1 - 2 x 0.5^n: 75% for 3 values) is returned and said.
* :func:`mann_whitney`: two-sided Mann-Whitney U (Wilcoxon rank-sum): the exact
  distribution of U when there are no ties and the samples are small, else the
  normal approximation with tie and continuity corrections (as scipy's
  ``mannwhitneyu`` does for ``method="exact"`` / ``"asymptotic"``).
* :func:`hodges_lehmann`: the shift between two samples (median of all pairwise
  differences) with its distribution-free interval from the same U distribution,
  the estimate that goes with the U test.
* :func:`mann_kendall`: a monotonic trend across a sequence (Kendall's S with the
  normal approximation and tie correction) and the Theil-Sen slope.

Each is fast at any step length (a one-hour step's 3,600 intervals: bench/stats_scaling.py): the
interval of the median walks the binomial sums once, and the statistics over all pairs (S, the
Theil-Sen slope, the Hodges-Lehmann shift and its interval) are counted and selected without
listing the pairs (:mod:`diag.core.pairselect`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from diag.core.pairselect import inversions, kth_difference, kth_slope

EXACT_MAX = 50  # exact U distribution up to this many values per side (its table is m x n + 1 integers)


def median(xs: Sequence[float]) -> float:
    """The median (mean of the middle two for an even count); ValueError for no values."""
    s = sorted(xs)
    n = len(s)
    if n == 0:
        raise ValueError("median of no values")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _binom_cdf_half(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2) (one call is O(k) big-integer terms; median_ci walks them once)."""
    if k < 0:
        return 0.0
    return float(sum(math.comb(n, i) for i in range(0, min(k, n) + 1)) / 2 ** n)


@dataclass(frozen=True)
class Interval:
    """An estimate with its interval: ``level`` is the coverage the method really gives (0..1)."""

    estimate: float
    low: float
    high: float
    level: float
    n: int
    method: str


def median_ci(xs: Sequence[float], level: float = 0.95) -> Interval:
    """The median and its exact order-statistic interval (see the module docstring)."""
    s = sorted(float(x) for x in xs)
    n = len(s)
    m = median(s)
    # Coverage of [x_(k), x_(n-k+1)] is 1 - 2 P(B <= k-1); take the largest k that keeps it >= level.
    # P(B <= k) is kept as an exact running sum of C(n, i) (each term from the last), so the walk is O(n)
    # big-integer steps instead of a fresh sum per k (O(n^2) terms, each O(n) digits: ~n^4 in all); the
    # float compared is the same correctly rounded quotient as before.
    full = 2 ** n
    term, below = 1, 1  # C(n, 0); sum of C(n, i) for i <= 0
    k = 1
    while k + 1 <= (n + 1) // 2:
        term = term * (n - k + 1) // k  # C(n, k)
        if 1 - 2 * ((below + term) / full) < level:
            break
        below += term
        k += 1
    cover = 1 - 2 * (below / full)  # P(B <= k-1): the sum up to C(n, k-1)
    return Interval(m, s[k - 1], s[n - k], round(cover, 4), n, "exact order-statistic interval of the median")


def _u_counts(m: int, n: int) -> list[int]:
    """How many of the C(m+n, m) orderings give each U = 0..m*n (no ties): the coefficients of the
    Gaussian binomial [m+n choose m]_q, built as prod_i (1 - q^(n+i)) / (1 - q^i)."""
    size = m * n + 1
    c = [0] * size
    c[0] = 1
    for i in range(1, m + 1):
        a = n + i
        for k in range(size - 1, a - 1, -1):  # times (1 - q^a)
            c[k] -= c[k - a]
        for k in range(i, size):  # divided by (1 - q^i): exact, the product is a polynomial
            c[k] += c[k - i]
    return c


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Mid-ranks (1-based) of ``values`` and the sizes of the tie groups."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


@dataclass(frozen=True)
class UTest:
    """Two-sided Mann-Whitney U of x against y: ``u`` is U of x (pairs where x is larger, ties half)."""

    u: float
    p: float
    n_x: int
    n_y: int
    method: str


def mann_whitney(x: Sequence[float], y: Sequence[float]) -> UTest:
    """Two-sided Mann-Whitney U test; exact without ties up to :data:`EXACT_MAX` values a side."""
    m, n = len(x), len(y)
    if m == 0 or n == 0:
        raise ValueError("Mann-Whitney U needs values on both sides")
    ranks, ties = _ranks([*x, *y])
    u = sum(ranks[:m]) - m * (m + 1) / 2
    mn = m * n
    if max(ties) == 1 and max(m, n) <= EXACT_MAX:
        counts = _u_counts(m, n)
        low = int(min(u, mn - u))
        p = min(1.0, 2 * sum(counts[: low + 1]) / math.comb(m + n, m))
        return UTest(u, p, m, n, "Mann-Whitney U, two-sided, exact")
    total = m + n
    tie_term = sum(t ** 3 - t for t in ties) / (total * (total - 1))
    sigma = math.sqrt(mn / 12 * ((total + 1) - tie_term))
    if sigma == 0:  # every value equal: no evidence of a difference
        return UTest(u, 1.0, m, n, "Mann-Whitney U, two-sided, all values tied")
    z = (abs(u - mn / 2) - 0.5) / sigma
    p = min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))
    return UTest(u, p, m, n, "Mann-Whitney U, two-sided, normal approximation (tie- and continuity-corrected)")


def _norm_ppf(q: float) -> float:
    """The standard normal quantile (bisection on erfc: plenty for interval bounds)."""
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(-mid / math.sqrt(2)) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def hodges_lehmann(x: Sequence[float], y: Sequence[float], level: float = 0.95) -> Interval:
    """The shift of y against x (median of every y_j - x_i) and its distribution-free interval.

    The interval is [d_(k), d_(mn-k+1)] of the sorted differences, k from the U
    distribution (exact for up to :data:`EXACT_MAX` values a side, else normal);
    its true coverage is returned in ``level``."""
    m, n = len(x), len(y)
    if m == 0 or n == 0:
        raise ValueError("the Hodges-Lehmann shift needs values on both sides")
    xs, ys = sorted(x), sorted(y)
    mn = m * n
    mid = [(mn - 1) // 2, mn // 2]
    alpha = 1 - level
    if max(m, n) <= EXACT_MAX:
        counts = _u_counts(m, n)
        total = math.comb(m + n, m)
        k, cum = 0, 0
        while k < mn and (cum + counts[k]) / total <= alpha / 2:  # P(U <= k) <= alpha/2
            cum += counts[k]
            k += 1
        cover = 1 - 2 * cum / total
        k = max(k, 1)  # with too few values the widest interval, [min, max] of the differences
        if k == 1:
            cover = 1 - 2 / total
        method = "Hodges-Lehmann shift, exact interval"
    else:
        k = max(1, int(math.floor(mn / 2 - _norm_ppf(1 - alpha / 2) * math.sqrt(mn * (m + n + 1) / 12))))
        cover = level
        method = "Hodges-Lehmann shift, normal-approximation interval"
    # The order statistics of the m x n differences, selected without listing them (diag.core.pairselect).
    lo_d, mid_a, mid_b, hi_d = kth_difference(xs, ys, [k - 1, *mid, mn - k])
    est = mid_a if mn % 2 else (mid_a + mid_b) / 2
    return Interval(est, lo_d, hi_d, round(cover, 4), mn, method)


@dataclass(frozen=True)
class Trend:
    """Mann-Kendall trend of a sequence: ``s`` Kendall's S, ``p`` two-sided, ``slope`` Theil-Sen per step."""

    s: int
    p: float
    slope: float
    n: int


def mann_kendall(ys: Sequence[float]) -> Trend:
    """Mann-Kendall test for a monotonic trend (normal approximation, tie-corrected variance) and the
    Theil-Sen slope (median of the pairwise slopes, in y units per position)."""
    n = len(ys)
    if n < 3:
        return Trend(0, 1.0, 0.0, n)
    _, ties = _ranks(list(ys))
    # S = pairs rising - pairs falling = all pairs - tied pairs - 2 x falling pairs (the strict inversions).
    s = n * (n - 1) // 2 - sum(t * (t - 1) // 2 for t in ties) - 2 * inversions(ys, strict=True)
    var = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in ties)) / 18
    z = 0.0 if var <= 0 or s == 0 else (s - (1 if s > 0 else -1)) / math.sqrt(var)
    p = math.erfc(abs(z) / math.sqrt(2))
    pairs = n * (n - 1) // 2
    a, b = kth_slope(ys, [(pairs - 1) // 2, pairs // 2])  # the middle pairwise slope(s), not listed
    slope = a if pairs % 2 else (a + b) / 2
    return Trend(s, min(1.0, p), slope, n)


def relative_spread(xs: Sequence[float]) -> float:
    """(max - min) / median: the spread of repeats as a share of their median (0 for fewer than 2)."""
    if len(xs) < 2:
        return 0.0
    m = median(xs)
    return (max(xs) - min(xs)) / m if m else 0.0
