"""The steady path of reports.model.series.group_deltas (same processes in both records) gives the general
path's figures exactly: the general path is reached for the same records through a window that covers them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reports.model.series import _steady_deltas, group_deltas

T0 = 1_800_000_000.0
value = st.one_of(st.integers(0, 2**40), st.floats(0, 1e6, allow_nan=False))
row = st.tuples(*[value] * 7)  # user, system, vol, invol, rss, read, write


@st.composite
def pair(draw: st.DrawFn) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Two records of 1-20 processes with the reaped columns: mostly the same processes; sometimes a counter
    that went back (a reset), a None column, a new create time or a process born or gone."""
    n = draw(st.integers(1, 8))
    prev: dict[str, list[float]] = {}
    cur: dict[str, list[float]] = {}
    for pid in range(100, 100 + n):
        born = T0 - draw(st.floats(2, 1000))
        a, z = list(draw(row)), list(draw(row))
        ra, rz = draw(st.floats(0, 10)), draw(st.floats(0, 10))
        prev[str(pid)] = [*a, born, ra, ra / 2, 1.0, 0.0]
        cur[str(pid)] = [*z, born, rz, rz / 2, 1.0, 0.0]
    change = draw(st.sampled_from(["none", "none", "none", "none_col", "new_start", "born", "gone"]))
    pid = str(100 + draw(st.integers(0, n - 1)))
    if change == "none_col":
        cur[pid][draw(st.integers(0, 6))] = None  # type: ignore[call-overload]
    elif change == "new_start":
        cur[pid][7] = T0 + 0.5
    elif change == "born":
        cur["99"] = [1.0] * 7 + [T0 + 0.5, 0.0, 0.0, 1.0, 0.0]
    elif change == "gone":
        del cur[pid]
    return prev, cur


@settings(max_examples=60, deadline=None)
@given(pair())
def test_steady_path_equals_the_general_path(p: tuple[dict[str, list[float]], dict[str, list[float]]]) -> None:
    prev, cur = p
    steady = _steady_deltas(prev, cur) if prev.keys() == cur.keys() else None
    try:
        general = group_deltas(prev, cur, T0, T0 + 1.0, (T0 - 10.0, T0 + 10.0))  # weight 1: the general path
    except TypeError:  # a None gauge: the general path cannot sum it either
        assert steady is None
        return
    if steady is not None:
        assert steady == general
    assert group_deltas(prev, cur, T0) == general  # whichever path it takes
