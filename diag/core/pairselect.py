"""Order statistics of all pairs without listing the pairs: inversions, pairwise differences, pairwise slopes.

The statistics of :mod:`diag.core.stats` are defined over every pair of a step's
intervals (n(n-1)/2 or m x n of them: 6.5 million for a one-hour step), which
listing and sorting made O(n^2) in time and memory. These answer the same
questions from counts, each count O(n log n) or O(m + n):

* :func:`inversions`: pairs i < j with v_i > v_j (or >=): a bottom-up merge of
  sorted blocks, the per-element counting done by ``bisect`` over ``map`` so the
  Python-level work is O(n) and the rest runs in C.
* :func:`kth_difference`: the k-th smallest of the m x n differences y_j - x_i.
  With x and y sorted the differences form a sorted matrix (each row rises along
  y, each column falls along x), so "how many are <= t" is one ``bisect`` per row
  (run in C over all rows, then corrected where the float difference rounds
  across t differently from the sum).
  The selection narrows a bracket [lo, hi] around rank k (from a random sample
  of the cells still inside it, then those counts) until few cells are left,
  and sorts those (the randomized sorted-matrix selection of Monahan 1984 and
  Johnson and Mizoguchi 1978, with sampled pivots). Exact: every comparison is
  on the same float differences the naive method sorts.
* :func:`kth_slope`: the k-th smallest of the pairwise slopes (y_j - y_i) / (j - i)
  over i < j (Theil-Sen). The slopes below t are the pairs that change order in
  the sequence y_i - t i, so they are counted as inversions; the pairs between
  two brackets are the inversions of one order against the other, listed by the
  same merge. Counting in floats can misjudge a pair whose slope is within
  ``eta`` (a bound on the rounding of y_i - t i, :func:`_eta`) of t, so the
  brackets are widened by 3 eta and the result is kept only when it lies where
  the widened counts prove its rank; else the exact O(n^2) method runs. One
  bounded approximation: when more than :data:`ENUM_CAP` pairs have slopes
  within 5 eta of the k-th (a series that rises by the same step throughout),
  the sampled slope there is returned, within 5 eta (about 1e-12 relative for
  throughput series) of the exact one.
"""

from __future__ import annotations

import math
import random
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from functools import partial
from itertools import accumulate, repeat
from operator import add, sub

ENUM_CAP = 30_000  # at most this many pairs are listed and sorted at the end of a selection
SMALL = 20_000     # fewer pairs than this: list and sort them (the naive method is faster there)
SAMPLE = 1_000     # cells sampled from the bracket per narrowing round (differences)
SLOPE_SAMPLE = 10_000  # pairs sampled once for the slopes' brackets
MAX_ROUNDS = 40
BLOCK = 128         # values per block sorted by insertion before the merges (inversions)


def inversions(v: Sequence[float], strict: bool = True) -> int:
    """How many pairs i < j have v_i > v_j (``strict``) or v_i >= v_j.

    Blocks of :data:`BLOCK` values are sorted by insertion (each value counts the larger ones already in
    its block), then merged pairwise, each value of a right block counting the left block's larger values
    with ``bisect``: O(n log^2 n) comparisons, nearly all in C, and O(n) steps of Python."""
    count_below = bisect_right if strict else bisect_left
    total = 0
    blocks = []
    for start in range(0, len(v), BLOCK):
        block: list[float] = []
        for x in v[start:start + BLOCK]:
            at = count_below(block, x)
            total += len(block) - at
            block.insert(at, x)
        blocks.append(block)
    while len(blocks) > 1:
        merged = []
        for b in range(0, len(blocks) - 1, 2):
            left, right = blocks[b], blocks[b + 1]
            total += len(left) * len(right) - sum(map(partial(count_below, left), right))
            merged.append(sorted(left + right))  # two sorted runs: timsort merges them in linear time
        if len(blocks) % 2:
            merged.append(blocks[-1])
        blocks = merged
    return total


