"""Where a PostgreSQL read-only transaction's cost goes, ours against sysbench oltp_read_only, one client at
a time on one throwaway server (issue 15: read-only cost more client and server CPU per transaction).

    python3 -m bench.readonly_probe [--txns 5000] [--rounds 3] [--out FILE]

Three sides, each running the same 16-statement transaction (BEGIN, 10 point selects, 4 ranges of 100,
COMMIT) for --txns transactions on one connection, sides alternating in order round by round:
``sysbench`` (oltp_read_only on its own public.sbtest1), ``ours`` (dbdiag read-only on dbdiag.sbtest1)
and ``ours-sb-table`` (the same transaction as a custom script on sysbench's table).

Per side and round: client CPU per transaction (sysbench: getrusage of the child, its start-up
included; ours: this process over the C batch) and server CPU per transaction (the server and its reaped
backends, bench.compare.server_cpu); and, from pg_stat_statements reset before each side, the
statements the server executed per transaction, their execution time, how many of them it planned
(a prepared statement on a custom plan is planned at every execution) and the planning time, and the
shared blocks they hit.
Then the system calls of one transaction of each client (strace -c over --txns transactions of ours and
of sysbench). Single-client figures on this VM are dominated by wake-ups: compare sides, not machines.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import server_cpu  # noqa: E402
from bench.pairs import read_only_script  # noqa: E402
from diag.core import servers  # noqa: E402
from diag.core.db import Session  # noqa: E402
from workloads import load as wload  # noqa: E402
from workloads.base import ClientCtx  # noqa: E402
from workloads.clients.client import fastest_driver  # noqa: E402
from workloads.custom import Custom  # noqa: E402
from workloads.native.native import open_native  # noqa: E402
from workloads.native.program import Program  # noqa: E402
from workloads.sysbench import ReadOnly, sbtest_dataset  # noqa: E402

# plans and total_plan_time need pg_stat_statements.track_planning (set at the throwaway's start): execution
# time alone missed the 4 plannings per transaction of the range statements (custom plans on an analyzed table)
PSS = ("SELECT COALESCE(SUM(calls), 0) AS calls, COALESCE(SUM(total_exec_time), 0) AS ms, "
       "COALESCE(SUM(plans), 0) AS plans, COALESCE(SUM(total_plan_time), 0) AS plan_ms, "
       "COALESCE(SUM(shared_blks_hit), 0) AS hit FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'")


def _ours(t: Any, prog: Program, n: int) -> float:
    """n transactions of ``prog`` in one C batch; this process's CPU seconds over it."""
    nc = open_native(t, "", fastest_driver(t.dbms), "read-committed", prog, 7)
    assert nc is not None, "the native executor is not built"
    try:
        buf = array("q", bytes(8 * n))
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter_ns()
        done, _, err = nc.batch(t0, t0 + 10**13, buf)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        assert err is None and done == n, err
        return r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    finally:
        nc.close()


def _sysbench(cmd: list[str]) -> float:
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=600)
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime


def _strace_counts(path: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in Path(path).read_text().splitlines():
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            out[f[-1]] = int(f[3])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--txns", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="bench/results/last-readonly-probe.json")
    a = ap.parse_args()
    n = a.txns
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "txns": n, "rounds": []}
    srv = servers.start_postgres({"pg_stat_statements.track_planning": "on"})
    try:
        t = srv.target()
        conn = ["--db-driver=pgsql", "--pgsql-host=127.0.0.1", f"--pgsql-port={srv.port}", "--pgsql-user=postgres",
                "--pgsql-db=postgres"]
        sb = [shutil.which("sysbench") or "sysbench", "oltp_read_only", *conn, "--tables=1", "--table-size=100000"]
        run_sb = [*sb, "--threads=1", f"--events={n}", "--time=0", "--rand-type=uniform", "run"]
        subprocess.run([*sb, "prepare"], check=True, capture_output=True, timeout=600)
        with Session(t, statement_timeout_ms=0) as s:
            wload.ensure_schema(s)
            if not wload.is_loaded(s, sbtest_dataset(1)):
                wload.load(s, sbtest_dataset(1), None)
            s.execute("VACUUM ANALYZE dbdiag.sbtest1, public.sbtest1")
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
            f.write(read_only_script("public.sbtest1"))
        progs = {"ours": ReadOnly().program(ClientCtx(0, 1, 1.0, seed=1)),
                 "ours-sb-table": Custom(f.name).program(ClientCtx(0, 1, 1.0, seed=1))}
        for name in ("ours", "ours-sb-table"):  # warm both tables and plans, unmeasured
            _ours(t, progs[name], 200)
        subprocess.run([*sb, "--threads=1", "--events=200", "--time=0", "run"], capture_output=True, check=True)
        sides = ["sysbench", "ours", "ours-sb-table"]
        for r in range(a.rounds):
            row: dict[str, Any] = {"round": r + 1, "load": [round(x, 2) for x in os.getloadavg()]}
            for name in (sides if r % 2 == 0 else sides[::-1]):
                with Session(t, statement_timeout_ms=0) as s:
                    s.query("SELECT pg_stat_statements_reset()")
                s0 = server_cpu(srv)
                cpu = _sysbench(run_sb) if name == "sysbench" else _ours(t, progs[name], n)
                s1 = server_cpu(srv)
                with Session(t, statement_timeout_ms=0) as s:
                    p = s.query(PSS)[0]
                row[name] = {"client_us_per_txn": round(cpu / n * 1e6, 1), "server_us_per_txn": round((s1 - s0) / n * 1e6, 1),
                             "statements_per_txn": round(float(p["calls"]) / n, 2),
                             "exec_us_per_txn": round(float(p["ms"]) * 1000 / n, 1),
                             "plans_per_txn": round(float(p["plans"]) / n, 2),
                             "plan_us_per_txn": round(float(p["plan_ms"]) * 1000 / n, 1),
                             "blocks_hit_per_txn": round(float(p["hit"]) / n, 1)}
            report["rounds"].append(row)
            print(json.dumps(row), flush=True)
        # system calls per transaction of each client (strace -c; the C batch is traced by attaching)
        trace = tempfile.mkdtemp(prefix="dbdiag-strace-")
        st = subprocess.Popen(["strace", "-c", "-p", str(os.getpid()), "-o", f"{trace}/ours.txt"])
        time.sleep(1.0)
        _ours(t, progs["ours"], n)
        st.terminate()
        st.wait(timeout=30)
        subprocess.run(["strace", "-c", "-f", "-o", f"{trace}/sysbench.txt", *run_sb], capture_output=True, timeout=600)
        report["syscalls_per_txn"] = {side: {k: round(v / n, 2) for k, v in _strace_counts(f"{trace}/{side}.txt").items()
                                             if v >= n} for side in ("ours", "sysbench")}
        print(json.dumps(report["syscalls_per_txn"]), flush=True)
    finally:
        srv.stop()
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
