"""The pure parts of ``dbdiag watch``: load tools' progress lines (on saved output), window counts, phases.

pgbench and sysbench outputs in tests/data/watch/ are real runs on this machine (the
watch's own artifacts/load-command.log); the HammerDB ones are written from its
documented format (HammerDB is not installed here): see the header of each file.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from hypothesis import given, strategies as st

from diag.core.errors import UsageError
from diag.core.schema import ResultRow
from workloads.watch.loadcmd import LoadCommand

from collectors.peers import connected_clients, own_tree, server_addresses
from reports.model.watch_view import MIN_TPS, _cores, one_step_row, phases, sample_windows, unseen
from workloads.watch.progress_lines import ProgressPoint, Summary, merge_summaries, parse_line
from workloads.watch.watch_counters import Reading, window_counts
from workloads.watch.watchresult import client_side, mean_clients, window_row

DATA = Path(__file__).resolve().parents[1] / "data" / "watch"


def _parse(name: str) -> tuple[list[ProgressPoint], dict]:
    pts, sums = [], []
    for line in (DATA / name).read_text().splitlines():
        got = parse_line(line)
        if isinstance(got, ProgressPoint):
            pts.append(got)
        elif isinstance(got, Summary):
            sums.append(got)
    return pts, merge_summaries(sums)


def test_pgbench_progress_and_summary():
    pts, summary = _parse("pgbench_select_only_P1.log")
    assert [p.t_rel for p in pts] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert pts[0].tool == "pgbench" and pts[0].latency_kind == "mean" and pts[0].tps > 0
    assert summary["tool"] == "pgbench"
    # its own summary lines: transactions, tps, mean latency (as printed in the file)
    text = (DATA / "pgbench_select_only_P1.log").read_text()
    assert f"number of transactions actually processed: {int(summary['transactions'])}" in text
    assert f"tps = {summary['tps']:f}" in text
    assert f"latency average = {summary['latency_ms']:g} ms" in text


def test_sysbench_progress_and_summary():
    pts, summary = _parse("sysbench_oltp_read_write_ri1.log")
    assert len(pts) >= 5 and all(p.tool == "sysbench" and p.threads == 4 for p in pts)
    assert pts[0].latency_kind == "p95" and pts[0].qps is not None and pts[0].qps > pts[0].tps
    assert summary["tool"] == "sysbench" and summary["transactions"] > 0 and summary["queries"] > summary["transactions"]
    # the per-second lines average to about the summary's rate (same run)
    mean = sum(p.tps for p in pts) / len(pts)
    assert abs(mean - summary["tps"]) / summary["tps"] < 0.3


def test_hammerdb_v4_result_and_counter_lines():
    pts, summary = _parse("hammerdb_v4_postgresql.log")
    assert summary == {"tool": "hammerdb", "nopm": 19531.0, "tpm": 44915.0, "tps": 44915.0 / 60,
                       "database": "PostgreSQL"}
    assert [round(p.tps * 60) for p in pts] == [0, 41208, 44730, 45012, 43987]
    assert all(p.t_rel is None for p in pts)  # stamped on arrival by the watch


def test_hammerdb_v3_result_line():
    _pts, summary = _parse("hammerdb_v3_mysql.log")
    assert summary["nopm"] == 8745 and summary["tpm"] == 26357 and summary["database"] == "MySQL"


def test_other_lines_are_not_figures():
    for line in ("Vuser 1:Rampup 1 minutes complete ...", "transaction type: <builtin: select only>",
                 "SQL statistics:", "progress: soon", "[ 1s ] hello", ""):
        assert parse_line(line) is None, line


@given(st.text(max_size=200))
def test_any_text_parses_or_is_ignored(text):
    assert parse_line(text) is None or isinstance(parse_line(text), (ProgressPoint, Summary))


def _reading(t: float, **counters: float) -> Reading:
    return Reading(t, counters, 0, 0)


def test_pg_window_takes_own_reads_out_and_survives_a_reset():
    c = window_counts("postgres", _reading(0, transactions=1000, busy_ms=50), _reading(2, transactions=1210,
                                                                                        busy_ms=70), 10)
    assert (c.transactions, c.own_transactions, c.busy_ms, c.statements) == (200, 10, 20, None)
    reset = window_counts("postgres", _reading(0, transactions=5000), _reading(2, transactions=30), 4)
    assert reset.transactions == 26  # a counter that went down counts from 0 (pg_stat_reset)
    idle = window_counts("postgres", _reading(0, transactions=100), _reading(2, transactions=103), 8)
    assert idle.transactions == 0 and idle.own_transactions == 3  # never below zero


def test_mysql_window_explicit_then_autocommit():
    a = _reading(0, Com_commit=10, Com_rollback=1, Com_select=500, Com_insert=20)
    b = _reading(2, Com_commit=60, Com_rollback=2, Com_select=900, Com_insert=70)
    c = window_counts("mysql", a, b, 30)
    assert c.transactions == 51 and c.statements == 420 and "Com_commit" in c.rule
    auto = window_counts("mysql", _reading(0, Com_commit=5, Com_select=100, Com_update=10),
                         _reading(2, Com_commit=5, Com_select=400, Com_update=60), 20)
    assert auto.transactions == 330 and auto.own_transactions == 20 and "autocommit" in auto.rule


def test_row_and_clients():
    c = window_counts("postgres", _reading(0, transactions=0, busy_ms=0), _reading(4, transactions=400,
                                                                                     busy_ms=200), 0)
    row = window_row("pg", "postgresql", 3, 100.0, 104.0, c, [3, 4, 4, 5])
    assert row.workload == "watch#03" and row.clients == 4 and row.tps == 100.0
    assert row.latency_ms["mean"] == 0.5 and row.latency_ms["p95"] is None
    assert row.watch is not None and row.watch.window == 3 and row.watch.sessions_seen == (3, 4, 4, 5)
    assert mean_clients([]) == 1 and mean_clients([0, 0]) == 1


def test_client_side_takes_the_lines_inside_the_window():
    pts = [(100.5, ProgressPoint("pgbench", 1, 10.0)), (101.5, ProgressPoint("pgbench", 2, 30.0)),
           (102.5, ProgressPoint("pgbench", 3, 99.0))]
    assert client_side(pts, 100.0, 102.0)["tps"] == 20.0
    assert client_side(pts, 103.0, 104.0) is None


def _row(i: int, tps: float, **fields: object) -> ResultRow:
    return ResultRow.from_dict({"target": "pg", "workload": f"watch#{i:02d}", "window": i, "tps": tps,
                                "transactions": int(tps * 2), "measured_s": 2.0, "t_start": 100.0 + 2 * i,
                                "t_end": 102.0 + 2 * i, "source": "server", **fields})


def test_phases_split_on_limit_and_throughput():
    rows = [_row(1, 0), _row(2, 1000), _row(3, 1100), _row(4, 1050), _row(5, 2000), _row(6, 2100), _row(7, 0)]
    lims = {("pg", f"watch#{i:02d}"): ("host_cpu" if i >= 5 else "round_trips") for i in range(1, 8)}
    got = [(p.first, p.last, p.limit) for p in phases(rows, lims)]
    assert got == [(1, 1, "idle"), (2, 4, "round_trips"), (5, 6, "host_cpu"), (7, 7, "idle")]
    assert phases([_row(1, MIN_TPS / 2)], {})[0].limit == "idle"


def test_load_command_lines_status_and_a_missing_tool(tmp_path):
    cmd = LoadCommand(["sh", "-c", "printf 'progress: 1.0 s, 10.0 tps, lat 1.0 ms stddev 0.1\\nhalf'; exit 4"],
                      tmp_path / "out.log")
    cmd.proc.wait(10)
    assert cmd.stop() == 4 and cmd.ended is not None
    lines = [text for _t, text in cmd.rest()]
    assert lines == ["progress: 1.0 s, 10.0 tps, lat 1.0 ms stddev 0.1", "half"]
    with pytest.raises(UsageError, match="not found"):
        LoadCommand(["no-such-load-tool-here"], tmp_path / "x.log")
    with pytest.raises(UsageError, match="nothing after --"):
        LoadCommand([], tmp_path / "y.log")


def test_compare_samples_are_the_windows_inside_the_command():
    """The window the command started in (mostly before its clients connected) and the short one it ended in
    are in the totals, not throughput samples; a stalled window inside its life is a sample (0 tps)."""
    rows = [_row(1, 5), _row(2, 1000), _row(3, 0), _row(4, 1100), _row(5, 900, measured_s=0.3, t_end=110.3)]
    inside = sample_windows(rows, (103.5, 110.3))
    assert [r.watch and r.watch.window for r in inside] == [2, 3, 4]
    step = one_step_row([r for r in rows if (r.tps or 0) >= MIN_TPS], inside)
    assert step.interval_tps == (1000, 0, 1100) and step.transactions == sum(
        r.transactions or 0 for r in rows if (r.tps or 0) >= MIN_TPS)
    assert step.workload == "watch" and step.watch is not None and step.watch.windows == (1, 2, 4, 5)
    # without a command: the loaded windows at least half as long as the longest
    assert [r.watch and r.watch.window for r in sample_windows(rows, None)] == [1, 2, 4]


def test_connected_clients_finds_a_local_process_on_the_port():
    """A real listener here and a child process connected to it: the child is the client, this process (also
    connected) is left out when excluded, and an address that is not the listener's finds nobody."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        port = srv.getsockname()[1]
        child = subprocess.Popen([sys.executable, "-c", f"import socket, time; s = socket.create_connection("
                                  f"('127.0.0.1', {port})); print('up', flush=True); time.sleep(30)"],
                                 stdout=subprocess.PIPE, text=True)
        mine = socket.create_connection(("127.0.0.1", port))
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "up"
            addrs = server_addresses("localhost")
            assert "127.0.0.1" in addrs
            got = connected_clients(addrs, port, exclude={os.getpid()})
            assert got.pids == (child.pid,) and got.names[0].startswith("python"), got
            assert os.getpid() in connected_clients(addrs, port).pids
            # dbdiag leaves out its own tree (its collectors are its children): here the child is ours too
            assert connected_clients(addrs, port, exclude=own_tree()).pids == ()
            # the server names each session's client port: the child's session on another database is left out,
            # one on the watched database kept, one the server does not show kept and counted as unmatched
            lport = next(c.laddr.port for c in psutil.Process(child.pid).net_connections(kind="tcp")
                         if c.raddr and c.raddr.port == port)
            other = connected_clients(addrs, port, {os.getpid()}, (frozenset(), frozenset({lport})))
            assert other.pids == () and other.elsewhere == 1, other
            here = connected_clients(addrs, port, {os.getpid()}, (frozenset({lport}), frozenset()))
            assert here.pids == (child.pid,) and here.unmatched == 0, here
            unknown = connected_clients(addrs, port, {os.getpid()}, (frozenset(), frozenset()))
            assert unknown.pids == (child.pid,) and unknown.unmatched == 1, unknown
            assert connected_clients(server_addresses("/var/run/postgresql"), port).pids == ()
            assert connected_clients(frozenset({"10.255.255.1"}), port).pids == ()
        finally:
            mine.close()
            child.kill()
            child.wait(10)


