"""The sweep's progress bar: the pure formatter, and redraw rules on a terminal vs a log (fake clock)."""

from __future__ import annotations

import io
import re

import pytest
from hypothesis import given, strategies as st

from tests.terminal import FakeTTY, screen
from workloads.steps.progress import SweepBar, format_bar, hms



@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")  # the bar's width follows $COLUMNS; a narrow one would cut the line


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_hms() -> None:
    assert [hms(x) for x in (0, 0.4, 59.6, 60, 125, 3599, 3725)] == ["0s", "0s", "1m00s", "1m00s", "2m05s",
                                                                     "59m59s", "1h02m05s"]


def test_format_bar_examples() -> None:
    assert format_bar(0, 100, 10) == "[----------]   0% 0s/1m40s ETA 1m40s"
    assert format_bar(45, 100, 20) == "[#########-----------]  45% 45s/1m40s ETA 55s"
    assert format_bar(100, 100, 10) == "[##########] 100% 1m40s/1m40s ETA 0s"


def test_format_bar_never_claims_done_early_and_clamps() -> None:
    almost = format_bar(99.9, 100, 10)
    assert " 99%" in almost and "#########-" in almost  # rounded down: not full, not 100%
    assert format_bar(250, 100, 10) == format_bar(100, 100, 10)  # overshoot (steps run long) stays at 100%
    assert format_bar(-5, 100, 10) == format_bar(0, 100, 10)
    assert format_bar(0, 0, 4) == "[####] 100% 0s/0s ETA 0s"  # nothing planned is nothing left


def _parts(out: str) -> tuple[int, int, int]:
    m = re.fullmatch(r"\[(#*)(-*)\] +(\d+)% \S+/\S+ ETA \S+", out)
    assert m, out
    return len(m.group(1)), len(m.group(2)), int(m.group(3))


@given(st.floats(0, 1e6), st.floats(0, 1e6), st.floats(0, 1e6), st.integers(1, 300))
def test_format_bar_shape(done: float, more: float, total: float, width: int) -> None:
    full, empty, pct = _parts(format_bar(done, total, width))
    assert full + empty == width
    assert 0 <= pct <= 100
    assert (pct == 100) == (full == width) == (total <= 0 or done >= total)
    full2, _, pct2 = _parts(format_bar(done + more, total, width))
    assert full2 >= full and pct2 >= pct  # more done: never less bar


def test_terminal_bar_is_redrawn_in_place_and_erased_before_lines() -> None:
    out, clock = FakeTTY(), Clock()
    bar = SweepBar(out, steps=2, step_s=10.0, clock=clock)
    bar.say("before any step")  # not drawn yet: nothing to erase or redraw
    assert out.getvalue() == "before any step\n"
    bar.begin_step("pg: point-select, 1 client")
    clock.t += 5
    bar.tick()
    clock.t += 0.1
    bar.tick()  # too soon after the last draw: nothing written
    before = out.getvalue()
    clock.t += 0.05
    bar.tick()
    assert out.getvalue() == before
    clock.t += 0.1
    bar.say("  [  1.0s] point-select c=1: tps 100")
    clock.t += 20  # the step ran long: the bar stays at its step's end
    bar.tick()
    bar.end_step()
    bar.begin_step("pg: point-select, 2 clients")
    clock.t += 10
    bar.end_step()
    bar.close()
    text = out.getvalue()
    draws = [int(p) for p in re.findall(r"\] +(\d+)% ", text)]
    assert draws == sorted(draws) and draws[-1] == 100 and 25 in draws and 50 in draws
    assert max(d for d in draws if d < 100) == 50  # the running step never counts beyond its plan
    shown = screen(text)
    assert shown[-1] == ""  # the final bar ends its line
    assert [ln for ln in shown if "ETA" in ln] == [shown[-2]]  # every earlier bar was erased
    assert "100%" in shown[-2] and "step 2/2" in shown[-2]
    assert shown[1].startswith("[step 1/2 | sweep 0% done, 0s of 20s, about 20s left] pg: point-select, 1 client")
    assert shown[2] == "  [  1.0s] point-select c=1: tps 100"  # no bar left on the interval's line
    assert shown[3].startswith("[step 2/2 | sweep 50% done, 10s of 20s")


def test_log_gets_no_redraws() -> None:
    out, clock = io.StringIO(), Clock()
    bar = SweepBar(out, steps=2, step_s=1.5, clock=clock)
    for i in range(2):
        bar.begin_step(f"step body {i}")
        clock.t += 0.7
        bar.tick()
        bar.say("  interval line")
        clock.t += 1.0
        bar.end_step()
    bar.close()
    text = out.getvalue()
    assert "\r" not in text
    assert text.splitlines() == [
        "[step 1/2 | sweep 0% done, 0s of 3s, about 3s left] step body 0", "  interval line",
        "[step 2/2 | sweep 50% done, 1s of 3s, about 2s left] step body 1", "  interval line",
        "[sweep 100% done: 2 of 2 steps in 3s]"]


def test_hide_takes_the_bar_away_until_the_next_step() -> None:
    out, clock = FakeTTY(), Clock()
    bar = SweepBar(out, steps=2, step_s=1.0, clock=clock)
    bar.begin_step("a")
    bar.end_step()
    bar.hide()  # e.g. a dataset load is about to draw its own bar
    mark = len(out.getvalue())
    clock.t += 5
    bar.tick()
    bar.say("loading dataset tpcc")
    assert out.getvalue()[mark:] == "loading dataset tpcc\n"
    assert screen(out.getvalue())[-2:] == ["loading dataset tpcc", ""]


def test_no_stream_writes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a stream (an embedded run, a worker's step) the bar prints nowhere, not even on the process's
    own stdout/stderr, and still counts the sweep's progress."""
    clock = Clock()
    bar = SweepBar(None, steps=2, step_s=1.0, clock=clock)
    bar.begin_step("x")
    clock.t += 0.5
    assert bar.done_s() == 0.5
    bar.say("y")
    bar.tick()
    bar.end_step()
    bar.hide()
    bar.close()
    assert (bar.done_steps, bar.done_s()) == (1, 1.0)
    assert capsys.readouterr() == ("", "")


def test_bar_fits_a_narrow_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    out = FakeTTY()
    bar = SweepBar(out, steps=3, step_s=100.0, clock=Clock())
    bar.begin_step("x")
    drawn = out.getvalue().rsplit("\r", 1)[-1]
    cells = len(drawn.split("[", 1)[1].split("]", 1)[0])
    assert len(drawn) == 59 and 5 <= cells < 30, drawn  # a shorter bar, still one line short of the edge
    monkeypatch.setenv("COLUMNS", "30")
    bar.tick()
    bar.end_step()
    assert len(screen(out.getvalue())[-1]) == 29  # cut rather than wrapped (the old, longer bar erased)


def test_nothing_to_sum_up_when_no_step_started() -> None:
    for out in (FakeTTY(), io.StringIO()):
        bar = SweepBar(out, steps=4, step_s=2.0, clock=Clock())
        bar.say("a: loading dataset sbtest (scale 1)")
        bar.hide()
        bar.close()  # e.g. the load failed: no 0% bar, no summary line
        assert out.getvalue() == "a: loading dataset sbtest (scale 1)\n"
