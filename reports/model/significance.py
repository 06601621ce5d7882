"""Is a difference in throughput real? Samples of a step, and the test that says "significant" or "within noise".

Pure functions of result rows and the bundle's workload series. A step's
*samples* are its per-interval throughputs (transactions/s of each full report
interval of the measured window; every repeat's, pooled, under ``--repeat``):
the row's ``interval_tps`` (format 3), else read back from
``series/workload--<label>.jsonl`` over the row's window (older bundles).

Two sides are compared, as benchstat does, with the two-sided Mann-Whitney U test
(:func:`diag.core.stats.mann_whitney`): over per-repeat throughput when both sides have
at least :data:`MIN_REPEATS` repeats (the repeats are the independent units),
else over per-interval throughput (intervals of one run are not independent of
each other: a drift between runs that is not noise to the reader counts as a
difference; the text names the unit so a reader can weigh it). The change and its
interval are the Hodges-Lehmann shift (the estimate that goes with the U test) of
log throughput, as a ratio - 1: throughput changes by factors, and a ratio's interval
cannot reach below -100% (the U test itself is the same on logs: ranks do not change). p < :data:`ALPHA` is *significant*;
otherwise the difference is *within noise* and said with its interval.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from diag.core.bundle import Bundle
from diag.core.schema import ResultRow, safe_name
from diag.core.stats import hodges_lehmann, mann_whitney, median

ALPHA = 0.05
MIN_REPEATS = 5  # per side: 5 vs 5 is the smallest U test that can reach p < 0.05 with room (p = 0.008)
MIN_TPS = 0.01  # transactions/s: the floor of a value before its log is taken
FULL_INTERVAL = 0.9  # an interval this share of the step's usual interval length or more is a full one


def series_interval_tps(b: Bundle, row: ResultRow) -> list[float]:
    """Per-interval throughput of a row's window from its workload series (bundles before format 3)."""
    recs = b.series.get(f"workload--{safe_name(row.target)}", [])
    t0, t1 = row.t_start, row.t_end
    if t0 is None or t1 is None:
        return []
    got = [r for r in recs if r.get("workload") == row.workload and r.get("clients") == row.clients
           and t0 < r.get("t", 0) <= t1 + 1e-3 and r.get("interval_s")]
    if not got:
        return []
    full = max(r["interval_s"] for r in got) * FULL_INTERVAL
    return [r["transactions"] / r["interval_s"] for r in got if r["interval_s"] >= full]


def interval_samples(b: Bundle | None, row: ResultRow) -> list[float]:
    """A step's per-interval throughputs (transactions/s): the row's own, else from the series."""
    own = [float(x) for x in row.interval_tps]
    if own or b is None:
        return own
    return series_interval_tps(b, row)


def repeat_samples(row: ResultRow) -> list[float]:
    """Throughput of each complete repeat of a step (empty for a step run once); a repeat that measured no
    transaction at all (a stalled client on a saturated machine) is a value too: 0."""
    return [float(r.tps) for r in row.repeat_summaries if r.complete]


