"""Stacks on every server: unknown runs collapsed, depth capped, usable-stack share, the unwinder choice.

On saved real ``perf script`` output of the embedded PostgreSQL 18 (built without frame pointers), recorded
once with ``-g`` and once with ``--call-graph dwarf,8192`` (tests/data/perf/README.md). Expected counts come
from grep/awk over the saved files, not from the code under test.
"""

from __future__ import annotations

from pathlib import Path

from collectors.profile import analyse, parse, record
from collectors.step_profiles import CHECK_MIN_SAMPLES, USABLE_MIN, choose_unwinder

DATA = Path(__file__).resolve().parents[1] / "data" / "perf"
FP_TEXT = (DATA / "pg18_embedded_select_fp.perf-script.txt").read_text(encoding="utf-8")
DWARF_TEXT = (DATA / "pg18_embedded_select_dwarf.perf-script.txt").read_text(encoding="utf-8")


def _fold(text: str) -> dict[str, int]:
    return parse.fold(text, lambda tid, comm: "backend")


def _recording(folded: dict[str, int]) -> record.ProfileRecording:
    return record.ProfileRecording(folded=folded, samples=sum(folded.values()), pids=(1,), exited_pids=(),
                                   freq_hz=499, scope="system", seconds_requested=0.5, seconds_recorded=0.5,
                                   segments=1, kinds={}, perf_data=(), command=(), warnings=())


def test_tidy_frames_collapses_unknown_runs_and_caps_depth() -> None:
    frames = ("main", "[unknown] (postgres)", "[unknown] (postgres)", "0x7f12 (libc.so.6)", "f", "[unknown]")
    assert parse.tidy_frames(frames) == ("main", "[unknown] (postgres)", "f", "[unknown]")
    deep = tuple(f"f{i}" for i in range(100))
    cut = parse.tidy_frames(deep, max_depth=10)
    assert len(cut) == 10 and cut[:8] == deep[:8] and cut[8] == parse.CUT and cut[9] == "f99"
    assert parse.tidy_frames(deep[:10], max_depth=10) == deep[:10]


def test_frame_pointer_stacks_of_pg18_are_not_usable() -> None:
    folded = _fold(FP_TEXT)
    assert sum(folded.values()) == FP_TEXT.count("\n\n")  # 150 samples, one per block
    # The raw text has the 100+ frame [unknown] chains; folded, no stack is deeper than the cap.
    raw_depths = [len(b.strip().splitlines()) - 1 for b in FP_TEXT.split("\n\n") if b.strip()]
    assert max(raw_depths) > parse.MAX_DEPTH
    assert max(len(s.split(";")) - 2 for s in folded) <= parse.MAX_DEPTH
    for s in folded:
        fs = s.split(";")
        assert not any(analyse.is_unresolved(a) and analyse.is_unresolved(b) for a, b in zip(fs, fs[1:]))
    assert analyse.usable_share(folded) < 0.05
    choice = choose_unwinder(_recording(folded))
    assert choice is not None and choice.call_graph == "dwarf" and "DWARF" in choice.reason


def test_dwarf_stacks_of_pg18_reach_postgres_main() -> None:
    folded = _fold(DWARF_TEXT)
    total = sum(folded.values())
    assert total == 100
    # grep -c PostgresMain on the saved file: 98 samples (the other 2 are the postmaster and a walwriter)
    through_main = sum(n for s, n in folded.items() if "PostgresMain" in s.split(";"))
    assert through_main == DWARF_TEXT.count("PostgresMain") == 98
    deep = sum(n for s, n in folded.items() if "PostgresMain" in s.split(";") and analyse.usable_stack(s))
    assert deep == 98
    assert analyse.usable_share(folded) >= 0.98
    choice = choose_unwinder(_recording(folded))
    assert choice is not None and choice.call_graph == "fp"  # stacks this good need no DWARF


def test_too_few_check_samples_give_no_verdict() -> None:
    folded = dict(list(_fold(FP_TEXT).items())[:3])
    assert sum(folded.values()) < CHECK_MIN_SAMPLES
    assert choose_unwinder(_recording(folded)) is None


def test_usable_stack_counts_named_user_frames_only() -> None:
    assert analyse.usable_stack("backend;postgres;a;b;c;d;e")
    assert not analyse.usable_stack("backend;postgres;a;b;c;d")
    assert not analyse.usable_stack("backend;postgres;a;[unknown] (postgres);b;c;d;x_[k];y_[k]")


def test_per_process_note_names_the_sysctl_and_capability(tmp_path: Path) -> None:
    (tmp_path / "sys" / "kernel").mkdir(parents=True)
    (tmp_path / "sys" / "kernel" / "perf_event_paranoid").write_text("2\n")
    assert record.perf_event_paranoid(tmp_path) == 2
    note = record.per_process_note("perf_event_paranoid forbids it for this user", tmp_path)
    assert "kernel.perf_event_paranoid=-1 (now 2)" in note and "CAP_PERFMON" in note and "user space" in note
    assert record.perf_event_paranoid(tmp_path / "nowhere") is None


def test_call_graph_arguments() -> None:
    assert record.call_graph_args("fp") == ["-g"]
    assert record.call_graph_args("dwarf") == ["--call-graph", f"dwarf,{record.DWARF_STACK_BYTES}"]


def test_frame_pointer_stacks_of_debian_mariadbd_are_kept() -> None:
    """Debian's mariadbd keeps frame pointers: its saved -g recording passes the check (fp stays)."""
    folded = _fold((DATA / "mariadb1011_slap_mixed.perf-script.txt").read_text(encoding="utf-8"))
    assert analyse.usable_share(folded) >= USABLE_MIN
    choice = choose_unwinder(_recording(folded))
    assert choice is not None and choice.call_graph == "fp"
