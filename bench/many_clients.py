"""Many open connections (issue 26): dbdiag point-select against pgbench / sysbench at hundreds and a thousand
clients, on the same throwaway server, in alternating rounds; and our client CPU per transaction by client count.

    python3 -m bench.many_clients [--engine pg|mariadb] [--clients 200,1000] [--rounds 5] [--duration 8]
                                  [--cpu-clients 8,1000[,8t,1000t]] [--out FILE]

PostgreSQL (max_connections 1100): ours ``point-select`` (prepared, the native executor; from 32 clients
several connections per process, workloads.steps.mux) against ``pgbench -n -M prepared -j 2 -c N`` running
pgbench -S's statement on our table (``\\set id random(1, 100000)`` / ``SELECT c FROM dbdiag.sbtest1 WHERE
id = :id``): its "tps ... without initial connection time" against ours (start-up outside the window).
MariaDB (max_connections 1100): ours against ``sysbench oltp_point_select --threads=N`` on sysbench's own
100,000-row sbtest1 (the same shape of table and statement). Each round runs both back to back, the order
swapped every round, and records the 1-minute load average it started at. CPU per transaction: ours is the
result row's client_cpu_s / transactions (the client processes' user + system over the measured part), the
tool's its getrusage over its run (its connects included) / transactions.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.tools import run_tool, us_per_txn
from diag.core import servers
from diag.core.bundle import BundleWriter
from diag.core.db import Session
from workloads import load as wload
from workloads.driver import DriverOptions, run_sweep
from workloads.sysbench import sbtest_dataset

QUIET = "/work/notes/QUIET"
SCRIPT = "\\set id random(1, 100000)\nSELECT c FROM dbdiag.sbtest1 WHERE id = :id;\n"
MAX_CONNECTIONS = 1100


def quiet() -> None:
    """Wait while the coordinator measures (/work/notes/QUIET, when that file exists on this machine)."""
    while os.path.exists(QUIET):
        time.sleep(5)


def _rusage(*who: int) -> tuple[float, float]:
    """(user, system) CPU seconds so far of ``who`` (resource.RUSAGE_SELF / RUSAGE_CHILDREN), summed."""
    rs = [resource.getrusage(w) for w in who]
    return sum(r.ru_utime for r in rs), sum(r.ru_stime for r in rs)


def _split(before: tuple[float, float], after: tuple[float, float], txns: int) -> dict[str, float]:
    """User and system CPU µs per transaction between two :func:`_rusage` readings."""
    return {"user_us_per_txn": us_per_txn(after[0] - before[0], txns),
            "sys_us_per_txn": us_per_txn(after[1] - before[1], txns)}


def ours(srv: servers.ThrowawayServer, clients: int, duration: float, mux: str = "") -> dict[str, Any]:
    """One step; ``mux``: DBDIAG_MUX for it ("1": several connections per process from 2 clients). Besides the
    row's client CPU (measured part only), the user/system split over the whole step (connects included, as
    the tool's): this process and its reaped clients by getrusage."""
    r0 = _rusage(resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    opts = DriverOptions(clients=(clients,), duration_s=duration, warmup_s=0.0)
    old = os.environ.get("DBDIAG_MUX")
    if mux:
        os.environ["DBDIAG_MUX"] = mux
    try:
        with tempfile.TemporaryDirectory(prefix="dbdiag-bench-") as d:
            row = run_sweep(srv.target(), ["point-select"], opts, BundleWriter(Path(d)), progress=None)[0]
    finally:
        if mux:
            os.environ.pop("DBDIAG_MUX") if old is None else os.environ.__setitem__("DBDIAG_MUX", old)
    split = _split(r0, _rusage(resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN), row.transactions or 0)
    return {"tps": row.tps, "us_per_txn": us_per_txn(row.client_cpu_s or 0.0, row.transactions or 0), **split,
            "startup_s": row.startup_s, "interval_tps": list(row.interval_tps) or None, "driver": row.driver,
            "complete": row.complete, "errors": dict(row.errors)}


def tool_cmd(engine: str, srv: servers.ThrowawayServer, script: str, clients: int, duration: float) -> list[str]:
    if engine == "pg":
        return ["pgbench", "-h", "127.0.0.1", "-p", str(srv.port), "-U", "postgres", "-n", "-M", "prepared",
                "-f", script, "-c", str(clients), "-j", "2", "-T", f"{duration:g}", "postgres"]
    return [shutil.which("sysbench") or "sysbench", "oltp_point_select", "--db-driver=mysql", "--mysql-host=127.0.0.1",
            f"--mysql-port={srv.port}", "--mysql-user=root", "--mysql-db=sbtest", "--tables=1",
            "--table-size=100000", f"--threads={clients}", f"--time={int(duration)}", "--report-interval=0", "run"]


def tool(engine: str, srv: servers.ThrowawayServer, script: str, clients: int, duration: float) -> dict[str, Any]:
    r0 = _rusage(resource.RUSAGE_CHILDREN)
    out, _wall, cpu = run_tool(tool_cmd(engine, srv, script, clients, duration), duration + 300)
    r1 = _rusage(resource.RUSAGE_CHILDREN)
    if engine == "pg":
        tps = float(re.search(r"tps = ([\d.]+) \(without", out).group(1))  # type: ignore[union-attr]
        txns = int(re.search(r"actually processed: (\d+)", out).group(1))  # type: ignore[union-attr]
    else:
        m = re.search(r"transactions:\s+(\d+)\s+\(([\d.]+) per sec", out)
        assert m, out[-300:]
        tps, txns = float(m.group(2)), int(m.group(1))
    return {"tps": tps, "us_per_txn": us_per_txn(cpu, txns), **_split(r0, r1, txns)}


def start(engine: str) -> servers.ThrowawayServer:
    if engine == "pg":
        return servers.start_postgres({"max_connections": str(MAX_CONNECTIONS)}, instrument=False)
    srv = servers.start_mysql({"max_connections": str(MAX_CONNECTIONS)}, instrument=False)
    with Session(srv.target(), statement_timeout_ms=0) as s:
        s.execute("CREATE DATABASE IF NOT EXISTS sbtest")
        wload.ensure_schema(s)
        ds = sbtest_dataset(1)
        if not wload.is_loaded(s, ds):
            wload.load(s, ds, None)
    run_tool([*tool_cmd("mariadb", srv, "", 1, 1)[:-4], "prepare"], 900)
    return srv


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=("pg", "mariadb"), default="pg")
    ap.add_argument("--clients", default="200,1000")
    ap.add_argument("--cpu-clients", default="", help="CPU per transaction at these client counts (ours; N t: the "
                    "tool at N, e.g. 8t,1000t; N m: ours with DBDIAG_MUX=1)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--procs", default="", help="pairs: ours at each of these DBDIAG_MUX_PROCS too (e.g. 2,4)")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    srv = start(a.engine)
    summary: dict[str, Any] = {"engine": a.engine, "duration_s": a.duration, "max_connections": MAX_CONNECTIONS,
                               "pairs": {}, "cpu": {}}
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
            f.write(SCRIPT)
        ours(srv, 2, 1)  # loads the table and warms the cache
        summary["tool_command"] = " ".join(tool_cmd(a.engine, srv, f.name, 0, a.duration)).replace(
            str(srv.port), "PORT").replace("-c 0 ", "-c N ").replace("--threads=0", "--threads=N")
        for n in [int(x) for x in a.clients.split(",") if x]:
            rounds = []
            for i in range(a.rounds):
                quiet()
                pair: dict[str, Any] = {"round": i + 1, "load_1m": round(os.getloadavg()[0], 2)}
                sides = ["ours", "tool", *[f"procs{x}" for x in a.procs.split(",") if x]]
                for side in (sides if i % 2 == 0 else sides[::-1]):
                    if side.startswith("procs"):
                        os.environ["DBDIAG_MUX_PROCS"] = side[5:]
                        try:
                            pair[side] = ours(srv, n, a.duration)
                        finally:
                            del os.environ["DBDIAG_MUX_PROCS"]
                    else:
                        pair[side] = ours(srv, n, a.duration) if side == "ours" else tool(a.engine, srv, f.name, n,
                                                                                        a.duration)
                for side in sides[2:]:
                    pair[f"{side}_ratio"] = round(pair[side]["tps"] / pair["tool"]["tps"], 3)
                pair["ratio"] = round(pair["ours"]["tps"] / pair["tool"]["tps"], 3)
                pair["load_1m_end"] = round(os.getloadavg()[0], 2)
                rounds.append(pair)
                print(n, json.dumps(pair), flush=True)
            summary["pairs"][n] = {
                "rounds": rounds, "median_ratio": statistics.median(r["ratio"] for r in rounds),
                "ours_tps_median": statistics.median(r["ours"]["tps"] for r in rounds),
                "tool_tps_median": statistics.median(r["tool"]["tps"] for r in rounds),
                "ours_us_per_txn_median": statistics.median(r["ours"]["us_per_txn"] for r in rounds),
                "tool_us_per_txn_median": statistics.median(r["tool"]["us_per_txn"] for r in rounds),
                "load_1m": [min(r["load_1m"] for r in rounds), max(r["load_1m"] for r in rounds)],
                **{f"{k}_median": statistics.median(r[k] for r in rounds) for k in rounds[0] if k.endswith("_ratio")}}
            print(n, json.dumps({k: v for k, v in summary["pairs"][n].items() if k != "rounds"}), flush=True)
            if a.out:  # as it goes: a cut run keeps what it measured
                Path(a.out).write_text(json.dumps(summary, indent=1))
        cpu = [x for x in a.cpu_clients.split(",") if x]  # "8m": 8 clients with DBDIAG_MUX=1, "8t": the tool
        for r in range(a.rounds):  # the client counts alternate within each round
            for key in (cpu if r % 2 == 0 else cpu[::-1]):
                quiet()
                load = round(os.getloadavg()[0], 2)
                n = int(key.rstrip("mt"))
                got = (tool(a.engine, srv, f.name, n, a.duration) if key.endswith("t") else
                       ours(srv, n, a.duration, "1" if key.endswith("m") else ""))
                run = {"load_1m": load, **got}
                summary["cpu"].setdefault(key, {"runs": []})["runs"].append(run)
                print("cpu", key, json.dumps(run), flush=True)
        for key, v in summary["cpu"].items():
            runs = v["runs"]
            # a tool's ("8t"): its getrusage over its whole run, its connects included
            summary["cpu"][key] = {"runs": runs, "tps_median": statistics.median(r["tps"] for r in runs),
                                   **{f"{k}_median": statistics.median(r[k] for r in runs)
                                      for k in ("us_per_txn", "user_us_per_txn", "sys_us_per_txn")}}
            print("cpu", key, {k: v for k, v in summary["cpu"][key].items() if k != "runs"}, flush=True)
        if a.out:
            Path(a.out).write_text(json.dumps(summary, indent=1))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