def test_unseen_says_which_local_clients_were_measured():
    class B:
        run = {"kind": "watch", "watch": {}}
        rows = [_row(1, 100, local_clients={"pids": [7], "names": ["pgbench"], "unreadable": 0})]
    assert any("measured for the processes of this host connected to the server (pgbench)" in u
               for u in unseen(B()))  # type: ignore[arg-type]
    B.rows = [_row(1, 100, local_clients={"pids": [], "names": [], "unreadable": 0})]
    assert any(u.startswith("client CPU: not known") for u in unseen(B()))  # type: ignore[arg-type]


def _proc(user: float, system: float, created: float = 50.0) -> list[float]:
    return [user, system, 0, 0, 0, 0, 0, created, 0, 0, 1]


def test_cores_of_a_picked_group_over_a_window():
    """Two backends of dbdiag's (pids 7, 8) and one of the load's (9): only the picked ones count, by the share of
    each interval inside the window; 0.4 s of CPU over 2 s of window is 20% of a core."""
    recs = [{"t": 100.0, "procs.server": {"pg": {"7": _proc(1.0, 0.5), "8": _proc(2.0, 0.0), "9": _proc(5, 5)}}},
            {"t": 101.0, "procs.server": {"pg": {"7": _proc(1.1, 0.55), "8": _proc(2.05, 0.0), "9": _proc(6, 6)}}},
            {"t": 102.0, "procs.server": {"pg": {"7": _proc(1.2, 0.6), "8": _proc(2.1, 0.0), "9": _proc(7, 7)}}}]
    mine = {"7", "8"}

    def pick(rec: dict) -> dict:
        return {k: v for k, v in rec["procs.server"]["pg"].items() if k in mine}

    assert _cores(recs, pick, (100.0, 102.0)) == pytest.approx(0.2)
    assert _cores(recs, pick, (101.0, 102.0)) == pytest.approx(0.2)
    assert _cores(recs, lambda rec: {}, (100.0, 102.0)) is None
