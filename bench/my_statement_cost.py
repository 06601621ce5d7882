"""What each statement a MariaDB watch sends costs the server: CPU per call, and the counters it moves.

    python3 -m bench.my_statement_cost [--calls 300] [--rounds 5] [--load] [--out bench/results/NAME.json]

One throwaway MariaDB (diag.servers.start_mysql: performance_schema ON with digests, as bench.watch_cost runs it),
sysbench's table (1 table of 10,000 rows) and 4 idle sysbench-like sessions (so processlist / thread reads have
rows to return). Per statement of the watch's sources (:data:`STATEMENTS`, with the rate a watch sends it at), per
round: ``--calls`` calls in a row on one of dbdiag's own sessions (PyMySQL, program_name ``dbdiag:cost``), timed
by the server thread's own CPU (``/proc/PID/task/TID/schedstat``, ns on CPU: the thread found by
performance_schema.threads THREAD_OS_ID) and by the client's (time.process_time). The statements are run in
turn, each round in another order; medians over the rounds. ``--load``: the same while sysbench
oltp_point_select runs with 4 threads (the contended case).

Counters: a second session reads SHOW GLOBAL STATUS before and after each statement's calls; the increase of
Handler_read_rnd_next, Select_scan, Created_tmp_tables and Created_tmp_disk_tables less the same for a loop of
``SELECT 1`` of the same length (the reading session's own part), per call. These are the server-wide counters
the scans and spills rules read.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collectors.mysql.status import SECOND_STATUS_SQL  # noqa: E402
from collectors.sql import pick_sql  # noqa: E402
from diag.core import servers  # noqa: E402
from diag.core.db import OWN_PREFIX, Session  # noqa: E402
from diag.core.engines import MYSQL  # noqa: E402
from workloads.watch.watch_counters import SQL_DIRS  # noqa: E402

COUNTERS = ("Handler_read_rnd_next", "Select_scan", "Created_tmp_tables", "Created_tmp_disk_tables")
VERSION = 101100
# The watch's session count before this branch (workloads/watch_sql/mysql/sessions.0.sql at main 34926bb).
OLD_WATCH_SESSIONS = ("SELECT /* dbdiag */ count(*) AS sessions, coalesce(sum(COMMAND <> 'Sleep' AND "
                      "LOCATE('/* dbdiag */', coalesce(INFO, '')) = 0), 0) AS busy FROM information_schema.PROCESSLIST "
                      "WHERE ID <> CONNECTION_ID() AND USER NOT IN ('system user', 'event_scheduler') "
                      "AND COMMAND <> 'Daemon'")


def _sql(name: str, folder: Path | None = None) -> str:
    return pick_sql(name, MYSQL, VERSION, "mariadb", folder)


def statements() -> list[tuple[str, str, float]]:
    """(name, statement, calls a second in a watch at the default rates) of the watch's reads on MariaDB with
    performance_schema ON and its events_waits_current consumer OFF (as a throwaway and Debian start it)."""
    own = _sql("own_threads").replace("%(prefix)s", f"'{OWN_PREFIX}'")
    watch = SQL_DIRS[MYSQL.name]
    return [
        ("SELECT 1 (control)", "/* dbdiag */ SELECT 1", 0.0),
        ("my_waits: SHOW PROCESSLIST", _sql("processlist"), 10.0),
        ("my_waits: INNODB_TRX", _sql("innodb_trx"), 10 / 3),
        ("my_waits: own_threads (session_connect_attrs)", own, 10 / 3),
        ("my_waits: waits_summary (events_waits_summary_global_by_event_name)", _sql("waits_summary"), 1.0),
        ("my_status: SHOW GLOBAL STATUS", _sql("global_status"), 1.0),
        ("my_status, new: SHOW GLOBAL STATUS WHERE (SECOND_STATUS)", SECOND_STATUS_SQL, 0.9),
        ("my_status: SHOW ENGINE INNODB STATUS", _sql("innodb_status"), 1.0),
        ("my_status: INNODB_METRICS", _sql("innodb_metrics"), 1.0),
        ("my_blocking: blocking_threads (gate closed: 1 in QUIET_TICKS)", _sql("blocking_threads"), 0.0),
        ("watch: counters (SHOW GLOBAL STATUS WHERE)", _sql("counters", watch), 2.0),
        ("watch: sessions (SHOW PROCESSLIST, new)", _sql("sessions", watch), 2.0),
        ("watch, old: sessions (information_schema.PROCESSLIST)", OLD_WATCH_SESSIONS, 0.0),
        ("statements: step_digests", _sql("step_digests"), 0.0),
        ("statements: prepared_statements", _sql("prepared_statements"), 0.0),
    ]


def _ns_on_cpu(pid: int, tid: int) -> int:
    """ns the server thread ``tid`` has run (schedstat's first field)."""
    return int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])


