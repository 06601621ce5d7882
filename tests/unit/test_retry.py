"""tests.retry.twice: a miss is tried once more, two misses fail with both messages."""

from __future__ import annotations

import pytest

from tests.retry import twice


def test_a_first_miss_is_tried_again() -> None:
    seen: list[int] = []

    def attempt(i: int) -> None:
        seen.append(i)
        assert i == 1, "first"

    twice(attempt)
    assert seen == [0, 1]


def test_two_misses_fail_with_both_messages() -> None:
    def attempt(i: int) -> None:
        if i == 0:
            pytest.fail("could not host")
        assert False, "then wrong"

    with pytest.raises(pytest.fail.Exception, match="(?s)could not host.*then wrong"):
        twice(attempt)


def test_a_hit_runs_once() -> None:
    seen: list[int] = []
    twice(seen.append)
    assert seen == [0]