def _inverted_pairs(q: Sequence[int]) -> list[tuple[int, int]]:
    """Every pair of positions (a, b), a < b, with q[a] > q[b], for distinct values ``q`` (merged as in
    :func:`inversions`; the pairs themselves are listed, so this is O(n log^2 n + pairs))."""
    where = {x: i for i, x in enumerate(q)}
    out: list[tuple[int, int]] = []
    blocks = []
    for start in range(0, len(q), BLOCK):
        block: list[int] = []
        for i, x in enumerate(q[start:start + BLOCK], start):
            at = bisect_right(block, x)
            out += [(where[big], i) for big in block[at:]]
            block.insert(at, x)
        blocks.append(block)
    while len(blocks) > 1:
        merged = []
        for b in range(0, len(blocks) - 1, 2):
            left, right = blocks[b], blocks[b + 1]
            firsts = list(map(partial(bisect_right, left), right))
            nl = len(left)
            for r, first in zip(right, firsts):
                if first < nl:  # the left values above r (most rights have none)
                    wr = where[r]
                    out += [(where[big], wr) for big in left[first:]]
            merged.append(sorted(left + right))
        if len(blocks) % 2:
            merged.append(blocks[-1])
        blocks = merged
    return out


# ---------------------------------------------------------------- the m x n differences y_j - x_i


def _row_counts(xs: Sequence[float], ys: Sequence[float], t: float, strict: bool) -> list[int]:
    """Per row i: how many j have ys[j] - xs[i] <= t (< t when ``strict``), ys ascending.

    ``bisect`` finds where ys crosses x + t (in C, over every row at once); the float difference ys[j] - x
    can round across t where the sum x + t did not, so the rows where the difference disagrees at the
    boundary (rare: the two roundings differ only there) are then moved to where the difference crosses."""
    n = len(ys)
    counts = list(map(bisect_left if strict else bisect_right, repeat(ys), map(add, xs, repeat(t))))
    padded = [-math.inf, *ys, math.inf]  # padded[c] = ys[c - 1], padded[c + 1] = ys[c]
    if strict:
        off = [i for i, (x, c) in enumerate(zip(xs, counts)) if padded[c + 1] - x < t or not padded[c] - x < t]
    else:
        off = [i for i, (x, c) in enumerate(zip(xs, counts)) if padded[c + 1] - x <= t or not padded[c] - x <= t]
    for i in off:
        x, c = xs[i], counts[i]
        inside: Callable[[float], bool] = (lambda d: d < t) if strict else (lambda d: d <= t)
        while c < n and inside(ys[c] - x):
            c += 1
        while c > 0 and not inside(ys[c - 1] - x):
            c -= 1
        counts[i] = c
    return counts


def kth_difference(xs: Sequence[float], ys: Sequence[float], ks: Sequence[int],
                   rng: random.Random | None = None) -> list[float]:
    """The ks-th smallest (0-based) of every ``y - x`` (x in xs, y in ys, both sorted ascending), exactly as
    ``sorted(y - x for x in xs for y in ys)[k]``."""
    m, n = len(xs), len(ys)
    if m * n <= SMALL:
        d = sorted(y - x for x in xs for y in ys)
        return [d[k] for k in ks]
    rng = rng or random.Random(0x5EED)
    found: dict[int, float] = {}
    for group in _groups(ks):
        found.update(zip(group, _select_difference(xs, ys, group, rng)))
    return [found[k] for k in ks]


def _groups(ks: Sequence[int]) -> list[list[int]]:
    """Ranks in groups of neighbours (a median of an even count is two adjacent ranks: one selection)."""
    out: list[list[int]] = []
    for k in sorted(set(ks)):
        if out and k - out[-1][-1] <= 1:
            out[-1].append(k)
        else:
            out.append([k])
    return out


def _select_difference(xs: Sequence[float], ys: Sequence[float], ks: list[int], rng: random.Random
                       ) -> list[float]:
    m, n = len(xs), len(ys)
    k0, k1 = ks[0], ks[-1]
    lo_row, hi_row = [0] * m, [n] * m  # row i's cells still in the bracket: columns lo_row[i] .. hi_row[i]-1
    below = 0  # cells left of the bracket, each no larger than any cell in it
    for _ in range(MAX_ROUNDS):
        widths = list(map(sub, hi_row, lo_row))
        inside = sum(widths)
        if inside <= ENUM_CAP:
            cells = sorted(ys[j] - xs[i] for i in range(m) for j in range(lo_row[i], hi_row[i]))
            return [cells[k - below] for k in ks]
        rows = rng.choices(range(m), cum_weights=list(accumulate(widths)), k=SAMPLE)
        sample = sorted(ys[lo_row[i] + int(rng.random() * widths[i])] - xs[i] for i in rows)
        spread = 3 * math.sqrt(SAMPLE) / 2 + 1
        pivots = (sample[max(0, int((k0 - below) / inside * SAMPLE - spread))],
                  sample[min(SAMPLE - 1, int((k1 - below) / inside * SAMPLE + spread))])
        for pivot in pivots:
            lt = _row_counts(xs, ys, pivot, strict=True)
            n_lt = sum(lt)
            if k1 < n_lt:  # every rank wanted is below the pivot: drop the cells >= pivot
                hi_row = list(map(min, hi_row, lt))
                continue
            le = _row_counts(xs, ys, pivot, strict=False)
            if k0 >= n_lt and k1 < sum(le):
                return [pivot for _ in ks]  # every rank wanted holds the pivot's value
            if k0 >= sum(le):  # every rank wanted is above the pivot: drop the cells <= pivot
                lo_row = list(map(max, lo_row, le))
                below = sum(lo_row)
    # Not reached in practice (each round drops most cells); should the pivots keep straddling the ranks,
    # the cells left are listed: slower, still exact.
    cells = sorted(ys[j] - xs[i] for i in range(m) for j in range(lo_row[i], hi_row[i]))
    return [cells[k - below] for k in ks]


