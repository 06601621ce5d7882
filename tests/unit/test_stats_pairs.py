"""The fast statistics give what the definitions give: checked against naive references written here.

diag.core.stats computes S, the Theil-Sen slope and the Hodges-Lehmann shift without listing the pairs
(diag.core.pairselect), and the interval of the median with one walk of the binomial sums. Each reference
below is the textbook definition, O(n^2) or worse, written independently of the code under test (the
median interval's is the old per-k sum). The selection's thresholds are lowered in some tests so that
small inputs go through every path (sampling, narrowing, listing, a crowd of equal slopes). A last test
is a guard, not a benchmark: at a one-hour step's 3,600 intervals each statistic must finish in seconds
of CPU (the listing methods took minutes, or gigabytes); bench/stats_scaling.py measures the times.
"""

from __future__ import annotations

import math
import random
import time

import pytest

from diag.core import pairselect
from diag.core.stats import hodges_lehmann, mann_kendall, median_ci


def naive_median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def naive_median_ci(xs: list[float], level: float = 0.95) -> tuple[float, float, float, float]:
    """Largest k with 1 - 2 P(B <= k - 1) >= level, P summed afresh for each k (B ~ Binomial(n, 1/2))."""
    s, n = sorted(xs), len(xs)

    def cdf(k: int) -> float:
        return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n if k >= 0 else 0.0
    k = 1
    while k + 1 <= (n + 1) // 2 and 1 - 2 * cdf(k) >= level:
        k += 1
    return naive_median(s), s[k - 1], s[n - k], round(1 - 2 * cdf(k - 1), 4)


def naive_mann_kendall(ys: list[float]) -> tuple[int, float]:
    n = len(ys)
    s = sum((ys[j] > ys[i]) - (ys[j] < ys[i]) for i in range(n) for j in range(i + 1, n))
    return s, naive_median([(ys[j] - ys[i]) / (j - i) for i in range(n) for j in range(i + 1, n)])


def naive_hodges_lehmann(x: list[float], y: list[float], k: int) -> tuple[float, float, float]:
    d = sorted(b - a for a in x for b in y)
    return naive_median(d), d[k - 1], d[len(d) - k]


