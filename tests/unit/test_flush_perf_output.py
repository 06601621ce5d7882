"""collectors.flush_perf: perf stat interval output and error messages, from saved real outputs (tests/data/flush)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors import flush_perf as fl
from diag.core.errors import ParseError

DATA = Path(__file__).resolve().parents[1] / "data" / "flush"
EVENTS = ("syscalls:sys_enter_fsync", "syscalls:sys_enter_fdatasync", "syscalls:sys_enter_sync_file_range",
          "ext4:ext4_sync_file_enter")


def intervals(text: str) -> list[tuple[float, dict[str, int | None]]]:
    asm = fl.IntervalAssembler(EVENTS)
    out = [done for line in text.splitlines() if (done := asm.feed(line)) is not None]
    last = asm.flush()
    return out + ([last] if last else [])


def totals(ivs: list[tuple[float, dict[str, int | None]]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, counts in ivs:
        for e, v in counts.items():
            out[e] = out.get(e, 0) + (v or 0)
    return out


def test_saved_insert_run_gives_one_fdatasync_per_commit() -> None:
    ivs = intervals((DATA / "pg18_insert_1client.perf-stat.csv").read_text())
    assert [round(t, 3) for t, _ in ivs] == [0.501, 1.002, 1.503, 2.003, 2.504, 2.897]  # last: partial, at SIGINT
    assert all(set(c) == set(EVENTS) for _, c in ivs)
    tot = totals(ivs)
    # 1,775 inserts plus CREATE TABLE, each one commit and one WAL fdatasync (see SOURCES.md).
    assert tot["syscalls:sys_enter_fdatasync"] == 1776
    assert tot["ext4:ext4_sync_file_enter"] == 1776
    assert tot["syscalls:sys_enter_fsync"] == 0 and tot["syscalls:sys_enter_sync_file_range"] == 0


def test_open_datasync_flushes_show_only_as_filesystem_syncs() -> None:
    tot = totals(intervals((DATA / "pg18_insert_1client_open_datasync.perf-stat.csv").read_text()))
    assert tot["syscalls:sys_enter_fdatasync"] == 0
    assert tot["ext4:ext4_sync_file_enter"] == 1362  # 1,361 inserts + CREATE TABLE


def test_line_fields() -> None:
    pc = fl.parse_perf_stat_line("     1.001961438,196,,syscalls:sys_enter_fdatasync,39956094,100.00,,")
    assert pc == fl.PerfCount(1.001961438, "syscalls:sys_enter_fdatasync", 196)
    assert fl.parse_perf_stat_line("2.0,<not counted>,,syscalls:sys_enter_fsync,0,100.00,,").count == 0
    assert fl.parse_perf_stat_line("2.0,<not supported>,,syscalls:sys_enter_fsync,0,100.00,,").count is None


@pytest.mark.parametrize("line", ["", "   ", "# time counts unit events", "Problems finding threads of monitor",
                                  "    -p, --pid <pid>       stat events on existing process id",
                                  "event syntax error: 'syscalls:sys_enter_fsync'"])
def test_free_text_is_not_a_count(line: str) -> None:
    assert fl.parse_perf_stat_line(line) is None


@pytest.mark.parametrize("line", ["1.0,abc,,syscalls:sys_enter_fsync,1,100.00,,",
                                  "1.0,-5,,syscalls:sys_enter_fsync,1,100.00,,",
                                  "1.0,5,,,1,100.00,,"])
def test_malformed_count_lines_raise(line: str) -> None:
    with pytest.raises(ParseError):
        fl.parse_perf_stat_line(line)


def test_incomplete_interval_is_closed_by_the_next_one() -> None:
    asm = fl.IntervalAssembler(["a:x", "a:y"])
    assert asm.feed("1.0,3,,a:x,1,100.00,,") is None
    done = asm.feed("2.0,4,,a:x,1,100.00,,")  # a:y never came for t=1.0
    assert done == (1.0, {"a:x": 3})
    assert asm.feed("2.0,5,,a:y,1,100.00,,") == (2.0, {"a:x": 4, "a:y": 5})
    assert asm.flush() is None


def test_messages_are_kept_for_errors() -> None:
    asm = fl.IntervalAssembler(EVENTS)
    for line in (DATA / "perf-error-process-gone.txt").read_text().splitlines():
        asm.feed(line)
    assert "Problems finding threads of monitor" in asm.messages


@pytest.mark.parametrize("name,needle", [
    ("perf-error-tracefs-permission.txt", "may not read the tracepoints"),
    ("perf-error-unknown-tracepoint.txt", "ext4_nosuch"),
    ("perf-error-process-gone.txt", "exited before perf could attach"),
])
def test_error_reasons_from_saved_outputs(name: str, needle: str) -> None:
    reason = fl.perf_error_reason((DATA / name).read_text())
    assert needle in reason
    assert "\n" not in reason


def test_error_reason_fallbacks() -> None:
    assert fl.perf_error_reason("") == "perf exited with an error and no message"
    assert "paranoid" in fl.perf_error_reason("Error:\nAccess to performance monitoring and observability "
                                              "operations is limited.\n")
    assert fl.perf_error_reason("Warning: x\nsomething odd happened\n") == "something odd happened"


def test_argv_has_interval_and_pids() -> None:
    argv = fl.perf_stat_argv("/usr/bin/perf", ["e:a", "e:b"], [10, 11], 0.25)
    assert argv == ["/usr/bin/perf", "stat", "-e", "e:a,e:b", "-x", ",", "-I", "250", "-p", "10,11"]
    assert fl.perf_stat_argv("perf", ["e:a"], [1], 0.001)[7] == "100"  # never below perf's sane minimum


@given(st.text(max_size=300))
def test_any_text_gives_none_a_count_or_parse_error(text: str) -> None:
    for line in text.splitlines() or [text]:
        try:
            pc = fl.parse_perf_stat_line(line)
        except ParseError:
            continue
        assert pc is None or (pc.count is None or pc.count >= 0)


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=20))
def test_assembled_totals_match_the_lines(pairs: list[tuple[int, int]]) -> None:
    asm = fl.IntervalAssembler(["s:f", "s:d"])
    done = []
    for i, (f, d) in enumerate(pairs, 1):
        for ev, v in (("s:f", f), ("s:d", d)):
            r = asm.feed(f"{i * 0.5:.3f},{v},,{ev},1000,100.00,,")
            if r:
                done.append(r)
    assert len(done) == len(pairs)
    assert sum(c["s:f"] or 0 for _, c in done) == sum(f for f, _ in pairs)
    assert sum(c["s:d"] or 0 for _, c in done) == sum(d for _, d in pairs)