# ---------------------------------------------------------------- the pairwise slopes (Theil-Sen)


def _slope(ys: Sequence[float], i: int, j: int) -> float:
    return (ys[j] - ys[i]) / (j - i)


def _eta(ys: Sequence[float]) -> float:
    """A bound on how far from t a pair's slope can be and still be counted on the wrong side of t, for any t
    between the least and the greatest slope: the rounding of y_j - t j - (y_i - t i) (divided by j - i >= 1)
    and of the slope itself, generously (64 units in the last place of the largest term)."""
    top, bottom = max(ys), min(ys)
    big = max(abs(top), abs(bottom)) + (top - bottom) * (len(ys) + 1)
    return 64 * 2.0 ** -52 * big + 1e-300


def _order(ys: Sequence[float], t: float) -> list[int]:
    """Positions sorted by y_i - t i, later first among equals: pair i < j is 'below t' iff j comes first."""
    if t == -math.inf:
        return list(range(len(ys)))
    if t == math.inf:
        return list(range(len(ys) - 1, -1, -1))
    return sorted(range(len(ys)), key=lambda i: (ys[i] - t * i, -i))


def _count_below(ys: Sequence[float], t: float) -> int:
    """Pairs i < j with y_j - t j <= y_i - t i (their slope is <= t, give or take eta)."""
    if t == -math.inf:
        return 0
    if t == math.inf:
        return len(ys) * (len(ys) - 1) // 2
    return inversions([y - t * i for i, y in enumerate(ys)], strict=False)


def _between(ys: Sequence[float], t_lo: float, t_hi: float) -> list[float]:
    """The slopes of the pairs counted below t_hi but not below t_lo (t_lo < t_hi)."""
    rank_hi = {p: r for r, p in enumerate(_order(ys, t_hi))}
    order_lo = _order(ys, t_lo)
    return [_slope(ys, order_lo[a], order_lo[b])
            for a, b in _inverted_pairs([rank_hi[p] for p in order_lo])]


def kth_slope(ys: Sequence[float], ks: Sequence[int], rng: random.Random | None = None) -> list[float]:
    """The ks-th smallest (0-based) of ``(ys[j] - ys[i]) / (j - i)`` over i < j, as the sorted list of them
    would say (see the module docstring for the one bounded approximation)."""
    n = len(ys)
    total = n * (n - 1) // 2
    if total <= SMALL:
        s = sorted(_slope(ys, i, j) for i in range(n) for j in range(i + 1, n))
        return [s[k] for k in ks]
    rng = rng or random.Random(0x5EED)
    found: dict[int, float] = {}
    for group in _groups(ks):
        found.update(zip(group, _select_slope(ys, group, rng)))
    return [found[k] for k in ks]


