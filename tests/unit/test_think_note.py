"""``--think`` on a step too short for TPC-C's keying and think times gets a start-up note, not a silent 0 tps."""

import pytest

from workloads.driver import DriverOptions, start_notes
from workloads.tpcc.tpcc import KEYING, MIX, THINK, mean_cycle_s, think_note


def test_the_mean_cycle_is_the_mix_weighted_keying_and_think_time():
    assert sum(MIX.values()) == 100 and set(MIX) == set(KEYING) == set(THINK)
    # 0.45 * 30 + 0.43 * 15 + 0.04 * 12 + 0.04 * 7 + 0.04 * 7 (TPC-C 5.2.5)
    assert mean_cycle_s() == pytest.approx(20.99, abs=1e-9)


def test_a_short_step_with_think_says_how_little_it_measures():
    note = think_note(10.0, (1, 4))
    assert note is not None and "21 s per transaction" in note and "about 0.5 transactions per client" in note
    assert "(0 at 1 client)" in note and "--duration 210" in note
    assert think_note(210.0, (4,)) is None


def test_start_notes_only_for_tpcc_with_think():
    short = DriverOptions(clients=(2,), duration_s=5.0, think=True)
    assert len(start_notes(["tpcc"], short)) == 1
    assert start_notes(["point-select"], short) == []
    assert start_notes(["tpcc"], DriverOptions(clients=(2,), duration_s=5.0)) == []
