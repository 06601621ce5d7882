"""The tail's flush counts (collectors.flush_tail) and S carried over to the measured part (reports.model.durability_tail)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collectors.flush import FS_KEY, SYSCALL_EVENTS
from collectors.flush_tail import interval_counts, perf_window_argv
from diag.core.bundle import Bundle
from diag.core.schema import ResultRow
from reports.model.compare import tail_calls_per_txn
from reports.model.durability_tail import counted, tail_flush_rates, window_tps

DATA = Path(__file__).resolve().parent.parent / "data" / "flush"
EVENTS = {**SYSCALL_EVENTS, FS_KEY: "ext4:ext4_sync_file_enter"}


def test_a_saved_window_sums_to_what_perf_counted() -> None:
    lines = (DATA / "perf_stat_window_pg15.txt").read_text().splitlines()
    per = interval_counts(lines, EVENTS)
    # 300 inserts sent by psql during the window: 47 + 253 in its first two intervals (see SOURCES.md)
    assert per[-1][0] == pytest.approx(0.502184069) and [t for t, _ in per] == sorted(t for t, _ in per)
    assert [c[FS_KEY] for _, c in per[:2]] == [47, 253]
    assert {k: sum(c[k] for _, c in per) for k in EVENTS} == {
        "syscalls.fsync": 0, "syscalls.fdatasync": 300, "syscalls.sync_file_range": 0, FS_KEY: 300}


def test_perf_counts_the_listed_processes_for_the_window() -> None:
    argv = perf_window_argv("perf", ["a:b", "c:d"], [10, 11], 0.6)
    assert argv[argv.index("-p") + 1] == "10,11" and argv[-3:] == ["--", "sleep", "0.6"]
    assert argv[argv.index("-e") + 1] == "a:b,c:d" and "-I" in argv


TAIL_COUNTS = {"syscalls.fsync": 0, "syscalls.fdatasync": 240, "syscalls.sync_file_range": 0, FS_KEY: 300}


def _bundle(row: ResultRow, tail_intervals: list[tuple[float, float, int]]) -> Bundle:
    """A bundle of one row and its tail's workload intervals (end, seconds, transactions)."""
    series = {"workload--t": [{"t": t, "interval_s": s, "transactions": n, "workload": "insert", "clients": 4,
                               "tail": True} for t, s, n in tail_intervals]}
    return Bundle(path=Path("/nonexistent"), run={}, results=[row.to_dict()], findings=[], events=[], series=series)


def test_s_is_the_tail_s_calls_per_commit_times_the_measured_commit_rate() -> None:
    # the window: 300 file syncs in 0.5 s = 600/s at 500 tps, 1.2 per transaction; measured: 1,000 tps
    row = ResultRow(target="t", workload="insert", clients=4, tps=1000.0,
                    flush_tail={"counts": TAIL_COUNTS, "seconds": 0.5}, profile_tail={"tps": 500.0})
    got = tail_flush_rates(row, 1000.0, 500.0)
    assert got is not None
    (fs, sc, calls), S, src = got
    assert fs == pytest.approx(1200.0) and sc == pytest.approx(960.0) and S == pytest.approx(1200.0)
    assert calls["fdatasync"] == pytest.approx(960.0) and "file syncs" in src and "1.20 per commit" in src
    assert "upper bound" in src  # 4 clients, a tail at half the rate: group commit merges fewer there
    # half the transactions write (C is half the tps): the calls follow the transactions (1.2 each at the
    # measured 1,000 tps), so S is the same and there are twice as many per commit
    half = tail_flush_rates(row, 500.0, 500.0)
    assert half is not None and half[1] == pytest.approx(1200.0) and "2.40 per commit" in half[2]


def test_the_rate_divided_by_is_the_load_s_while_the_flushes_were_counted() -> None:
    # tail 100.0-104.25 s: 1,000 tps in its first second (perf record starting), 400 tps after (recording);
    # the flushes were counted over 100.2-100.8 s: 1,000 tps, not the whole tail's 541
    row = ResultRow(target="t", workload="insert", clients=4, tps=1000.0,
                    flush_tail={"counts": TAIL_COUNTS, "seconds": 0.6, "t_start": 100.2, "t_end": 100.8},
                    profile_tail={"tps": 541.0, "t_start": 100.0, "t_end": 104.25})
    b = _bundle(row, [(101.0, 1.0, 1000), (102.0, 1.0, 400), (103.0, 1.0, 400), (104.0, 1.0, 400)])
    assert window_tps(b, row) == pytest.approx(1000.0)
    assert tail_calls_per_txn(b, row) == pytest.approx(300 / 0.6 / 1000.0)  # 0.5 file syncs per transaction
    # a window that ran past the tail's end (into the clients' stop) is not used
    late = ResultRow(target="t", workload="insert", clients=4, tps=1000.0,
                     flush_tail={"counts": TAIL_COUNTS, "seconds": 0.6, "t_start": 104.0, "t_end": 104.6},
                     profile_tail={"tps": 541.0, "t_start": 100.0, "t_end": 104.25})
    assert window_tps(_bundle(late, []), late) is None


def test_a_count_that_ran_past_the_tail_keeps_its_intervals_inside() -> None:
    # perf started late (a busy machine): its window 104.0-104.6 s ran past the tail's end at 104.25 s, into the
    # clients' stop; its 100 ms intervals up to 104.2 s lie inside (60 file syncs each), the rest do not count
    per = [[round(0.1 * i, 1), {"syscalls.fdatasync": 40, FS_KEY: 60 if i <= 2 else 5}] for i in range(1, 7)]
    late = ResultRow(target="t", workload="insert", clients=4, tps=1000.0,
                     flush_tail={"counts": TAIL_COUNTS, "seconds": 0.6, "t_start": 104.0, "t_end": 104.6,
                                 "intervals": per},
                     profile_tail={"tps": 541.0, "t_start": 100.0, "t_end": 104.25})
    got = counted(late)
    assert got is not None and got.cut and got.seconds == pytest.approx(0.2) and got.t1 == pytest.approx(104.2)
    assert got.counts[FS_KEY] == 120 and got.counts["syscalls.fdatasync"] == 80
    b = _bundle(late, [(104.0, 1.0, 400), (104.25, 0.25, 150)])  # 600 tps over the cut window
    assert window_tps(b, late) == pytest.approx(600.0)
    rates = tail_flush_rates(late, 1000.0, window_tps(b, late))
    assert rates is not None and rates[1] == pytest.approx(120 / 0.2 / 600 * 1000) and "clients stopped" in rates[2]
    # less than MIN_CUT_S inside: nothing
    early_end = ResultRow(target="t", workload="insert", clients=4, tps=1000.0, flush_tail=late.flush_tail,
                          profile_tail={"tps": 541.0, "t_start": 100.0, "t_end": 104.1})
    assert counted(early_end) is None and tail_flush_rates(early_end, 1000.0, 500.0) is None


def test_no_tail_rate_or_no_count_gives_no_s() -> None:
    assert tail_flush_rates(ResultRow(tps=1000.0, flush_tail={"counts": TAIL_COUNTS, "seconds": 0.5}), 1000.0,
                            None) is None
    assert tail_flush_rates(ResultRow(tps=1000.0, flush_tail={"error": "permission denied"}), 1000.0, 500.0) is None