@dataclass(frozen=True)
class Verdict:
    """A comparison of side B against reference side A: B's change as a share of A's median (0.12 = +12%),
    its interval, the test's p-value, whether that is significant, and which values were tested."""

    significant: bool
    change: float
    low: float
    high: float
    level: float
    p: float
    unit: str  # "per-repeat" or "per-interval"
    n_a: int
    n_b: int
    method: str
    min_p: float = 0.0  # the smallest p the test can give with these many values (two-sided, no ties)

    @property
    def testable(self) -> bool:
        """Enough values that the test could reach significance at all (3 vs 3: never, p >= 0.1)."""
        return self.min_p < ALPHA

    @property
    def verdict(self) -> str:
        """"significant", "within noise", or "too few values" (the test could not have said otherwise)."""
        return "significant" if self.significant else "within noise" if self.testable else "too few values"

    def change_text(self) -> str:
        """The change with its interval and the interval's coverage: "+12.3% [+10.1% .. +14.0%, 95%]";
        a change of +100% or more as a factor ("9.35x")."""
        return f"{change_words(self.change)} [{change_words(self.low)} .. {change_words(self.high)}, " \
               f"{100 * self.level:.0f}%]"

    def how(self) -> str:
        """The test in words: "p=0.002, Mann-Whitney U over per-interval throughput, n=12+12"."""
        return f"p={self.p:.3g}, {self.method} over {self.unit} throughput, n={self.n_a}+{self.n_b}"

    def text(self) -> str:
        """benchstat-like: "significant: +12.3% [...] (p=0.002, ...)", "within noise: ..." or why untested."""
        if not self.testable:
            return (f"too few values to test: {self.change_text()} (n={self.n_a}+{self.n_b} {self.unit} values: "
                    f"the smallest p {self.method} can give is {self.min_p:.3g}; run longer steps, at a shorter --report-interval, or more --repeat)")
        return f"{self.verdict}: {self.change_text()} ({self.how()})"

    def to_dict(self) -> dict[str, Any]:
        return {"significant": self.significant, "verdict": self.verdict, "testable": self.testable,
                "change": self.change, "low": self.low, "high": self.high,
                "level": self.level, "p": self.p, "unit": self.unit, "n_a": self.n_a, "n_b": self.n_b,
                "method": self.method, "text": self.text()}


def change_words(change: float) -> str:
    """A relative change for people: "+12.3%", "-40.0%", or from +100% on a factor, "3.2x"."""
    return f"{1 + change:.3g}x" if change >= 1 else f"{100 * change:+.1f}%"


def compare_samples(a: Sequence[float], b: Sequence[float], unit: str) -> Verdict | None:
    """B against A (None when either side has no values or A's median is not positive)."""
    if not a or not b:
        return None
    if median(a) <= 0:
        return None
    u = mann_whitney(list(b), list(a))
    # A stalled interval (0 tps) counts as a very slow one: 0.01 tps keeps its log finite and its rank.
    hl = hodges_lehmann([math.log(max(x, MIN_TPS)) for x in a], [math.log(max(x, MIN_TPS)) for x in b])
    min_p = min(1.0, 2 / math.comb(len(a) + len(b), len(a)))
    return Verdict(u.p < ALPHA, math.expm1(hl.estimate), math.expm1(hl.low), math.expm1(hl.high), hl.level, u.p,
                   unit, len(a), len(b), u.method.split(",")[0], min_p)


def compare_rows(a_rows: Sequence[tuple[Bundle | None, ResultRow]],
                 b_rows: Sequence[tuple[Bundle | None, ResultRow]]) -> Verdict | None:
    """Side B's steps against side A's (each side: one or more (bundle, row) of the same step, pooled)."""
    rep_a = [x for _, r in a_rows for x in repeat_samples(r)]
    rep_b = [x for _, r in b_rows for x in repeat_samples(r)]
    if len(rep_a) >= MIN_REPEATS and len(rep_b) >= MIN_REPEATS:
        return compare_samples(rep_a, rep_b, "per-repeat")
    a = [x for bb, r in a_rows for x in interval_samples(bb, r)]
    b = [x for bb, r in b_rows for x in interval_samples(bb, r)]
    return compare_samples(a, b, "per-interval")


def interval_text(row: ResultRow) -> str:
    """A row's median throughput and interval in words (chart hover, report tables); "" without one."""
    ci = row.interval
    if ci is None:
        return ""
    n_rep = row.repeat_count
    reps = f", {n_rep} repeats" if n_rep else ""
    return (f"{row.target} {row.workload} c={row.clients}: median {ci.median:,.1f} tps, "
            f"{100 * ci.level:.0f}% interval {ci.low:,.1f} .. {ci.high:,.1f} "
            f"({ci.method} over {ci.n} {'repeats' if ci.basis == 'repeats' else 'intervals'}{reps})")
