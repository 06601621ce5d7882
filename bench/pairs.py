"""The native executor's pairs (issue 15): each workload against the reference tool running the same
transaction, on the same throwaway server, in alternating rounds.

    python3 -m bench.compare --pairs [--rounds 5] [--duration 8] [--only pg|mariadb] [--pair TEXT] [--out FILE]
    python3 -m bench.pairs FILE...    # one table over every round of those runs

Pairs, at N = 2 x cores clients (4 here):

- ``read-only`` vs ``sysbench oltp_read_only`` (10 point selects, 4 ranges of 100, BEGIN/COMMIT), both
  engines, 100,000 rows, ``--rand-type=uniform``;
- ``read-write`` vs ``pgbench`` built-in TPC-B-like, ``-M prepared``, scale 10 both (PostgreSQL), and vs
  sysbench running the same TPC-B transaction from bench/tpcb.lua on the same tables, scale 10 (MariaDB);
- ``insert`` vs ``sysbench oltp_insert`` (single-row autocommit inserts; sysbench's row is
  (id, k, c char(120), pad char(60)), ours (id, val, txt varchar(20)): the same shape of work, not the
  same bytes), both engines; and vs sysbench running our own INSERT on our table from
  bench/insert_data.lua (the same statement and rows from both clients).

Each round runs the tool and ours back to back, the order swapped every round so a drift in the
shared machine hits both alike; the ratio of a round is ours/theirs and the table gives the median
of the rounds. CPU per transaction: the tool's user+sys (getrusage of the child) against our client
processes' (the result row's client_cpu_s), and the server's CPU over each side's run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.tools import ours, pgbench_figures, run_tool, server_cpu, us_per_txn
from diag.core import servers
from diag.core.db import Session
from workloads import load as wload
from workloads.insert import insert_dataset
from workloads.pgbench import pgbench_dataset
from workloads.sysbench import sbtest_dataset

RW_SCALE = 10
SB_ROWS = 100_000  # = our scale 1
POINTS = 10


def _sysbench_figures(out: str) -> tuple[float, int]:
    """(TPS, transactions) from sysbench's summary."""
    m = re.search(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec", out)
    if not m:
        raise RuntimeError(f"no transactions line in sysbench's output: {out[-300:]}")
    return float(m.group(2)), int(m.group(1))


def _sysbench_base(conn: list[str], test: str) -> list[str]:
    return [shutil.which("sysbench") or "sysbench", test, *conn, "--tables=1", f"--table-size={SB_ROWS}"]


def read_only_script(table: str) -> str:
    """sysbench oltp_read_only's transaction as a dbdiag custom script on ``table`` (sysbench's own)."""
    lines = [f"-- oltp_read_only on {table}: 10 point selects, then simple, sum, order and distinct ranges", "BEGIN;"]
    for i in range(POINTS):
        lines += [f"\\set id{i} random(1, {SB_ROWS})", f"SELECT c FROM {table} WHERE id = :id{i};"]
    for what, order in (("c", ""), ("SUM(k)", ""), ("c", " ORDER BY c"), ("DISTINCT c", " ORDER BY c")):
        lines += [f"\\set lo random(1, {SB_ROWS - 99})", "\\set hi :lo + 99",
                  f"SELECT {what} FROM {table} WHERE id BETWEEN :lo AND :hi{order};"]
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


def _script_file(text: str) -> str:
    f = tempfile.NamedTemporaryFile("w", prefix="dbdiag-bench-", suffix=".sql", delete=False)
    f.write(text)
    f.close()
    return f.name


def _lua(conn: list[str], script: str = "insert_data.lua") -> list[str]:
    return [shutil.which("sysbench") or "sysbench", str(Path(__file__).with_name(script)), *conn]


Tool = Callable[[int, float], list[str]]


def _pair(srv: servers.ThrowawayServer, name: str, workload: str, scale: float, tool: Tool,
          parse: Callable[[str], tuple[float, int]], args: argparse.Namespace, n: int,
          before_ours: Callable[[], None] = lambda: None, script: str | None = None) -> dict:
    """Alternating rounds of ``tool`` and our ``workload``; the rounds and their medians. ``before_ours``
    runs before each of our rounds (what the tool does before its own run, e.g. pgbench's vacuum)."""
    if args.pair and args.pair not in name:
        return {}
    t = srv.target()
    run_tool(tool(n, 3), 60)  # warm both sides once, unmeasured
    before_ours()
    ours(t, workload, n, 3, scale=scale, script=script)
    rows = []
    for r in range(args.rounds):
        # the machine is shared: each round records the 1-minute load average it started at
        row: dict[str, Any] = {"round": r + 1, "clients": n, "load_1m": round(os.getloadavg()[0], 2)}
        for side in (("tool", "ours") if r % 2 == 0 else ("ours", "tool")):
            s0 = server_cpu(srv)
            if side == "tool":
                out, _, cpu = run_tool(tool(n, args.duration), args.duration + 120)
                tps, txns = parse(out)
                row.update(tool_tps=round(tps, 1), tool_us_per_txn=us_per_txn(cpu, txns),
                           tool_server_us_per_txn=us_per_txn(server_cpu(srv) - s0, txns))
            else:
                before_ours()
                s0 = server_cpu(srv)
                res = ours(t, workload, n, args.duration, scale=scale, script=script)
                txns = res.transactions or 0
                row.update(ours_tps=res.tps, ours_us_per_txn=us_per_txn(res.client_cpu_s or 0.0, txns),
                           ours_server_us_per_txn=us_per_txn(server_cpu(srv) - s0, txns),
                           driver=res.driver, errors=dict(res.errors))
        row["ratio"] = round(row["ours_tps"] / row["tool_tps"], 3) if row["tool_tps"] else 0.0
        rows.append(row)
        print(name, row, flush=True)
    med = {k: round(statistics.median(r[k] for r in rows), 3) for k in
           ("ratio", "tool_tps", "ours_tps", "tool_us_per_txn", "ours_us_per_txn", "tool_server_us_per_txn",
            "ours_server_us_per_txn")}
    return {"pair": name, "tool_command": " ".join(tool(n, args.duration)).replace(str(srv.port), "PORT"),
            "ours": f"dbdiag {workload} scale {scale:g}, {n} clients, {args.duration:g} s, prepared",
            "rounds": rows, "median": med, "range": [min(r["ratio"] for r in rows), max(r["ratio"] for r in rows)]}


def _sysbench_run(base: list[str], *extra: str) -> Tool:
    """sysbench's ``run`` of ``base`` (with ``extra`` options) at c threads for d seconds."""
    return lambda c, d: [*base, *extra, f"--threads={c}", f"--time={int(d)}", "--report-interval=0", "run"]


def _read_only_pairs(out: list[dict], srv: servers.ThrowawayServer, product: str, ro: list[str], table: str,
                     args: argparse.Namespace, n: int) -> None:
    """Our read-only, and oltp_read_only's transaction as our custom script on sysbench's ``table``, each
    against sysbench oltp_read_only (``ro``); appended to ``out`` as each ends."""
    tool = _sysbench_run(ro, "--rand-type=uniform")
    out.append(_pair(srv, f"{product} read-only vs sysbench oltp_read_only", "read-only", 1, tool,
                     _sysbench_figures, args, n))
    out.append(_pair(srv, f"{product} oltp_read_only's transaction as a custom script on sysbench's table", "custom",
                     1, tool, _sysbench_figures, args, n, script=_script_file(read_only_script(table))))


def _insert_pairs(out: list[dict], srv: servers.ThrowawayServer, product: str, ins: list[str], conn: list[str],
                  args: argparse.Namespace, n: int) -> None:
    """Our insert against sysbench oltp_insert (``ins``) and against sysbench running our own INSERT
    (bench/insert_data.lua on ``conn``); appended to ``out`` as each ends."""
    out.append(_pair(srv, f"{product} insert vs sysbench oltp_insert", "insert", 1, _sysbench_run(ins),
                     _sysbench_figures, args, n))
    out.append(_pair(srv, f"{product} insert vs sysbench running the same INSERT (bench/insert_data.lua)", "insert",
                     1, _sysbench_run(_lua(conn)), _sysbench_figures, args, n))


def pg_pairs(args: argparse.Namespace, out: list[dict]) -> None:
    srv = servers.start_postgres()
    try:
        t = srv.target()
        base = ["-h", "127.0.0.1", "-p", str(srv.port), "-U", "postgres"]
        pgbench = shutil.which("pgbench") or "pgbench"
        run_tool([pgbench, *base, "-i", "-s", str(RW_SCALE), "-q", "postgres"], 900)
        conn = ["--db-driver=pgsql", "--pgsql-host=127.0.0.1", f"--pgsql-port={srv.port}", "--pgsql-user=postgres",
                "--pgsql-db=postgres"]
        ro, ins = _sysbench_base(conn, "oltp_read_only"), _sysbench_base(conn, "oltp_insert")
        run_tool([*ro, "prepare"], 900)
        with Session(t, statement_timeout_ms=0) as s:
            wload.ensure_schema(s)
            for ds in (sbtest_dataset(1), pgbench_dataset(RW_SCALE), insert_dataset(1)):
                if not wload.is_loaded(s, ds):
                    wload.load(s, ds, None)
            # As pgbench -i does after its load, and as the server would do later, inside a round. sysbench's
            # prepare leaves public.sbtest1 unanalyzed: until autovacuum reached it (measured 55 s after the
            # prepare, in round 2) the plan cache ran its 4 range statements on generic plans, while on an
            # analyzed table (ours, and sysbench's from then on) the server plans them at every execution
            # (custom plans: 4 plannings per transaction, about 35 us of backend CPU each; pg_prepared_statements
            # and pg_stat_statements.plans, 2026-12-01). The same state for both sides from the first round.
            s.execute("VACUUM ANALYZE dbdiag.pgbench_accounts, dbdiag.pgbench_branches, dbdiag.pgbench_tellers, "
                      "dbdiag.sbtest1, public.sbtest1")

        def like_pgbench() -> None:
            # pgbench's own start of a run: vacuum the branches and tellers, empty the history
            with Session(t, statement_timeout_ms=0) as s:
                s.execute("VACUUM dbdiag.pgbench_branches, dbdiag.pgbench_tellers")
                s.execute("TRUNCATE dbdiag.pgbench_history")
        n = 2 * (os.cpu_count() or 1)
        _read_only_pairs(out, srv, "PostgreSQL", ro, "public.sbtest1", args, n)
        out.append(_pair(srv, f"PostgreSQL read-write vs pgbench TPC-B (scale {RW_SCALE})", "read-write", RW_SCALE,
                         lambda c, d: [pgbench, *base, "-M", "prepared", "-c", str(c), "-j", str(c), "-T", str(int(d)),
                                       "postgres"], pgbench_figures, args, n, before_ours=like_pgbench))
        _insert_pairs(out, srv, "PostgreSQL", ins, conn, args, n)
    finally:
        srv.stop()


def my_pairs(args: argparse.Namespace, out: list[dict]) -> None:
    srv = servers.start_mysql()
    try:
        t = srv.target()
        with Session(t, statement_timeout_ms=0) as s:
            s.execute("CREATE DATABASE IF NOT EXISTS sbtest")
            wload.ensure_schema(s)
            for ds in (sbtest_dataset(1), pgbench_dataset(RW_SCALE), insert_dataset(1)):
                if not wload.is_loaded(s, ds):
                    wload.load(s, ds, None)
        conn = ["--db-driver=mysql", "--mysql-host=127.0.0.1", f"--mysql-port={srv.port}", "--mysql-user=root",
                "--mysql-db=sbtest"]
        ro, ins = _sysbench_base(conn, "oltp_read_only"), _sysbench_base(conn, "oltp_insert")
        run_tool([*ro, "prepare"], 900)
        with Session(t, statement_timeout_ms=0) as s:
            s.execute("ANALYZE TABLE sbtest.sbtest1")  # as our load does (the PostgreSQL side says why)
        n = 2 * (os.cpu_count() or 1)
        _read_only_pairs(out, srv, "MariaDB", ro, "sbtest.sbtest1", args, n)
        out.append(_pair(srv, f"MariaDB read-write vs sysbench running the same TPC-B (bench/tpcb.lua, scale {RW_SCALE})",
                         "read-write", RW_SCALE, _sysbench_run(_lua(conn, "tpcb.lua"), f"--scale={RW_SCALE}"),
                         _sysbench_figures, args, n))
        _insert_pairs(out, srv, "MariaDB", ins, conn, args, n)
    finally:
        srv.stop()


def run_pairs(args: argparse.Namespace, report: dict) -> None:
    if not shutil.which("sysbench"):
        report["pairs"] = "sysbench not installed (apt-get install -y sysbench): skipped"
        return
    pairs: list[dict] = []
    report["pairs"] = pairs
    if args.only in (None, "pg"):
        pg_pairs(args, pairs)
    if args.only in (None, "mariadb"):
        my_pairs(args, pairs)
    pairs[:] = [p for p in pairs if p]  # the ones --pair left out


def summarize_pairs(report: dict) -> str:
    lines = []
    for p in report.get("pairs") or []:
        if isinstance(p, dict):
            m = p["median"]
            lines.append(f"{p['pair']}: ratio median {m['ratio']:.3f} (range {p['range'][0]}-{p['range'][1]}), "
                         f"TPS {m['ours_tps']:.0f} vs {m['tool_tps']:.0f}, client µs/txn {m['ours_us_per_txn']} vs "
                         f"{m['tool_us_per_txn']}, server µs/txn {m['ours_server_us_per_txn']} vs "
                         f"{m['tool_server_us_per_txn']}")
    return "\n".join(lines)


def pooled_table(files: list[str]) -> str:
    """One markdown row per pair over every round of ``files`` (runs of ``--pairs``): rounds, median of
    per-round TPS ratios (range), median TPS, client and server µs per transaction of both sides, and the
    median CPU-cost ratio (theirs/ours, client + server)."""
    by: dict[str, list[dict]] = {}
    for f in files:
        for p in json.loads(Path(f).read_text()).get("pairs") or []:
            if isinstance(p, dict) and p:
                by.setdefault(p["pair"], []).extend(p["rounds"])
    lines = ["| pair | rounds | TPS ratio ours/theirs, median (range) | TPS ours / theirs | client µs/txn ours / "
             "theirs | server µs/txn ours / theirs | CPU-cost ratio theirs/ours (range) |", "|---|---|---|---|---|---|---|"]
    for name, rs in by.items():
        def med(k: str) -> float:
            return statistics.median(r[k] for r in rs)
        cpu = [(r["tool_us_per_txn"] + r["tool_server_us_per_txn"]) / (r["ours_us_per_txn"] + r["ours_server_us_per_txn"])
               for r in rs]
        lines.append(f"| {name} | {len(rs)} | {med('ratio'):.3f} ({min(r['ratio'] for r in rs):.2f}-"
                     f"{max(r['ratio'] for r in rs):.2f}) | {med('ours_tps'):,.0f} / {med('tool_tps'):,.0f} | "
                     f"{med('ours_us_per_txn'):.0f} / {med('tool_us_per_txn'):.0f} | {med('ours_server_us_per_txn'):.0f}"
                     f" / {med('tool_server_us_per_txn'):.0f} | {statistics.median(cpu):.3f} ({min(cpu):.2f}-"
                     f"{max(cpu):.2f}) |")
    return "\n".join(lines)


if __name__ == "__main__":
    if not sys.argv[1:] or sys.argv[1] in ("-h", "--help"):
        sys.exit("usage: python -m bench.pairs RESULTS.json... (runs of bench.compare --pairs): one pooled table")
    try:
        print(pooled_table(sys.argv[1:]))
    except (OSError, ValueError, KeyError) as e:  # a missing file, not JSON, not a --pairs result
        sys.exit(f"bench.pairs: {e}")
