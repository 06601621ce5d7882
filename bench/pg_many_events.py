"""Issue 26's PostgreSQL gap, counted rather than timed: per committed transaction, the server's and the
clients' CPU, syscalls by kind, context switches and wake-ups, under dbdiag's multiplexed point-select and
under pgbench on the same throwaway server, in alternating rounds. Counts per transaction do not swing with
the machine's load as tps does.

    python3 bench/pg_many_events.py [--clients 200] [--rounds 3] [--duration 6] [--pgbench-mode prepared]
                                    [--system-pg] [--out FILE]

Server side: ``perf stat`` attached to the postmaster (counters inherited by each backend it forks, so
the step's backends are all counted; the collector's and checkpointer's few events too). Client side:
``perf stat`` around the client command (pgbench; for dbdiag a child Python running one step, its
start-up, imports and connects included: a few thousand syscalls against hundreds of thousands).
Transactions: pg_stat_database.xact_commit of the database over the same span (ours: its connects,
statement preparation and the driver's own queries included).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import many_clients as mc  # noqa: E402
from diag.core import servers  # noqa: E402
from diag.core.db import Session  # noqa: E402

EVENTS = ["task-clock", "context-switches", "sched:sched_wakeup", "raw_syscalls:sys_enter",
          "syscalls:sys_enter_recvfrom", "syscalls:sys_enter_sendto", "syscalls:sys_enter_read",
          "syscalls:sys_enter_write", "syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_epoll_pwait",
          "syscalls:sys_enter_poll", "syscalls:sys_enter_ppoll", "syscalls:sys_enter_select",
          "syscalls:sys_enter_pselect6", "syscalls:sys_enter_epoll_ctl", "syscalls:sys_enter_kill",
          "syscalls:sys_enter_setitimer", "syscalls:sys_enter_rt_sigprocmask"]
OURS = """
import json, os, sys, tempfile
from pathlib import Path
from diag.core.bundle import BundleWriter
from diag.core.targets import Target
from workloads.driver import DriverOptions, run_sweep
from diag.core.engines import POSTGRES
t = Target(label="", engine=POSTGRES.name, embedded=True).with_endpoint("127.0.0.1", int(sys.argv[1]), None,
                                                                       "postgres", "postgres")
opts = DriverOptions(clients=(int(sys.argv[2]),), duration_s=float(sys.argv[3]), warmup_s=0.0)
with tempfile.TemporaryDirectory(prefix="dbdiag-bench-") as d:
    row = run_sweep(t, ["point-select"], opts, BundleWriter(Path(d)), progress=None)[0]
print(json.dumps({"tps": row.tps, "transactions": row.transactions, "client_cpu_s": row.client_cpu_s,
                  "driver": row.driver}))
"""


def commits(srv: servers.ThrowawayServer) -> int:
    with Session(srv.target(), statement_timeout_ms=0) as s:
        rows = s.query("SELECT sum(xact_commit)::bigint AS n FROM pg_stat_database")
    return int(rows[0]["n"])


def parse(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in path.read_text().splitlines():
        f = line.split(",")
        if len(f) > 3 and f[2] and not line.startswith("#"):
            try:
                out[f[2]] = float(f[0])
            except ValueError:
                out[f[2]] = 0.0
    return out


def perf_cmd(out: Path) -> list[str]:
    return ["perf", "stat", "-x,", "-o", str(out), "-e", ",".join(EVENTS)]


def side(srv: servers.ThrowawayServer, name: str, clients: int, duration: float, script: str,
         mode: str, record: str = "") -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        sf, cf = Path(d) / "server", Path(d) / "client"
        if name == "ours":
            cmd = [sys.executable, "-c", OURS, str(srv.port), str(clients), str(duration)]
        else:
            cmd = ["pgbench", "-h", "127.0.0.1", "-p", str(srv.port), "-U", "postgres", "-n", "-M", mode,
                   "-f", script, "-c", str(clients), "-j", "2", "-T", f"{duration:g}", "postgres"]
        time.sleep(1.0)
        c0 = commits(srv)
        pcmd = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "2000", "-o", record] if record else perf_cmd(sf)
        perf = subprocess.Popen([*pcmd, "-p", str(srv.pid)], stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        t0 = time.time()
        run = subprocess.run([*perf_cmd(cf), "--", *cmd], capture_output=True, text=True,
                             cwd=str(Path(__file__).resolve().parent.parent), timeout=duration + 600)
        wall = time.time() - t0
        time.sleep(1.0)  # backends exit
        perf.send_signal(signal.SIGINT)
        perf.wait(30)
        c1 = commits(srv)
        if run.returncode:
            raise RuntimeError(run.stderr[-800:])
        n = c1 - c0 - 1  # our own look before
        s, c = ({} if record else parse(sf)), parse(cf)
        res: dict[str, Any] = {"side": name, "commits": n, "wall_s": round(wall, 2), "load_1m": os.getloadavg()[0]}
        if name == "ours":
            res["tps"] = json.loads(run.stdout.strip().splitlines()[-1])["tps"]
        else:
            res["tps"] = float(run.stdout.split("tps = ")[1].split()[0])
        res["server"] = {k.split(":")[-1]: round(v / n, 3) for k, v in s.items() if v}
        res["client"] = {k.split(":")[-1]: round(v / n, 3) for k, v in c.items() if v}
        res["server"]["task-clock"] = round(s.get("task-clock", 0) * 1e3 / n, 2) if s else 0  # ms -> µs per txn
        res["client"]["task-clock"] = round(c.get("task-clock", 0) * 1e3 / n, 2)
        return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--pgbench-mode", default="prepared")
    ap.add_argument("--system-pg", action="store_true", help="the system PostgreSQL, not the embedded one")
    ap.add_argument("--sides", default="ours,pgbench")
    ap.add_argument("--out", default="")
    ap.add_argument("--record", default="", help="perf record the server into DIR/SIDE-ROUND.data instead")
    a = ap.parse_args()
    srv = servers.start_postgres({"max_connections": str(mc.MAX_CONNECTIONS)}, instrument=False,
                                 prefer_embedded=not a.system_pg)
    results: list[dict[str, Any]] = []
    try:
        script = Path(tempfile.mkstemp(suffix=".sql")[1])
        script.write_text(mc.SCRIPT)
        mc.ours(srv, 8, 1.0)  # loads the table, warms the cache
        sides = a.sides.split(",")
        for r in range(a.rounds):
            for name in (sides if r % 2 == 0 else sides[::-1]):
                mc.quiet()
                rec = f"{a.record}/{name}-{r}.data" if a.record else ""
                res = side(srv, name, a.clients, a.duration, str(script), a.pgbench_mode, rec)
                res["round"] = r
                results.append(res)
                print(json.dumps(res), flush=True)
        for name in sides:
            mine = [x for x in results if x["side"] == name]
            for part in ("server", "client"):
                keys = sorted({k for x in mine for k in x[part]})
                print(name, part, {k: statistics.median(x[part].get(k, 0) for x in mine) for k in keys}, flush=True)
        if a.out:
            Path(a.out).write_text(json.dumps(results, indent=1))
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
