"""Issue 26: where the machine's time goes per committed transaction under dbdiag's multiplexed point-select and
under pgbench at N clients on one throwaway PostgreSQL, measured in the middle of each run (not its start-up).

    python3 -m bench.pg_cpu_split [--clients 200] [--rounds 3] [--variants JSON] [--wakeups] [--out FILE]

Each side runs 10 s; from its 4th to its 8th second: /proc/stat's user / system / softirq / idle split, the
machine's context switches, rescheduling and other interrupts (/proc/interrupts), TCP segments (/proc/net/snmp),
and every task's CPU by command name (/proc/*/task/*/stat: "pg" the backends, "python3" our clients and the
orchestrator), all over the server's own commit count in the same span (pg_stat_database.xact_commit).
``--variants '{"b0": {"DBDIAG_MUX_EAGER": "0"}}'``: ours again with these environment variables (e.g. the early
look off, DBDIAG_MUX_PROCS=8). ``--wakeups``: ``perf record -a -e sched:sched_wakeup`` for 1 s of that span and
the share of the backends' wake-ups that landed on another CPU than their waker's.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import many_clients as mc
from bench.pg_many_events import OURS, commits
from diag.core import servers

HZ = os.sysconf("SC_CLK_TCK")
STAT = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
RUN_S, FROM_S, SPAN_S = 10, 4.0, 4.0


def _stat() -> dict[str, int]:
    """/proc/stat's CPU line (ticks) and context switches."""
    lines = Path("/proc/stat").read_text().splitlines()
    out = dict(zip(STAT, (int(x) for x in lines[0].split()[1:9])))
    out.update({"ctxt": int(ln.split()[1]) for ln in lines if ln.startswith("ctxt")})
    return out


def _counters() -> dict[str, int]:
    """Interrupts by kind (both CPUs) and TCP segments."""
    out: dict[str, int] = {}
    for ln in Path("/proc/interrupts").read_text().splitlines()[1:]:
        f = ln.split()
        if len(f) > 3 and f[0].rstrip(":").isalpha() and f[1].isdigit() and f[2].isdigit():
            out["irq." + f[0].rstrip(":")] = int(f[1]) + int(f[2])
    snmp = Path("/proc/net/snmp").read_text().splitlines()
    for h, v in zip(snmp[::2], snmp[1::2]):
        if h.startswith("Tcp:"):
            for k, x in zip(h.split()[1:], v.split()[1:]):
                if k in ("InSegs", "OutSegs"):
                    out["tcp." + k] = int(x)
    return out


def _tasks() -> dict[str, tuple[str, int]]:
    """{task stat path: (command, utime + stime ticks)} of every task."""
    out = {}
    for t in Path("/proc").glob("[0-9]*/task/[0-9]*/stat"):
        try:
            raw = t.read_text()
        except OSError:
            continue
        f = raw.rsplit(")", 1)[1].split()
        out[str(t)] = (raw[raw.index("(") + 1:raw.rindex(")")], int(f[11]) + int(f[12]))
    return out


def _by_command(a: dict[str, tuple[str, int]], b: dict[str, tuple[str, int]], n: int) -> dict[str, float]:
    acc: Counter[str] = Counter()
    for k, (comm, v) in b.items():
        acc["pg" if comm.startswith("postgres") else comm[:10]] += v - a.get(k, (comm, 0))[1]
    return {f"task.{k}": round(v / HZ * 1e6 / n, 2) for k, v in acc.items() if v / HZ * 1e6 / n >= 0.2}


def _wakeups(data: str) -> dict[str, float]:
    """Share of the wake-ups of backends ("postgres") whose target CPU was not the waker's."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "cpu,trace"], capture_output=True, text=True).stdout
    same = other = 0
    for m in re.finditer(r"\[(\d+)\]\s+comm=(\S+).*?target_cpu=(\d+)", out):
        if m.group(2).startswith("postgres"):
            if m.group(1).lstrip("0") == m.group(3).lstrip("0"):
                same += 1
            else:
                other += 1
    return {"backend_wakeups_other_cpu": round(other / max(same + other, 1), 3)}


def one(srv: servers.ThrowawayServer, side: str, env: dict[str, str], clients: int, script: str,
        wakeups: bool) -> dict[str, Any]:
    if side == "pgbench":
        cmd = mc.tool_cmd("pg", srv, script, clients, RUN_S)
    else:
        cmd = [sys.executable, "-c", OURS, str(srv.port), str(clients), str(RUN_S)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **env},
                         cwd=str(Path(__file__).resolve().parent.parent))
    try:
        time.sleep(FROM_S)
        rec = None
        if wakeups:
            data = tempfile.mktemp(suffix=".perf")
            rec = subprocess.Popen(["perf", "record", "-q", "-a", "-e", "sched:sched_wakeup", "-o", data, "--",
                                    "sleep", "1"], stderr=subprocess.DEVNULL)
        ta, sa, ca, n0, t0 = _tasks(), _stat(), _counters(), commits(srv), time.time()
        time.sleep(SPAN_S)
        tb, sb, cb, n1, t1 = _tasks(), _stat(), _counters(), commits(srv), time.time()
    finally:
        p.wait()
    n = n1 - n0
    res: dict[str, Any] = {"side": side, "tps": round(n / (t1 - t0))}
    res.update({k: round((sb[k] - sa[k]) / HZ * 1e6 / n, 2) for k in STAT if sb[k] != sa[k]})
    res["ctxt"] = round((sb["ctxt"] - sa["ctxt"]) / n, 3)
    res.update({k: round((cb[k] - ca.get(k, 0)) / n, 3) for k in cb if (cb[k] - ca.get(k, 0)) / n >= 0.005})
    res.update(_by_command(ta, tb, n))
    if rec is not None:
        rec.wait()
        res.update(_wakeups(data))
        os.unlink(data)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default="{}", help="JSON {name: {ENV: value}}: ours again with these")
    ap.add_argument("--wakeups", action="store_true")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    sides: dict[str, dict[str, str]] = {"ours": {}, "pgbench": {}, **json.loads(a.variants)}
    srv = servers.start_postgres({"max_connections": str(mc.MAX_CONNECTIONS)}, instrument=False)
    runs: list[dict[str, Any]] = []
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
            f.write(mc.SCRIPT)
        mc.ours(srv, 8, 1.0)  # loads the table, warms the cache
        names = list(sides)
        for r in range(a.rounds):
            for side in (names if r % 2 == 0 else names[::-1]):
                got = {"round": r + 1, **one(srv, side, sides[side], a.clients, f.name, a.wakeups)}
                runs.append(got)
                print(json.dumps(got), flush=True)
                time.sleep(1)
    finally:
        srv.stop()
    medians = {}
    for side in sides:
        mine = [x for x in runs if x["side"] == side]
        keys = sorted({k for x in mine for k in x if k not in ("side", "round")})
        medians[side] = {k: statistics.median(x.get(k, 0) for x in mine) for k in keys}
        print("median", side, json.dumps(medians[side]), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"clients": a.clients, "runs": runs, "medians": medians}, indent=1))


if __name__ == "__main__":
    main()