def _select_slope(ys: Sequence[float], ks: list[int], rng: random.Random) -> list[float]:
    """Long because the bracket's two ends and the crowd of equal slopes are each a case of their own.

    Counts are taken 3 eta outside each pivot, so a bracket end ``lo`` comes with the count of pairs surely
    below it (slope <= lo - eta) and ``hi`` with the count of pairs not surely above it (slope < hi + eta)."""
    n = len(ys)
    k0, k1 = ks[0], ks[-1]
    eta = _eta(ys)
    lo, c_lo, hi, c_hi = -math.inf, 0, math.inf, n * (n - 1) // 2  # c_lo <= k0, k1 < c_hi
    sample = _sampled_slopes(ys, rng)
    for _ in range(MAX_ROUNDS):
        if c_hi - c_lo <= ENUM_CAP:
            break
        inside = [s for s in sample if lo < s < hi]
        if len(inside) >= 20:
            spread = 3 * math.sqrt(len(inside)) / 2 + 1
            pivots = [inside[max(0, int((k0 - c_lo) / (c_hi - c_lo) * len(inside) - spread))],
                      inside[min(len(inside) - 1, int((k1 - c_lo) / (c_hi - c_lo) * len(inside) + spread))]]
        else:  # too few sampled slopes left in the bracket: interpolate between its ends
            pivots = _interpolated(lo, c_lo, hi, c_hi, k0, k1)
        moved = False
        for p in dict.fromkeys(pivots):
            below, upto = _count_below(ys, p - 3 * eta), None
            if below > k0 and below <= k1:
                continue  # the ranks wanted straddle p: try the next pivot
            if below <= k0:
                upto = _count_below(ys, p + 3 * eta)
                if upto > k1 and (p == 0.0 or upto - below > 4 * ENUM_CAP):
                    return _crowd(ys, ks, p)  # a crowd of slopes at p holds every rank wanted
            if below > k1 and p - 6 * eta < hi:
                hi, c_hi, moved = p - 6 * eta, below, True  # slopes not surely above p - 6 eta: < p - 3 eta
            elif upto is not None and upto <= k0 and p + 6 * eta > lo:
                lo, c_lo, moved = p + 6 * eta, upto, True
            elif upto is not None and upto > k1:
                lo, c_lo, hi, c_hi, moved = p, below, p, upto, True
        if not moved:
            break
    return _finish_slope(ys, ks, lo, hi, c_lo, c_hi, eta)


def _sampled_slopes(ys: Sequence[float], rng: random.Random) -> list[float]:
    """About :data:`SLOPE_SAMPLE` slopes of pairs drawn uniformly (with replacement), sorted. A pair's slope
    is the same float in either order (the difference and the lag change sign together)."""
    positions = range(len(ys))
    firsts, seconds = rng.choices(positions, k=SLOPE_SAMPLE), rng.choices(positions, k=SLOPE_SAMPLE)
    out = [(ys[j] - ys[i]) / (j - i) for i, j in zip(firsts, seconds) if i != j]
    out.sort()
    return out


def _crowd(ys: Sequence[float], ks: list[int], p: float) -> list[float]:
    """Ranks ks fall in a crowd of slopes within 5 eta of p. A crowd at 0 is exact (a slope's sign is its
    difference's: negative slopes are the strict inversions of ys, zero ones the ties); elsewhere p stands
    for them (the bounded approximation of the module docstring)."""
    if p == 0.0 and inversions(ys, strict=True) <= ks[0] and ks[-1] < inversions(ys, strict=False):
        return [0.0 for _ in ks]
    if p == 0.0:
        return _finish_slope(ys, ks, -math.inf, math.inf, 0, len(ys) * (len(ys) - 1) // 2, _eta(ys))
    return [p for _ in ks]


def _interpolated(lo: float, n_lo: int, hi: float, n_hi: int, k0: int, k1: int) -> list[float]:
    """Pivots inside (lo, hi) around where ranks k0..k1 would be if the slopes were spread evenly there."""
    if math.isinf(lo) or math.isinf(hi) or not hi > lo:
        return []
    span = max(n_hi - n_lo, 1)
    out = [lo + (hi - lo) * min(max((k - n_lo) / span + d, 0.0), 1.0) for k, d in ((k0, -0.01), (k1, 0.01))]
    return [p for p in out if lo < p < hi]


def _finish_slope(ys: Sequence[float], ks: list[int], lo: float, hi: float, c_lo: int, c_hi: int, eta: float
                  ) -> list[float]:
    """List the pairs between the brackets and take the ranks wanted, if the counts prove them; else the
    exact O(n^2) method (never seen on throughput series: a safety net)."""
    if c_hi - c_lo <= 4 * ENUM_CAP:
        t_lo, t_hi = lo - 3 * eta, hi + 3 * eta
        between = sorted(_between(ys, t_lo, t_hi))
        if len(between) == c_hi - c_lo:
            vs = [between[k - c_lo] for k in ks]
            # Pairs counted below t_lo have slopes <= lo - eta, those above t_hi >= hi + eta: the ranks hold.
            if all(lo - eta <= v <= hi + eta for v in vs):
                return vs
    s = sorted(_slope(ys, i, j) for i in range(len(ys)) for j in range(i + 1, len(ys)))
    return [s[k] for k in ks]
