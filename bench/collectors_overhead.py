"""Cost of the collectors: point-select at saturation with all collectors OFF vs ON, same servers, same run.

    python3 -m bench.collectors_overhead [--rounds 5] [--duration 8] [--warmup 1] [--only pg|mariadb]
                                         [--workload point-select|insert|...] [--exclude NAME[,NAME]]
                                         [--out bench/results/NAME.json]

One throwaway PostgreSQL (diag.core.servers.start_postgres) and one throwaway MariaDB (start_mysql), default
settings. On each, point-select (scale 1) with N = 2 x cores clients is run through the real orchestrator,
``diag.run.Run(RunOptions(targets=[DSN], collect=..., profile=False, render=False))``, alternating
OFF and ON round by round (the order flips every round so drift hits both alike). ON = every collector the
run would start: host, pg_stats/pg_waits/pg_settings or my_status/my_waits/my_settings, and flush.
Perf profiles are off in both (a separate, documented cost).

``--exclude NAME`` drops collectors by name (host, pg_waits, my_status, flush, ...) from the ON runs, to
find which one costs: implemented here by filtering what ``diag.run`` hands to ``CollectorRunner``.

Reported per engine: median of per-round TPS ratios ON/OFF with the range, plus the CPU per transaction of
the clients, the server and the collector processes (children of this process: getrusage minus the
clients' own CPU).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import diag.run as drun  # noqa: E402
from bench.tools import server_cpu  # noqa: E402
from collectors.runner import CollectorRunner  # noqa: E402
from diag.core import servers  # noqa: E402
from diag.core.db import Session  # noqa: E402
from workloads import load as wload  # noqa: E402
from workloads.driver import DriverOptions  # noqa: E402
from workloads.sysbench import sbtest_dataset  # noqa: E402

EXCLUDE: set[str] = set()


class FilteringRunner(CollectorRunner):
    """CollectorRunner without the collectors named in EXCLUDE (by collector name, label-free)."""

    def __init__(self, bundle: Any, collectors: list[Any]) -> None:
        super().__init__(bundle, [c for c in collectors if c.name not in EXCLUDE])

    def stop(self) -> None:
        # CPU each collector process (and its live children, e.g. flush's perf) used so far, read just
        # before the stop; the kernel-side cost perf's counting adds to the server is not in here.
        for r in self.running:
            if r.process.pid:
                COLLECTOR_CPU[r.key.split("--")[0]] = round(COLLECTOR_CPU.get(r.key.split("--")[0], 0.0)
                                                            + _tree_cpu(r.process.pid), 3)
        super().stop()


COLLECTOR_CPU: dict[str, float] = {}


def _tree_cpu(pid: int) -> float:
    """utime+stime+cutime+cstime of pid plus utime+stime of its live children, in seconds."""
    ticks = 0
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            st = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(proc.name) == pid:
            ticks += sum(int(x) for x in st[11:15])
        elif int(st[1]) == pid:
            ticks += int(st[11]) + int(st[12])
    return ticks / os.sysconf("SC_CLK_TCK")


drun.CollectorRunner = FilteringRunner  # type: ignore[misc]  # only inside this script's process


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one_run(srv: servers.ThrowawayServer, collect: bool, clients: int, args: argparse.Namespace) -> dict:
    drv = DriverOptions(clients=(clients,), duration_s=args.duration, warmup_s=args.warmup, scale=1)
    with tempfile.TemporaryDirectory(prefix="dbdiag-colbench-") as d:
        opts = drun.RunOptions(targets=[srv.dsn()], workloads=[args.workload], driver=drv, out=Path(d) / "b",
                               name="collectors-overhead", collect=collect, profile=False, render=False)
        log = io.StringIO()
        COLLECTOR_CPU.clear()
        s0, c0 = server_cpu(srv), _children_cpu()
        run = drun.Run(opts, out=log)
        run.execute()
        c1, s1 = _children_cpu(), server_cpu(srv)
        res = run.results[0]
        probes = run.run_json.get("collectors", {})
        events = []
        ev = Path(d) / "b" / "events.jsonl"
        if ev.exists():
            events = [json.loads(x) for x in ev.read_text().splitlines() if '"collector_off"' in x]
    txns = max(res["transactions"], 1)
    # Children CPU covers the clients (warmup and connection included) and, when ON, the collector
    # processes and their perf; client_cpu_s of the result row is the measured part only. So "other
    # children" is the clients' warmup/start-up in both sides plus the collectors in ON.
    other = max(0.0, (c1 - c0) - res["client_cpu_s"])
    return {"collect": collect, "tps": res["tps"], "duration_s": args.duration, "warmup_s": args.warmup, "transactions": res["transactions"],
            "client_us_per_txn": round(res["client_cpu_s"] / txns * 1e6, 2),
            "server_cpu_s_whole_run": round(s1 - s0, 2),
            "other_children_cpu_s_whole_run": round(other, 2),
            "cpu_s_by_collector": dict(COLLECTOR_CPU),
            "collectors_started": sorted(k for k, p in probes.items() if p.get("ok")
                                         and k.split("--")[0] not in EXCLUDE) if collect else [],
            "collectors_unavailable": {k: p.get("reason") for k, p in probes.items() if not p.get("ok")},
            "collector_off_events": [e.get("message", e) for e in events],
            "driver": res.get("driver")}


def _per_txn(row: dict, what: str) -> float:
    """µs per transaction; whole-run CPU (server, collectors) over the transactions scaled to the whole
    warmup + measured time, since only the measured part's transactions are counted."""
    if what == "client":
        return row["client_us_per_txn"]
    n = row["transactions"] * (row["duration_s"] + row["warmup_s"]) / row["duration_s"]
    key = "server_cpu_s_whole_run" if what == "server" else "other_children_cpu_s_whole_run"
    return round(row[key] / max(n, 1) * 1e6, 2)