def _status(s: Session) -> dict[str, float]:
    rows = s.text_rows("SHOW GLOBAL STATUS WHERE Variable_name IN (%s)" % ",".join(f"'{c}'" for c in COUNTERS))
    return {str(r[0]): float(r[1] or 0) for r in rows}


def measure(srv: Any, sql: str, calls: int) -> dict[str, float]:
    """Server and client CPU per call (us) and counter increases per call (including the reader's own)."""
    with Session(srv.target(), application_name=OWN_PREFIX + "cost") as s, \
            Session(srv.target(), application_name=OWN_PREFIX + "cost-reader") as r:
        tid = int(s.query("SELECT THREAD_OS_ID AS t FROM performance_schema.threads "
                          "WHERE PROCESSLIST_ID = CONNECTION_ID()")[0]["t"])
        s.text_rows(sql)  # warm: the statement's tables opened once
        c0, ns0, p0 = _status(r), _ns_on_cpu(srv.pid, tid), time.process_time()
        t0 = time.perf_counter()
        for _ in range(calls):
            s.text_rows(sql)
        wall = time.perf_counter() - t0
        ns1, p1, c1 = _ns_on_cpu(srv.pid, tid), time.process_time(), _status(r)
    out = {"server_us": (ns1 - ns0) / 1e3 / calls, "client_us": (p1 - p0) * 1e6 / calls, "wall_us": wall * 1e6 / calls}
    out.update({c: (c1.get(c, 0) - c0.get(c, 0)) / calls for c in COUNTERS})
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--load", action="store_true", help="measure while sysbench point-select runs (4 threads)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    srv = servers.start_mysql()
    load = None
    idle: list[Any] = []
    try:
        with Session(srv.target()) as s:
            s.execute("CREATE DATABASE IF NOT EXISTS sbtest")
        sb = ["sysbench", "oltp_point_select", "--db-driver=mysql", "--mysql-host=127.0.0.1",
              f"--mysql-port={srv.port}", "--mysql-user=root", "--mysql-db=sbtest", "--tables=1",
              "--table-size=10000"]
        subprocess.run([*sb, "prepare"], check=True, capture_output=True, timeout=300)
        idle = [Session(srv.target(), application_name="idle-client") for _ in range(4)]
        if a.load:
            load = subprocess.Popen([*sb, "--threads=4", "--time=100000", "run"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            time.sleep(2)
        stmts = statements()
        per: dict[str, list[dict[str, float]]] = {n: [] for n, _s, _r in stmts}
        for i in range(a.rounds):
            order = list(stmts)
            random.Random(i).shuffle(order)
            for name, sql, _rate in order:
                per[name].append(measure(srv, sql, a.calls))
            print(f"round {i + 1} done, load {os.getloadavg()[0]:.1f}", flush=True)
        ctl = {k: statistics.median(m[k] for m in per["SELECT 1 (control)"]) for k in COUNTERS}
        table = []
        for name, _sql_text, rate in stmts:
            med = {k: statistics.median(m[k] for m in per[name]) for k in per[name][0]}
            row = {"statement": name, "rate_per_s": rate, **{k: round(v, 2) for k, v in med.items()},
                   **{f"{k}_less_control": round(med[k] - ctl[k], 2) for k in COUNTERS},
                   "server_core_pct_at_rate": round(med["server_us"] * rate / 1e4, 3)}
            table.append(row)
            print(f"{name:70s} server {med['server_us']:8.1f} us/call, client {med['client_us']:7.1f} us, "
                  f"x{rate:5.2f}/s = {row['server_core_pct_at_rate']:.3f}% core; " +
                  ", ".join(f"{c} {med[c] - ctl[c]:+.2f}" for c in COUNTERS), flush=True)
        summary = {"calls": a.calls, "rounds": a.rounds, "load": a.load, "load1": os.getloadavg()[0],
                   "server": "MariaDB throwaway (performance_schema ON, digests)", "statements": table,
                   "raw": per}
        if a.out:
            a.out.write_text(json.dumps(summary, indent=1))
    finally:
        if load is not None:
            load.terminate()
            load.wait(30)
        for s in idle:
            s.close()
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
