"""A step's records found by bisection (reports.series.series_times) are the records the scans found, and the
series reader (orjson, json where orjson refuses a line) reads what the json module reads.

The scans are the code every report used before the bisection; they still read a series whose times are not
numbers in order, so each property below compares the two paths on the same records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from diag.core.bundle import Bundle, read_jsonl
from diag.core.engines import POSTGRES
from reports.model.durability_view import _window_records, window_rate
from reports.model.steps import Step, in_window
from reports.rules.base import counter_around
from reports.model.series import series_keys, series_times

T0 = 1_700_000_000.0

# Records in time order, ties allowed, some without the counter or with a non-number in it.
record = st.fixed_dictionaries({"dt": st.sampled_from([0.0, 0.25, 0.5, 1.0, 3.0])},
                               optional={"x": st.one_of(st.floats(0, 1e6, allow_nan=False), st.just("n/a")),
                                         "y": st.floats(0, 1e3, allow_nan=False)})
window = st.tuples(st.floats(-5, 60, allow_nan=False), st.floats(0, 40, allow_nan=False))


def _series(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out, t = [], T0
    for r in raw:
        t += r["dt"]
        out.append({"t": t, **{k: v for k, v in r.items() if k != "dt"}})
    return out


def _bundle(recs: list[dict[str, Any]]) -> Bundle:
    return Bundle(path=Path("."), run={}, results=[], findings=[], events=[], series={"pg_stats--db": recs})


def _step(a: float, length: float) -> Step:
    return Step(target="db", engine=POSTGRES, workload="w", clients=1, t0=T0 + a, t1=T0 + a + length, row={})


@settings(max_examples=100, deadline=None)
@given(st.lists(record, max_size=40), window)
def test_bisection_finds_the_records_the_scan_found(raw, win):
    recs = _series(raw)
    times = series_times(_bundle(recs), "pg_stats--db")
    assert times == [r["t"] for r in recs]
    step = _step(*win)
    assert in_window(recs, step, times) == in_window(recs, step)
    for keys in (["x"], ["x", "y"], ["missing"]):
        assert _window_records(recs, keys, step.t0, step.t1, times) == _window_records(recs, keys, step.t0, step.t1)
        assert window_rate(recs, keys, step.t0, step.t1, times) == window_rate(recs, keys, step.t0, step.t1)


@settings(max_examples=100, deadline=None)
@given(st.lists(record, max_size=40), window)
def test_counter_around_is_the_same_by_bisection(raw, win):
    recs = _series(raw)
    fast = _bundle(recs)
    slow = _bundle(recs + [{"x": 1.0}])  # a record without a time: no bisection, the old sort of every record
    assert series_times(fast, "pg_stats--db") is not None and series_times(slow, "pg_stats--db") is None
    step = _step(*win)
    assert counter_around(fast, step, "pg_stats", "x") == counter_around(slow, step, "pg_stats", "x")


def test_times_only_when_in_order_and_numbers():
    assert series_times(_bundle([{"t": 2.0}, {"t": 1.0}]), "pg_stats--db") is None
    assert series_times(_bundle([{"t": 1.0}, {"t": "2"}]), "pg_stats--db") is None
    assert series_times(_bundle([{"t": 1.0}, {"t": float("nan")}]), "pg_stats--db") is None
    assert series_times(_bundle([{"t": 1.0}, {"t": 1.0}, {"t": 3}]), "pg_stats--db") == [1.0, 1.0, 3]
    assert series_times(_bundle([]), "nothing") == []
    assert series_keys(_bundle([{"t": 1, "a": 1}, {"t": 2, "b": 2}]), "pg_stats--db") == {"t", "a", "b"}


def test_reader_reads_what_json_reads(tmp_path):
    """orjson refuses NaN, Infinity and integers past 64 bits, which json.dumps writes: json reads those lines.
    A U+2028 in a text stays in its record; bad UTF-8 is replaced; a cut-off last line is skipped."""
    recs = [{"t": 1.0, "x": float("nan")}, {"t": 2.0, "x": float("inf"), "y": -float("inf")},
            {"t": 3.0, "big": 2 ** 70}, {"t": 4.0, "q": "SELECT 1\u2028-- a line separator", "u": "é"},
            {"t": 5.0, "x": 0.1 + 0.2, "e": 1e-300}]
    f = tmp_path / "s.jsonl"
    f.write_bytes("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs).encode()
                  + b'{"t": 6.0, "bad": "\xff"}\n\n[1, 2]\n{"t": 7.0, "x"')
    got = read_jsonl(f)
    assert [r["t"] for r in got] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert got[0]["x"] != got[0]["x"] and got[1]["x"] == float("inf") and got[1]["y"] == -float("inf")
    assert got[2]["big"] == 2 ** 70 and got[3] == recs[3] and got[4] == recs[4]
    assert got[5]["bad"] == "\ufffd"
    assert read_jsonl(tmp_path / "absent.jsonl") == []
