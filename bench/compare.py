"""Measure dbdiag's driver against pgbench and sysbench on the same throwaway servers.

    python3 -m bench.compare [--rounds 3] [--duration 10] [--drivers] [--only pg|mariadb] [--clients 4]
                             [--load-rounds 0] [--out FILE]

What it runs (every command is printed and saved with its numbers):

1. PostgreSQL (throwaway server from diag.core.servers, default settings):
   - load time: ``pgbench -i -s 10 -q`` vs our point-select scale 10 and read-write scale 10 (fresh loads);
   - ``pgbench -S -M prepared -c N -j N -T D`` vs our point-select (sbtest, scale 1) and vs our custom
     script with pgbench's exact SELECT on pgbench's tables (scale 1), N = 2 x cores and N = 1 (or
     ``--clients``); the sides of a round run in one order, the next round's in the reverse one, so a
     drift of the shared machine hits all sides alike (each row records the order and the load average);
   - client CPU per transaction: pgbench's user+sys (getrusage of the child) vs our client processes'.
2. MariaDB (throwaway), when sysbench is installed: ``sysbench oltp_point_select --rand-type=uniform``
   (100,000 rows) vs our point-select scale 1, same N, same alternation; sysbench prepare (1M rows) vs our
   load at scale 10 (``--load-rounds 0``: no load timing).
3. Driver loops (``--drivers``): the same point-select loop through each installed driver API.
4. ``--pairs`` (bench/pairs.py): read-only, read-write and insert on the native executor against
   sysbench oltp_read_only / pgbench TPC-B / sysbench oltp_insert, instead of 1-3.

The ratio reported per (N, tool) is the median of per-round ratios ours/theirs.
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
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.drivers import VARIANTS, measure  # noqa: E402
from bench.pairs import run_pairs, summarize_pairs  # noqa: E402
from bench.tools import ours, pgbench_figures, run_tool, server_cpu, us_per_txn  # noqa: E402
from diag.core import servers  # noqa: E402
from diag.core.db import Session  # noqa: E402
from diag.core.schema import ResultRow  # noqa: E402
from workloads import load as wload  # noqa: E402
from workloads.pgbench import pgbench_dataset  # noqa: E402
from workloads.sysbench import sbtest_dataset  # noqa: E402

PGBENCH_S_SCRIPT = "\\set aid random(1, 100000 * 1)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
# Our point-select's statement on our sbtest table, for pgbench -f: the same query from both clients.
POINT_SELECT_SCRIPT = "\\set id random(1, 100000)\nSELECT c FROM dbdiag.sbtest1 WHERE id = :id;\n"


def alternated(srv: servers.ThrowawayServer, r: int, sides: list[tuple[str, Callable[[], Any]]]) -> dict[str, tuple[Any, float]]:
    """Run each side of round ``r`` (0-based) once, in the given order in even rounds and reversed in odd
    ones, so a drift of the shared machine hits all sides alike; {name: (its result, server CPU seconds
    over its run)}."""
    out: dict[str, tuple[Any, float]] = {}
    for name, fn in (sides if r % 2 == 0 else sides[::-1]):
        s0 = server_cpu(srv)
        res = fn()
        out[name] = (res, server_cpu(srv) - s0)
    return out


def _load() -> list[float]:
    """The 1-minute load average now (reported beside the figures: the machine is shared)."""
    return [round(x, 2) for x in os.getloadavg()]


def _ours_cols(prefix: str, res: ResultRow, server_s: float) -> dict:
    """TPS, client and server µs per transaction of one of our result rows, as ``<prefix>_...`` keys."""
    txns = res.transactions or 0
    return {f"{prefix}_tps": res.tps, f"{prefix}_us_per_txn": us_per_txn(res.client_cpu_s or 0.0, txns),
            f"{prefix}_server_us_per_txn": us_per_txn(server_s, txns)}


def _cpu_ratio(row: dict, theirs: str, ours_: str) -> float:
    """(their client + server µs/txn) / (our client + server µs/txn)."""
    t = row[f"{theirs}_us_per_txn"] + row[f"{theirs}_server_us_per_txn"]
    o = row[f"{ours_}_us_per_txn"] + row[f"{ours_}_server_us_per_txn"]
    return round(t / o, 3) if o else 0.0


def pg_section(args: argparse.Namespace, report: dict) -> None:
    srv = servers.start_postgres()
    try:
        t = srv.target()
        base = ["-h", "127.0.0.1", "-p", str(srv.port), "-U", "postgres"]
        pgbench = shutil.which("pgbench") or "/usr/bin/pgbench"
        # -- load times ---------------------------------------------------------------
        loads: list[dict] = []
        sysbench = shutil.which("sysbench")
        sb_pg = [sysbench or "sysbench", "oltp_point_select", "--db-driver=pgsql", "--pgsql-host=127.0.0.1",
                 f"--pgsql-port={srv.port}", "--pgsql-user=postgres", "--pgsql-db=postgres", "--tables=1",
                 "--table-size=1000000"]
        def checkpoint() -> None:
            # Each timed load starts with no checkpoint pending from the previous one's WAL.
            with Session(t, statement_timeout_ms=0) as s:
                s.execute("CHECKPOINT")

        for r in range(args.load_rounds):
            checkpoint()
            _, wall, _ = run_tool([pgbench, *base, "-i", "-s", "10", "-q", "postgres"], 600)
            row = {"round": r + 1, "pgbench -i -s 10": round(wall, 2)}
            if sysbench:  # the like-for-like reference for sbtest: sysbench's own load of the same table
                checkpoint()
                _, sb_wall, _ = run_tool([*sb_pg, "prepare"], 900)
                run_tool([*sb_pg, "cleanup"], 300)
                row["sysbench prepare 1M rows (pgsql)"] = round(sb_wall, 2)
            with Session(t, statement_timeout_ms=0) as s:
                wload.ensure_schema(s)
                checkpoint()
                row["point-select scale 10"] = round(wload.load(s, sbtest_dataset(10), None), 2)
                checkpoint()
                row["read-write scale 10"] = round(wload.load(s, pgbench_dataset(10), None), 2)
                wload.drop(s, sbtest_dataset(10))
                wload.drop(s, pgbench_dataset(10))
            loads.append(row)
            print("load", row, flush=True)
        report["pg_load"] = {"command": f"{pgbench} -h 127.0.0.1 -p PORT -U postgres -i -s 10 -q postgres",
                             "sysbench_command": " ".join(sb_pg).replace(str(srv.port), "PORT") + " prepare"
                             if sysbench else "sysbench not installed", "rounds": loads}
        # -- TPS ----------------------------------------------------------------------
        run_tool([pgbench, *base, "-i", "-s", "1", "-q", "postgres"], 600)
        with Session(t, statement_timeout_ms=0) as s:
            wload.ensure_schema(s)
            if not wload.is_loaded(s, sbtest_dataset(1)):
                wload.load(s, sbtest_dataset(1), None)
            version = s.version_text.split(" on ")[0]
        tmpdir = tempfile.TemporaryDirectory(prefix="dbdiag-bench-")
        script = Path(tmpdir.name) / "pgbench-S.sql"
        script.write_text(PGBENCH_S_SCRIPT)
        ps_script = Path(tmpdir.name) / "point-select.sql"
        ps_script.write_text(POINT_SELECT_SCRIPT)
        ncpu = os.cpu_count() or 1
        rows: list[dict] = []
        # Warm both sides' caches once, unmeasured.
        run_tool([pgbench, *base, "-S", "-M", "prepared", "-c", "2", "-j", "2", "-T", "3", "postgres"], 60)
        ours(t, "point-select", 2, 2)
        for n in args.clients or (2 * ncpu, 1):
            for r in range(args.rounds):
                cmd = [pgbench, *base, "-S", "-M", "prepared", "-c", str(n), "-j", str(n), "-T",
                       str(int(args.duration)), "postgres"]
                cmd_f = [pgbench, *base, "-f", str(ps_script), "-M", "prepared", "-c", str(n), "-j", str(n), "-T",
                         str(int(args.duration)), "postgres"]
                got = alternated(srv, r, [
                    ("pgbench", lambda: run_tool(cmd, args.duration + 60)),
                    ("ps", lambda: ours(t, "point-select", n, args.duration)),
                    ("cs", lambda: ours(t, "custom", n, args.duration, script=str(script))),
                    ("py", lambda: ours(t, "point-select", n, args.duration, py_loop=True)),
                    ("pgbench_f", lambda: run_tool(cmd_f, args.duration + 60))])
                (out, _, cpu), pg_s = got["pgbench"]
                (out_f, _, cpu_f), pgf_s = got["pgbench_f"]
                ps, cs, py = got["ps"][0], got["cs"][0], got["py"][0]
                tps, txns = pgbench_figures(out)
                tps_f, txns_f = pgbench_figures(out_f)
                row = {"clients": n, "round": r + 1, "order": "as listed" if r % 2 == 0 else "reversed",
                       "load": _load(), "pgbench_tps": round(tps, 1),
                       "pgbench_us_per_txn": round(cpu / txns * 1e6, 2),
                       "pgbench_server_us_per_txn": us_per_txn(pg_s, txns),
                       **_ours_cols("ours_point_select", ps, got["ps"][1]),
                       **_ours_cols("ours_pgbench_script", cs, got["cs"][1]),
                       **_ours_cols("ours_python_loop", py, got["py"][1]),
                       "pgbench_f_tps": round(tps_f, 1), "pgbench_f_us_per_txn": us_per_txn(cpu_f, txns_f),
                       "pgbench_f_server_us_per_txn": us_per_txn(pgf_s, txns_f),
                       "driver": ps.driver, "driver_pgbench_script": cs.driver,
                       "driver_python_loop": py.driver}
                # What the CPU cost per transaction implies when the machine's CPUs are the limit
                # (client and server share them): insensitive to other tenants' load.
                row["cpu_ratio_point_select"] = _cpu_ratio(row, "pgbench", "ours_point_select")
                row["cpu_ratio_pgbench_script"] = _cpu_ratio(row, "pgbench", "ours_pgbench_script")
                row["cpu_ratio_python_loop"] = _cpu_ratio(row, "pgbench", "ours_python_loop")
                row["ratio_point_select"] = round(row["ours_point_select_tps"] / tps, 3)
                row["ratio_pgbench_script"] = round(row["ours_pgbench_script_tps"] / tps, 3)
                row["ratio_python_loop"] = round((py.tps or 0.0) / tps, 3)
                # The same statement on the same table from pgbench and from us: the driver alone.
                row["ratio_point_select_same_query"] = round((ps.tps or 0.0) / tps_f, 3)
                row["cpu_ratio_point_select_same_query"] = _cpu_ratio(row, "pgbench_f", "ours_point_select")
                rows.append(row)
                print("pg", row, flush=True)
        report["pg_tps"] = {"command": "pgbench -h 127.0.0.1 -p PORT -U postgres -S -M prepared -c N -j N -T "
                                       f"{int(args.duration)} postgres", "rounds": rows,
                            "command_same_query": "pgbench -h 127.0.0.1 -p PORT -U postgres -f point-select.sql "
                                                  f"-M prepared -c N -j N -T {int(args.duration)} postgres",
                            "point_select_script": POINT_SELECT_SCRIPT,
                            "server": f"throwaway {version} (diag.core.servers.start_postgres, default settings)"}
        if args.drivers:
            report["pg_drivers"] = driver_loops(t, args)
    finally:
        srv.stop()


def my_section(args: argparse.Namespace, report: dict) -> None:
    sysbench = shutil.which("sysbench")
    if not sysbench:
        report["mariadb"] = "sysbench not installed (apt-get install -y sysbench): skipped"
        return
    srv = servers.start_mysql()
    try:
        t = srv.target()
        with Session(t, statement_timeout_ms=0) as s:
            s.execute("CREATE DATABASE IF NOT EXISTS sbtest")
            product = f"{s.product} {s.version_text.split(' on ')[0]}"
        sb = [sysbench, "oltp_point_select", "--db-driver=mysql", "--mysql-host=127.0.0.1",
              f"--mysql-port={srv.port}", "--mysql-user=root", "--mysql-db=sbtest", "--tables=1"]
        loads = []
        for r in range(args.load_rounds):
            with Session(t, statement_timeout_ms=0) as s:
                s.execute("DROP TABLE IF EXISTS sbtest.sbtest1")
            _, wall, _ = run_tool([*sb, "--table-size=1000000", "prepare"], 900)
            with Session(t, statement_timeout_ms=0) as s:
                wload.ensure_schema(s)
                ours_s = wload.load(s, sbtest_dataset(10), None)
                ours_rw = wload.load(s, pgbench_dataset(10), None)
                wload.drop(s, sbtest_dataset(10))
                wload.drop(s, pgbench_dataset(10))
                s.execute("DROP TABLE IF EXISTS sbtest.sbtest1")
            row = {"round": r + 1, "sysbench prepare 1M rows": round(wall, 2),
                   "point-select scale 10": round(ours_s, 2), "read-write scale 10": round(ours_rw, 2)}
            loads.append(row)
            print("load", row, flush=True)
        report["my_load"] = {"command": " ".join(sb).replace(str(srv.port), "PORT") +
                             " --table-size=1000000 prepare", "rounds": loads}
        run_tool([*sb, "--table-size=100000", "prepare"], 600)
        with Session(t, statement_timeout_ms=0) as s:
            wload.ensure_schema(s)
            if not wload.is_loaded(s, sbtest_dataset(1)):
                wload.load(s, sbtest_dataset(1), None)
        ncpu = os.cpu_count() or 1
        run_tool([*sb, "--table-size=100000", "--rand-type=uniform", "--threads=2", "--time=3", "run"], 60)
        ours(t, "point-select", 2, 2)
        rows = []
        for n in args.clients or (2 * ncpu, 1):
            for r in range(args.rounds):
                cmd = [*sb, "--table-size=100000", "--rand-type=uniform", f"--threads={n}",
                       f"--time={int(args.duration)}", "--report-interval=0", "run"]
                got = alternated(srv, r, [("sysbench", lambda: run_tool(cmd, args.duration + 60)),
                                          ("ps", lambda: ours(t, "point-select", n, args.duration)),
                                          ("py", lambda: ours(t, "point-select", n, args.duration, py_loop=True))])
                (out, _, cpu), sb_s = got["sysbench"]
                m = re.search(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec", out)
                assert m, out
                txns, tps = int(m.group(1)), float(m.group(2))
                ps, py = got["ps"][0], got["py"][0]
                row = {"clients": n, "round": r + 1, "order": "as listed" if r % 2 == 0 else "reversed",
                       "load": _load(), "sysbench_tps": tps, "sysbench_us_per_txn":
                       round(cpu / txns * 1e6, 2), "sysbench_server_us_per_txn": us_per_txn(sb_s, txns),
                       **_ours_cols("ours_point_select", ps, got["ps"][1]),
                       **_ours_cols("ours_python_loop", py, got["py"][1]),
                       "driver": ps.driver, "driver_python_loop": py.driver}
                row["cpu_ratio_point_select"] = _cpu_ratio(row, "sysbench", "ours_point_select")
                row["cpu_ratio_python_loop"] = _cpu_ratio(row, "sysbench", "ours_python_loop")
                row["ratio_point_select"] = round((ps.tps or 0.0) / tps, 3)
                row["ratio_python_loop"] = round((py.tps or 0.0) / tps, 3)
                rows.append(row)
                print("my", row, flush=True)
        report["my_tps"] = {"command": " ".join(sb).replace(str(srv.port), "PORT") +
                            f" --table-size=100000 --rand-type=uniform --threads=N --time={int(args.duration)} run",
                            "rounds": rows, "server": f"throwaway {product} (diag.core.servers.start_mysql, defaults)"}
        if args.drivers:
            report["my_drivers"] = driver_loops(t, args)
    finally:
        srv.stop()


def driver_loops(target: Any, args: argparse.Namespace) -> list[dict]:
    """Point-select through each driver API, N = 2 x cores processes, variants alternated per round."""
    n = 2 * (os.cpu_count() or 1)
    runs: dict[str, list[dict]] = {}
    for r in range(args.rounds):
        for name in VARIANTS[target.engine]:
            try:
                res = measure(target, name, n, min(args.duration, 5))
            except Exception as e:  # a driver not installed: say so in the table
                res = {"variant": name, "error": f"{type(e).__name__}: {e}"}
            print("driver", r + 1, res, flush=True)
            runs.setdefault(name, []).append(res)
    out = []
    for name, rs in runs.items():
        ok = [x for x in rs if "tps" in x]
        if not ok:
            out.append(rs[0])
            continue
        out.append({"variant": name, "clients": n, "tps_median": statistics.median(x["tps"] for x in ok),
                    "us_per_txn_median": statistics.median(x["client_us_per_txn"] for x in ok),
                    "rounds": [(x["tps"], x["client_us_per_txn"]) for x in ok]})
    return out


def summarize(report: dict) -> str:
    lines = []
    for key, tool, cols in (("pg_tps", "pgbench", ("ratio_point_select", "ratio_pgbench_script",
                                                   "cpu_ratio_point_select", "cpu_ratio_pgbench_script")),
                            ("my_tps", "sysbench", ("ratio_point_select", "cpu_ratio_point_select"))):
        sec = report.get(key)
        if not isinstance(sec, dict):
            continue
        for n in sorted({r["clients"] for r in sec["rounds"]}, reverse=True):
            rs = [r for r in sec["rounds"] if r["clients"] == n]
            for col in (*cols, "ratio_python_loop", "cpu_ratio_python_loop", "ratio_point_select_same_query"):
                if col not in rs[0]:
                    continue
                lines.append(f"{key} clients={n} {col}: median {statistics.median(r[col] for r in rs):.3f} "
                             f"(rounds {', '.join(str(r[col]) for r in rs)})")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--load-rounds", type=int, default=1)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--only", choices=("pg", "mariadb"), default=None)
    ap.add_argument("--clients", type=lambda v: tuple(int(x) for x in v.split(",")), default=(),
                    help="point-select client counts, e.g. 4 (default: 2 x cores, then 1)")
    ap.add_argument("--drivers", action="store_true", help="also time each driver API's bare loop")
    ap.add_argument("--pairs", action="store_true",
                    help="only the native executor's pairs (bench/pairs.py): read-only, read-write, insert")
    ap.add_argument("--pair", default="", help="with --pairs: only the pairs whose name contains this text")
    ap.add_argument("--out", default="bench/results/last-run.json")
    args = ap.parse_args()
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "cpus": os.cpu_count(),
                              "duration_s": args.duration, "rounds": args.rounds}
    if args.pairs:
        try:
            run_pairs(args, report)
        finally:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(report, indent=1))
        print(summarize_pairs(report))
        return
    try:
        if args.only in (None, "pg"):
            pg_section(args, report)
        if args.only in (None, "mariadb"):
            my_section(args, report)
    finally:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))
    print(summarize(report))


if __name__ == "__main__":
    main()
