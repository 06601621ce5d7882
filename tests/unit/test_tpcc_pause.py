"""TPC-C keying and think times (``--think``, TPC-C 5.2.5): what ``pause_ns`` draws, without a server.

``tpcc.think_pause`` is the pacing of both modes (the next transaction's type comes from its
program's first draw); here the types come from a seeded generator over the same 1..100 ladder.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict

import pytest

from workloads.tpcc import tpcc, tpcc_sp
from workloads.base import ClientCtx

MIX = {"new_order": 0.45, "payment": 0.43, "order_status": 0.04, "delivery": 0.04, "stock_level": 0.04}
N = 200_000


def _draw(monkeypatch: pytest.MonkeyPatch, think_rng: random.Random, n: int,
          twin: random.Random | None = None) -> list[tuple[int, str, float]]:
    """(pause ns, type of the transaction it precedes, think time it carries over from the previous one) of
    ``tpcc.think_pause`` (both modes' pacing), its think times drawn from ``think_rng``; the carried think
    times are replayed on ``twin`` (a generator in the same state), so the pause is checked against them."""
    monkeypatch.setattr(ClientCtx, "rng", lambda self: think_rng)
    kinds = random.Random(5)
    seen: list[str] = []

    def next_kind() -> str:  # the type draw of the next transaction (1..100), as the programs make it
        seen.append(tpcc_sp.kind_of(kinds.randint(1, 100)))
        return seen[-1]
    pause = tpcc.think_pause(ClientCtx(0, 1, 1.0, think=True), next_kind)
    twin = twin or random.Random()
    out, carried = [], 0.0
    for _ in range(n):
        ns = pause()
        kind = seen[-1]
        out.append((ns, kind, carried))
        carried = min(twin.expovariate(1 / tpcc.THINK[kind]), 10 * tpcc.THINK[kind])
    return out


def test_pause_is_previous_think_plus_next_keying_and_averages_to_the_mix(monkeypatch: pytest.MonkeyPatch) -> None:
    draws = _draw(monkeypatch, random.Random(7), N, random.Random(7))
    ns0, first, carried0 = draws[0]
    assert carried0 == 0.0 and ns0 == int(tpcc.KEYING[first] * 1e9)  # no think before the first transaction
    for ns, kind, carried in draws:
        assert ns == int((carried + tpcc.KEYING[kind]) * 1e9)
    freq = Counter(kind for _, kind, _ in draws)
    for kind, p in MIX.items():
        assert abs(freq[kind] / N - p) < 0.006, (kind, freq[kind] / N)
    expected = sum(p * (tpcc.KEYING[k] + tpcc.THINK[k]) for k, p in MIX.items())  # 20.99 s
    mean = sum(ns for ns, _, _ in draws) / N / 1e9
    assert abs(mean - expected) / expected < 0.01, (mean, expected)
    # The think time in pause i is drawn for the transaction before it (i - 1), with that type's mean.
    by_prev: dict[str, list[float]] = defaultdict(list)
    for (_, prev, _), (_, _, carried) in zip(draws, draws[1:]):
        by_prev[prev].append(carried)
    for kind, thinks in by_prev.items():
        m = sum(thinks) / len(thinks)
        assert abs(m - tpcc.THINK[kind]) / tpcc.THINK[kind] < 0.06, (kind, m)
        # Negative-exponential: about e^-1 of the draws exceed the mean (a fixed or uniform time would not).
        above = sum(t > tpcc.THINK[kind] for t in thinks) / len(thinks)
        assert abs(above - math.exp(-1)) < 0.03, (kind, above)


class _HugeExpo(random.Random):
    def expovariate(self, lambd: float = 1.0) -> float:
        return 1e6  # far beyond any cap


def test_think_is_capped_at_ten_times_its_mean(monkeypatch: pytest.MonkeyPatch) -> None:
    draws = _draw(monkeypatch, _HugeExpo(3), 2000, _HugeExpo(3))
    for (_, prev, _), (ns, kind, carried) in zip(draws, draws[1:]):
        assert carried == 10 * tpcc.THINK[prev]
        assert ns == int((10 * tpcc.THINK[prev] + tpcc.KEYING[kind]) * 1e9)
    # With the real distribution nothing goes past the cap either (about 9 of 200,000 draws reach it).
    draws = _draw(monkeypatch, random.Random(11), N, random.Random(11))
    for (_, prev, _), (_, _, carried) in zip(draws, draws[1:]):
        assert 0 <= carried <= 10 * tpcc.THINK[prev]
    assert sum(carried == 10 * tpcc.THINK[prev] for (_, prev, _), (_, _, carried) in zip(draws, draws[1:])) > 0
