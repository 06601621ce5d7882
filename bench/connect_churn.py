"""A connection per transaction (issue 26): ``dbdiag run --connect-per-transaction`` against ``pgbench -C``,
point selects on the same throwaway PostgreSQL, in alternating rounds.

    python3 -m bench.connect_churn [--rounds 5] [--duration 5] [--clients 4] [--out FILE]
    python3 -m bench.connect_churn --many [--clients 200] ...   # no churn: many open connections

Both open a connection (TCP to 127.0.0.1, trust), prepare the one SELECT on it, run one transaction and
close it, in a closed loop per client. pgbench's script is the same statement on the same table
(``\\set id random(1, 100000)``, ``-M prepared``, ``-j 2``). The ratio of a round is our tps / pgbench's;
the connect time is ours per transaction (inside the latency) against pgbench's "average connection time".
Each round runs both back to back, the order swapped every round; the table gives the median of rounds.
``--many``: the same pair without -C at many clients (a server with max_connections above them), our tps
(start-up outside the window) against pgbench's "without initial connection time"; ours also reports the
start-up (clients ready per second).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
from pathlib import Path

from bench.tools import run_tool
from diag.core import servers
from diag.core.bundle import BundleWriter
from workloads.driver import DriverOptions, run_sweep

SCRIPT = "\\set id random(1, 100000)\nSELECT c FROM dbdiag.sbtest1 WHERE id = :id;\n"


def ours(srv: servers.ThrowawayServer, clients: int, duration: float, churn: bool = True) -> dict:
    opts = DriverOptions(clients=(clients,), duration_s=duration, warmup_s=0.0, connect_per_txn=churn)
    with tempfile.TemporaryDirectory(prefix="dbdiag-bench-") as d:
        row = run_sweep(srv.target(), ["point-select"], opts, BundleWriter(Path(d)), progress=None)[0]
    if not churn:
        return {"tps": row.tps, "startup_s": row.startup_s, "intervals": list(row.interval_tps)}
    return {"tps": row.tps, "connect_ms": row.connect_ms_per_txn}


def pgbench(srv: servers.ThrowawayServer, script: str, clients: int, duration: float, churn: bool = True) -> dict:
    out, _wall, _cpu = run_tool(["pgbench", "-h", "127.0.0.1", "-p", str(srv.port), "-U", "postgres", "-n",
                                 *(["-C"] if churn else []), "-M", "prepared", "-f", script, "-c", str(clients),
                                 "-j", "2", "-T", f"{duration:g}", "postgres"], timeout=duration + 120)
    tps = float(re.search(r"tps = ([\d.]+)", out).group(1))  # type: ignore[union-attr]
    if not churn:
        return {"tps": tps}
    conn = float(re.search(r"average connection time = ([\d.]+) ms", out).group(1))  # type: ignore[union-attr]
    return {"tps": tps, "connect_ms": conn}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--out", default="")
    ap.add_argument("--many", action="store_true", help="no -C: many open connections")
    a = ap.parse_args()
    churn = not a.many
    srv = servers.start_postgres({"max_connections": str(a.clients + 50)}, instrument=False)
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
            f.write(SCRIPT)
        ours(srv, 1, 0.5)  # loads the table and warms the cache
        rounds = []
        for i in range(a.rounds):
            pair = {}
            for side in (("ours", "pgbench") if i % 2 == 0 else ("pgbench", "ours")):
                pair[side] = (ours(srv, a.clients, a.duration, churn) if side == "ours"
                              else pgbench(srv, f.name, a.clients, a.duration, churn))
            pair["ratio"] = round(pair["ours"]["tps"] / pair["pgbench"]["tps"], 3)
            rounds.append(pair)
            print(json.dumps(pair), flush=True)
        med = statistics.median(r["ratio"] for r in rounds)
        summary = {"clients": a.clients, "duration_s": a.duration, "churn": churn, "rounds": rounds,
                   "median_ratio": med}
        if churn:
            summary["ours_connect_ms_median"] = statistics.median(r["ours"]["connect_ms"] for r in rounds)
            summary["pgbench_connect_ms_median"] = statistics.median(r["pgbench"]["connect_ms"] for r in rounds)
        print(json.dumps({k: v for k, v in summary.items() if k != "rounds"}))
        if a.out:
            Path(a.out).write_text(json.dumps(summary, indent=1))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