def engine_section(engine: str, args: argparse.Namespace, report: dict) -> None:
    srv = servers.start_postgres() if engine == "postgres" else servers.start_mysql()
    try:
        t = srv.target()
        with Session(t, statement_timeout_ms=0) as s:
            wload.ensure_schema(s)
            if not wload.is_loaded(s, sbtest_dataset(1)):
                wload.load(s, sbtest_dataset(1), None)
            product = f"{s.product} {s.version_text.split(' on ')[0]}"
        n = 2 * (os.cpu_count() or 1)
        one_run(srv, False, n, argparse.Namespace(duration=3, warmup=0, workload=args.workload))  # warm caches
        rounds = []
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            got = {c: one_run(srv, c, n, args) for c in order}
            row = {"round": r + 1, "order": ["on" if c else "off" for c in order],
                   "off": got[False], "on": got[True],
                   "ratio_on_off": round(got[True]["tps"] / got[False]["tps"], 4)}
            rounds.append(row)
            print(engine, r + 1, "off", got[False]["tps"], "on", got[True]["tps"], "ratio", row["ratio_on_off"],
                  "other children cpu s", got[True]["other_children_cpu_s_whole_run"], got[True]["cpu_s_by_collector"],
                  flush=True)
        ratios = [x["ratio_on_off"] for x in rounds]
        report[engine] = {"server": f"throwaway {product}, default settings", "clients": n,
                          "exclude": sorted(EXCLUDE), "rounds": rounds,
                          "tps_off_median": statistics.median(x["off"]["tps"] for x in rounds),
                          "tps_on_median": statistics.median(x["on"]["tps"] for x in rounds),
                          "ratio_median": statistics.median(ratios), "ratio_min": min(ratios),
                          "ratio_max": max(ratios),
                          "other_children_cpu_s_median": statistics.median(
                              x["on"]["other_children_cpu_s_whole_run"] for x in rounds),
                          "collectors_started": rounds[0]["on"]["collectors_started"],
                          "cpu_s_by_collector_median": {
                              k: statistics.median(x["on"]["cpu_s_by_collector"].get(k, 0.0) for x in rounds)
                              for k in rounds[0]["on"]["cpu_s_by_collector"]},
                          "us_per_txn_median": {
                              side: {what: statistics.median(_per_txn(x[side], what) for x in rounds)
                                     for what in ("client", "server", "other_children")}
                              for side in ("off", "on")}}
    finally:
        srv.stop()


def summarize(report: dict) -> str:
    lines = []
    for eng in ("postgres", "mysql"):
        s = report.get(eng)
        if not isinstance(s, dict):
            continue
        lines.append(f"{eng} ({s['server']}), {s['clients']} clients: OFF {s['tps_off_median']:,.0f} TPS, "
                     f"ON {s['tps_on_median']:,.0f} TPS, ratio ON/OFF median {s['ratio_median']:.3f} "
                     f"(range {s['ratio_min']:.3f}-{s['ratio_max']:.3f}); collectors "
                     f"{', '.join(s['collectors_started'])}; excluded {s['exclude'] or 'none'}; "
                     f"CPU s by collector {s['cpu_s_by_collector_median']}; µs/txn {s['us_per_txn_median']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each measured run")
    ap.add_argument("--only", choices=("pg", "mariadb"), default=None)
    ap.add_argument("--workload", default="point-select",
                    help="the workload both sides run (insert: the flush collector's cost on commits)")
    ap.add_argument("--exclude", default="", help="collector names left out of the ON runs, comma-separated")
    ap.add_argument("--out", default="bench/results/collectors-last-run.json")
    args = ap.parse_args()
    EXCLUDE.update(x.strip() for x in args.exclude.split(",") if x.strip())
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "cpus": os.cpu_count(),
                              "duration_s": args.duration, "warmup_s": args.warmup, "rounds": args.rounds,
                              "command": "python3 -m bench.collectors_overhead " + " ".join(sys.argv[1:])}
    try:
        if args.only in (None, "pg"):
            engine_section("postgres", args, report)
        if args.only in (None, "mariadb"):
            engine_section("mysql", args, report)
    finally:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=1))
    print(summarize(report))


if __name__ == "__main__":
    main()
