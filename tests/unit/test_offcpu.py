"""Off-CPU folding (collectors.profile.offcpu) on saved real scheduler tracepoints and on hand-made sequences.

tests/data/perf/pg18_insert_sched.perf-script.txt: 12 ms of the embedded PostgreSQL 18 under 2 clients of
durable single-row inserts, ``perf record -a`` of sched_switch (switch-outs with frame-pointer stacks,
switch-ins without) and sched_wakeup, filtered to the server's processes. Counts below are from grep.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.profile import offcpu
from collectors.profile.offcpu import SchedEvent
from reports.views.offcpu_view import joined
from diag.core.errors import UsageError

TEXT = (Path(__file__).resolve().parents[1] / "data" / "perf" / "pg18_insert_sched.perf-script.txt").read_text()
BACKENDS = (1901, 1902)


def test_parse_counts_every_event() -> None:
    events = offcpu.parse_sched_script(TEXT)
    assert sum(e.event == "switch" for e in events) == TEXT.count("sched:sched_switch:") == 264
    assert sum(e.event == "wakeup" for e in events) == TEXT.count("sched:sched_wakeup:") == 92
    assert [e.time_s for e in events] == sorted(e.time_s for e in events)
    # Stacks only on the switch-out copies, root first, the scheduler last.
    stacked = [e for e in events if e.frames]
    assert stacked and all(e.frames[-1] == "__schedule_[k]" for e in stacked)
    assert sum("__x64_sys_fdatasync_[k]" in e.frames for e in stacked) == TEXT.count("__x64_sys_fdatasync") == 64


def test_fold_backends_blocking_paths() -> None:
    off = offcpu.fold_offcpu(offcpu.parse_sched_script(TEXT), BACKENDS, lambda tid, comm: "backend")
    assert set(off.by_kind) == {"backend"} and off.total_us == sum(off.folded.values()) > 0
    # A durable insert's backend waits for its flush, for the WAL lock (futex) and for its client (epoll).
    assert {"fdatasync", "futex", "epoll_wait"} <= set(off.by_syscall)
    assert off.by_syscall["fdatasync"] == sum(v for k, v in off.folded.items() if "__x64_sys_fdatasync_[k]" in k)
    assert sum(off.by_state.values()) == off.total_us == sum(off.by_syscall.values())
    assert 0 <= off.runqueue_us <= off.total_us and off.open_us <= off.total_us
    # 12 ms of recording, 2 threads: at most 24 ms off CPU between them.
    assert off.total_us <= 2 * 12_500 and off.seconds <= 0.0125
    for stack in off.folded:
        assert stack.startswith("backend;postgres;") and stack.endswith(";__schedule_[k]")


def _sw(t: float, prev: int, nxt: int, frames: tuple[str, ...] = (), state: str = "S") -> SchedEvent:
    return SchedEvent(t, "switch", "postgres", prev=prev, state=state, next=nxt, frames=frames)


def test_fold_intervals_by_hand() -> None:
    path = ("main", "fdatasync", "entry_SYSCALL_64_[k]", "do_syscall_64_[k]", "__x64_sys_fdatasync_[k]",
            "__schedule_[k]")
    events = [
        _sw(1.000000, 7, 9, path, "D"),   # 7 blocks in fdatasync
        _sw(1.000000, 7, 9, (), "D"),     # its stackless twin (the switch-in event saw it too)
        SchedEvent(1.003000, "wakeup", "kworker", next=7),
        _sw(1.004000, 9, 7),              # 7 back on CPU: 4 ms off, 1 ms of it after the wake-up
        _sw(1.005000, 7, 9, ("main", "[unknown]", "__schedule_[k]"), "R"),  # preempted, never back
        _sw(1.006000, 9, 3),              # 3 was off CPU before recording began: no interval
    ]
    off = offcpu.fold_offcpu(events, [7, 3], lambda tid, comm: "backend")
    assert off.switches == 2
    assert off.folded == {"backend;postgres;" + ";".join(path): 4000,
                          "backend;postgres;main;[unknown];__schedule_[k]": 1000}
    assert off.runqueue_us == 1000 and off.open_us == 1000
    assert off.by_state == {"D": 4000, "R": 1000} and off.by_syscall == {"fdatasync": 4000, "preempted": 1000}


def test_blocking_call_names() -> None:
    assert offcpu.blocking_call(("x", "do_syscall_64_[k]", "__x64_sys_futex_[k]", "y"), "S") == "futex"
    assert offcpu.blocking_call(("x", "exit_to_user_mode_loop_[k]", "schedule_[k]"), "R") == "preempted"
    assert offcpu.blocking_call(("asm_exc_page_fault_[k]", "schedule_[k]"), "D") == "kernel"


def test_argv_filters_each_thread() -> None:
    argv = offcpu.offcpu_argv("perf", [12, 11, 12], 1.0, Path("/tmp/x.data"))
    assert "prev_pid == 11 || prev_pid == 12" in argv and "next_pid == 11 || next_pid == 12" in argv
    assert "pid == 11 || pid == 12" in argv and argv[-2:] == ["sleep", "1.000"]
    with pytest.raises(UsageError):
        offcpu.offcpu_argv("perf", [], 1.0, Path("/tmp/x.data"))


def test_joined_sentence_puts_waits_beside_blocking_calls() -> None:
    rows = [{"kind": "backend", "call": "fdatasync", "us": 730_000, "us_per_tx": 180.5},
            {"kind": "bgwriter", "call": "epoll_wait", "us": 900_000, "us_per_tx": 222.0},
            {"kind": "backend", "call": "preempted", "us": 10_000, "us_per_tx": 2.5},
            {"kind": "backend", "call": "futex", "us": 504_000, "us_per_tx": None}]
    waits = [{"state": "CPU", "share": 0.12}, {"state": "IO:WalSync", "share": 0.537},
             {"state": "LWLock:WALWrite", "share": 0.341}]
    assert joined(rows, waits) == ("The server's wait sampling saw IO:WalSync 54%, LWLock:WALWrite 34%; its backend "
                                   "threads were off CPU in fdatasync (180 µs/tx), futex (504.0 ms).")
    assert joined(rows, []) == "" and joined([], waits) == ""


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400))
def test_parse_fuzz_gives_events_never_a_traceback(text: str) -> None:
    events = offcpu.parse_sched_script(text)
    assert all(e.event in ("switch", "wakeup") for e in events)
    offcpu.fold_offcpu(events, [1, 2], lambda tid, comm: "k")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(TEXT.split("\n")), max_size=60))
def test_parse_fuzz_on_shuffled_real_lines(lines: list[str]) -> None:
    off = offcpu.fold_offcpu(offcpu.parse_sched_script("\n".join(lines)), BACKENDS, lambda tid, comm: "backend")
    assert off.total_us == sum(off.folded.values()) >= 0 and off.runqueue_us <= off.total_us + off.open_us