def series(kind: str, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    if kind == "float":  # per-second throughput: two decimals, no ties to speak of
        return [round(rng.gauss(1000, 30), 2) for _ in range(n)]
    if kind == "int":  # whole transactions a second: many ties, many slopes of exactly 0
        return [float(round(rng.gauss(100, 10))) for _ in range(n)]
    if kind == "ramp":  # the same rise every interval: every slope equal (a crowd)
        return [3.0 + 0.5 * i for i in range(n)]
    if kind == "drift":  # a trend under the noise
        return [1000 - 0.7 * i + rng.gauss(0, 20) for i in range(n)]
    if kind == "stall":  # mostly steady, some intervals at 0
        return [0.0 if rng.random() < 0.1 else round(rng.gauss(500, 5)) for _ in range(n)]
    return [7.0] * n  # "const"


KINDS = ("float", "int", "ramp", "drift", "stall", "const")


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Selection on a few hundred values instead of thousands: every path of diag.core.pairselect runs."""
    monkeypatch.setattr(pairselect, "SMALL", 50)
    monkeypatch.setattr(pairselect, "ENUM_CAP", 300)
    monkeypatch.setattr(pairselect, "SAMPLE", 200)
    monkeypatch.setattr(pairselect, "SLOPE_SAMPLE", 500)
    monkeypatch.setattr(pairselect, "BLOCK", 4)


@pytest.mark.parametrize("n", [*range(1, 40), 57, 100, 101, 250, 301])
def test_median_interval_is_the_per_k_definition(n: int) -> None:
    xs = series("float", n, n)
    ci = median_ci(xs)
    assert (ci.estimate, ci.low, ci.high, ci.level) == naive_median_ci(xs)
    ci90 = median_ci(xs, 0.9)
    assert (ci90.estimate, ci90.low, ci90.high, ci90.level) == naive_median_ci(xs, 0.9)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [3, 4, 17, 120])
def test_inversions_count_the_pairs(kind: str, n: int, small_thresholds: None) -> None:
    ys = series(kind, n, n)
    assert pairselect.inversions(ys) == sum(ys[i] > ys[j] for i in range(n) for j in range(i + 1, n))
    assert pairselect.inversions(ys, strict=False) == sum(ys[i] >= ys[j] for i in range(n) for j in range(i + 1, n))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n,seed", [(3, 0), (10, 1), (60, 2), (61, 3), (150, 4), (151, 5)])
def test_mann_kendall_is_the_definition(kind: str, n: int, seed: int, small_thresholds: None) -> None:
    ys = series(kind, n, seed)
    t = mann_kendall(ys)
    assert (t.s, t.slope) == naive_mann_kendall(ys)


@pytest.mark.parametrize("kind", ("float", "int", "drift", "stall"))
def test_mann_kendall_at_real_thresholds(kind: str) -> None:
    """Beyond SMALL pairs with the shipped thresholds (260 values: 33,670 slopes)."""
    ys = series(kind, 260, 9)
    t = mann_kendall(ys)
    assert (t.s, t.slope) == naive_mann_kendall(ys)


@pytest.mark.parametrize("k_rank", [1, 7, 100])
def test_every_order_statistic_of_the_slopes(k_rank: int, small_thresholds: None) -> None:
    ys = series("drift", 90, k_rank)
    slopes = sorted((ys[j] - ys[i]) / (j - i) for i in range(90) for j in range(i + 1, 90))
    ks = [0, k_rank, len(slopes) // 3, len(slopes) - 1 - k_rank, len(slopes) - 1]
    assert pairselect.kth_slope(ys, ks) == [slopes[k] for k in ks]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("m,n,seed", [(1, 1, 0), (3, 4, 1), (10, 10, 2), (51, 60, 3), (80, 33, 4)])
def test_hodges_lehmann_is_the_definition(kind: str, m: int, n: int, seed: int, small_thresholds: None) -> None:
    """The estimate is the median of the sorted differences, and the interval is [d(k), d(mn - k + 1)] of
    them for some k (the k itself comes from the U distribution, unchanged; with ties several k fit)."""
    x, y = series(kind, m, seed), [v * 1.02 + 1 for v in series(kind, n, seed + 100)]
    hl = hodges_lehmann(x, y)
    d = sorted(b - a for a in x for b in y)
    assert hl.estimate == naive_median(d)
    assert any(d[k - 1] == hl.low and d[len(d) - k] == hl.high for k in range(1, len(d) + 1))


@pytest.mark.parametrize("kind", ("float", "int", "stall"))
def test_hodges_lehmann_at_real_thresholds(kind: str) -> None:
    """Beyond SMALL differences with the shipped thresholds (190 x 210)."""
    x, y = series(kind, 190, 5), [v + 3 for v in series(kind, 210, 6)]
    hl = hodges_lehmann(x, y)
    d = sorted(b - a for a in x for b in y)
    assert hl.estimate == naive_median(d)
    assert any(d[k - 1] == hl.low and d[len(d) - k] == hl.high for k in range(1, len(d) // 2))


@pytest.mark.parametrize("kind", KINDS)
def test_every_order_statistic_of_the_differences_of_each_kind(kind: str, small_thresholds: None) -> None:
    x, y = sorted(series(kind, 40, 1)), sorted(v * 0.98 for v in series(kind, 55, 2))
    d = sorted(b - a for a in x for b in y)
    ks = [0, 1, 37, len(d) // 2 - 1, len(d) // 2, len(d) - 38, len(d) - 1]
    assert pairselect.kth_difference(x, y, ks) == [d[k] for k in ks]


def test_every_order_statistic_of_the_differences(small_thresholds: None) -> None:
    x, y = sorted(series("float", 70, 1)), sorted(series("int", 90, 2))
    d = sorted(b - a for a in x for b in y)
    ks = [0, 1, 100, len(d) // 2, len(d) - 2, len(d) - 1]
    assert pairselect.kth_difference(x, y, ks) == [d[k] for k in ks]


def test_statistics_of_a_one_hour_step_take_seconds_not_minutes() -> None:
    """A guard against an O(n^2) (or worse) method coming back: each statistic at 3,600 intervals gets 5 s of
    CPU (they take well under 0.1 s; the listing methods took minutes for the interval of the median and
    about 1 GB for the shift between two one-hour sides)."""
    xs, other = series("float", 3600, 1), series("float", 3600, 2)
    for name, call in (("median_ci", lambda: median_ci(xs)), ("mann_kendall", lambda: mann_kendall(xs)),
                       ("mann_kendall ties", lambda: mann_kendall(series("int", 3600, 3))),
                       ("hodges_lehmann", lambda: hodges_lehmann(xs, other))):
        t0 = time.process_time()
        call()
        assert time.process_time() - t0 < 5.0, name


def test_the_safety_net_is_exact_too(small_thresholds: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """No narrowing at all (no rounds): the slopes' selection falls back to listing them, still exact."""
    monkeypatch.setattr(pairselect, "MAX_ROUNDS", 0)
    ys = series("drift", 80, 3)
    slopes = sorted((ys[j] - ys[i]) / (j - i) for i in range(80) for j in range(i + 1, 80))
    assert pairselect.kth_slope(ys, [5, len(slopes) // 2]) == [slopes[5], slopes[len(slopes) // 2]]


def test_the_differences_safety_net_is_exact(small_thresholds: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """No narrowing rounds: the differences' selection lists what is left (all of it), still exact."""
    monkeypatch.setattr(pairselect, "MAX_ROUNDS", 0)
    x, y = sorted(series("float", 30, 1)), sorted(series("int", 25, 2))
    d = sorted(b - a for a in x for b in y)
    assert pairselect.kth_difference(x, y, [3, 374, 375, 700]) == [d[3], d[374], d[375], d[700]]
