"""At 200 clients on PostgreSQL: the server's CPU per committed transaction under dbdiag's point-select and
under pgbench (issue 26's gap), in alternating rounds; medians.

    python3 bench/pg_many_server_cost.py [--rounds 5] [--duration 6] [--clients 200] [--tree DIR ...] [--out F]

The server's CPU is the postmaster's own and its reaped children's (/proc/PID/stat utime stime cutime cstime:
the step's backends, their connects and exits included). The transactions are the server's own count
(pg_stat_database.xact_commit summed, over the same span), not the client's tps times the duration: pgbench's
-T includes its connection phase while its tps leaves it out, so tps x T overstated its transactions (by 34%
on a loaded machine, bench/pg_many_events.py), which made the server look cheaper under pgbench.

``--tree DIR`` (repeatable): run "ours" from another checkout too (its own built native module), e.g. the
branch point, for a before/after in the same alternating rounds; the default is this checkout only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))
from bench import many_clients as mc  # noqa: E402
from bench.pg_many_events import OURS, commits  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")


def pm_cpu(pid: int) -> float:
    """CPU seconds of the postmaster and its reaped children."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in f[11:15]) / HZ  # utime stime cutime cstime


def one(srv: Any, side: str, clients: int, duration: float, script: Path) -> dict[str, Any]:
    if side == "pgbench":
        cmd = mc.tool_cmd("pg", srv, str(script), clients, duration)
        cwd = str(HERE)
    else:
        cmd, cwd = [sys.executable, "-c", OURS, str(srv.port), str(clients), str(duration)], side
    time.sleep(1.0)
    n0, c0, t0 = commits(srv), pm_cpu(srv.pid), time.time()
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=duration + 600)
    wall = time.time() - t0
    time.sleep(1.5)  # backends exit and are reaped
    c1, n1 = pm_cpu(srv.pid), commits(srv)
    if run.returncode:
        raise RuntimeError(run.stderr[-800:])
    n = n1 - n0 - 1  # our own first look
    res: dict[str, Any] = {"side": "pgbench" if side == "pgbench" else Path(side).name, "commits": n,
                           "server_us_per_txn": round((c1 - c0) * 1e6 / n, 2), "wall_s": round(wall, 2),
                           "load_1m": round(os.getloadavg()[0], 2)}
    if side == "pgbench":
        res["tps"] = float(run.stdout.split("tps = ")[1].split()[0])
    else:
        row = json.loads(run.stdout.strip().splitlines()[-1])
        res["tps"] = row["tps"]
        res["client_us_per_txn"] = round(row["client_cpu_s"] * 1e6 / max(row["transactions"], 1), 2)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--tree", action="append", default=[], help="another checkout to run ours from")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    sides = [str(HERE), *[str(Path(t).resolve()) for t in a.tree], "pgbench"]
    srv = mc.start("pg")
    results: list[dict[str, Any]] = []
    try:
        script = Path(tempfile.mkstemp(suffix=".sql")[1])
        script.write_text(mc.SCRIPT)
        mc.ours(srv, 8, 2.0)  # loads the table, warms the cache
        for r in range(a.rounds):
            for side in (sides if r % 2 == 0 else sides[::-1]):
                mc.quiet()
                res = {"round": r, **one(srv, side, a.clients, a.duration, script)}
                results.append(res)
                print(json.dumps(res), flush=True)
                if a.out:
                    Path(a.out).write_text(json.dumps(results, indent=1))
        for name in dict.fromkeys(x["side"] for x in results):
            mine = [x for x in results if x["side"] == name]
            med = {k: statistics.median(x[k] for x in mine) for k in mine[0] if k not in ("side", "round")}
            print(name, "medians", json.dumps(med), "load", min(x["load_1m"] for x in mine), "-",
                  max(x["load_1m"] for x in mine), flush=True)
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
