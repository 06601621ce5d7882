"""The cost of looking (issue 25): the throughput a default run reports against the same run with every source off.

    python3 -m bench.observer_cost [--rounds 5] [--duration 8] [--warmup 1] [--clients 4]
                                   [--only pg|mariadb] [--workloads point-select,read-write]
                                   [--instrument on,off] [--out bench/results/NAME.json]

For each engine (a throwaway PostgreSQL, diag.core.servers.start_postgres, and a throwaway MariaDB, start_mysql) and
each instrumentation (``on``: the throwaway servers' default, PostgreSQL with pg_stat_statements loaded and
MariaDB with performance_schema ON; ``off``: ``instrument=False``, neither), one server is started and, per
workload, ``diag.run.Run`` runs the step with ``--clients`` clients (saturation on 2 vCPUs: 4) in two ways,
alternating round by round (the order flips every round, so drift hits both alike):

* ``default``: what ``dbdiag run`` does by default: every collector and the profiles (``collect=True,
  profile=True``);
* ``off``: ``--no-collect --no-profile`` (``collect=False, profile=False``).

Reported per (engine, instrumentation, workload): the median of the per-round ratios of the tps each run
reports (default / off) with its range; the default run's own statement of the profiles' cost (its row's
``profile_tail``: the tail's tps over the measured part's, see workloads.steps.steptail); the collectors' CPU over
the measured part as the run's report states it (reports.model.observer, from the host series), and each collector
process's own CPU over its lifetime (/proc, read just before it is stopped; % of one core). Aims: ratio
>= 0.97, collectors <= 1% of one core. A first run per server (3 s, not counted) loads the data and warms
the caches.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import diag.run as drun  # noqa: E402
from collectors.runner import CollectorRunner  # noqa: E402
from diag.core import servers  # noqa: E402
from diag.core.bundle import load_bundle  # noqa: E402
from reports.model.observer import observer_rows  # noqa: E402
from workloads.driver import DriverOptions  # noqa: E402

AIM_RATIO = 0.97
AIM_COLLECTORS_PCT = 1.0
CPU_S: dict[str, float] = {}   # collector name -> CPU seconds of its process tree, this run
LIFE_S: dict[str, float] = {}  # collector name -> seconds its process ran, this run


def _tree_cpu(pid: int) -> float:
    """utime+stime+cutime+cstime of ``pid`` plus utime+stime of its live children (perf), in seconds."""
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


class CostRunner(CollectorRunner):
    """The run's collector runner, reading each collector process's CPU and lifetime just before the stop."""

    def start(self) -> None:
        self._t0 = time.monotonic()
        super().start()

    def stop(self) -> None:
        life = time.monotonic() - self._t0
        for r in self.running:
            if r.process.pid:
                name = r.key.split("--")[0]
                CPU_S[name] = CPU_S.get(name, 0.0) + _tree_cpu(r.process.pid)
                LIFE_S[name] = max(LIFE_S.get(name, 0.0), life)
        super().stop()


drun.CollectorRunner = CostRunner  # type: ignore[misc]  # only inside this script's process


def one_run(srv: servers.ThrowawayServer, workload: str, default: bool, a: argparse.Namespace,
            duration: float | None = None) -> dict[str, Any]:
    """One ``dbdiag run`` of ``workload``: default sources (``default``) or none; what it reported."""
    drv = DriverOptions(clients=(a.clients,), duration_s=duration or a.duration, warmup_s=a.warmup, scale=1)
    CPU_S.clear()
    LIFE_S.clear()
    with tempfile.TemporaryDirectory(prefix="dbdiag-obscost-") as d:
        opts = drun.RunOptions(targets=[srv.dsn()], workloads=[workload], driver=drv, out=Path(d) / "b",
                               name="observer-cost", collect=default, profile=default, render=False)
        run = drun.Run(opts, out=io.StringIO())
        run.execute()
        res = run.results[0]
        obs = observer_rows(load_bundle(Path(d) / "b"))[0] if default else {}
    tail = res.get("profile_tail") or {}
    return {"tps": res["tps"], "transactions": res["transactions"], "measured_s": res.get("measured_s"),
            "p95_ms": (res.get("latency_ms") or {}).get("p95"),
            "tail_tps": tail.get("tps"), "tail_ratio": tail.get("tps_ratio"), "tail_s": tail.get("seconds"),
            "profile_samples": (res.get("profile") or {}).get("samples"),
            "collectors_pct_report": obs.get("collectors_pct"),
            "collector_pct": {k: round(100 * CPU_S[k] / LIFE_S[k], 3) for k in CPU_S if LIFE_S.get(k)},
            "collectors_pct_proc": round(sum(100 * CPU_S[k] / LIFE_S[k] for k in CPU_S if LIFE_S.get(k)), 3)}


def _median(xs: list[Any]) -> float | None:
    vals = [x for x in xs if isinstance(x, (int, float))]
    return round(statistics.median(vals), 4) if vals else None


def cell(srv: servers.ThrowawayServer, workload: str, a: argparse.Namespace) -> dict[str, Any]:
    """Alternating rounds of default and off on one server and workload, and their medians."""
    one_run(srv, workload, False, a, duration=3.0)  # loads the data, warms the caches; not counted
    rounds = []
    for r in range(a.rounds):
        order = (False, True) if r % 2 == 0 else (True, False)
        got = {side: one_run(srv, workload, side, a) for side in order}
        ratio = round(got[True]["tps"] / got[False]["tps"], 4) if got[False]["tps"] else None
        rounds.append({"round": r + 1, "order": ["default" if s else "off" for s in order],
                       "off": got[False], "default": got[True], "ratio": ratio})
        print(f"  {workload} round {r + 1}: off {got[False]['tps']:,.0f} default {got[True]['tps']:,.0f} tps "
              f"(ratio {ratio}), tail {got[True]['tail_ratio']}, collectors {got[True]['collectors_pct_report']}% "
              f"(report) {got[True]['collectors_pct_proc']}% (proc) {got[True]['collector_pct']}", flush=True)
    per_collector = sorted({k for x in rounds for k in x["default"]["collector_pct"]})
    return {"rounds": rounds,
            "off_tps_median": _median([x["off"]["tps"] for x in rounds]),
            "default_tps_median": _median([x["default"]["tps"] for x in rounds]),
            "ratio_median": _median([x["ratio"] for x in rounds]),
            "ratio_range": [min(x["ratio"] for x in rounds), max(x["ratio"] for x in rounds)],
            "tail_ratio_median": _median([x["default"]["tail_ratio"] for x in rounds]),
            "collectors_pct_report_median": _median([x["default"]["collectors_pct_report"] for x in rounds]),
            "collectors_pct_proc_median": _median([x["default"]["collectors_pct_proc"] for x in rounds]),
            "collector_pct_median": {k: _median([x["default"]["collector_pct"].get(k) for x in rounds])
                                     for k in per_collector}}


def engine_section(engine: str, instrument: bool, a: argparse.Namespace, report: dict[str, Any]) -> None:
    srv = servers.start_postgres(instrument=instrument) if engine == "postgres" else \
        servers.start_mysql(instrument=instrument)
    key = f"{engine}/{'instrumented' if instrument else 'plain'}"
    print(f"{key}: {srv.dsn()}", flush=True)
    try:
        report["cells"][key] = {wl: cell(srv, wl, a) for wl in a.workloads}
        report["cells"][key]["server"] = f"throwaway {engine}, instrument={instrument}"
    finally:
        srv.stop()


def table(report: dict[str, Any]) -> str:
    """The observer-cost table (markdown), one row per engine, instrumentation and workload."""
    lines = ["| engine | instrumentation | workload | off tps | default tps | default/off, median (range) | "
             "tail/measured | collectors % of a core (report; /proc) |", "|---|---|---|---|---|---|---|---|"]
    for key, cells in report["cells"].items():
        engine, instr = key.split("/")
        for wl, c in cells.items():
            if not isinstance(c, dict) or "rounds" not in c:
                continue
            lo, hi = c["ratio_range"]
            lines.append(f"| {engine} | {instr} | {wl} | {c['off_tps_median']:,.0f} | {c['default_tps_median']:,.0f} "
                         f"| {c['ratio_median']:.3f} ({lo:.3f}-{hi:.3f}) | {c['tail_ratio_median']} "
                         f"| {c['collectors_pct_report_median']}; {c['collectors_pct_proc_median']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--duration", type=float, default=8.0, help="measured seconds per run")
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--only", choices=("pg", "mariadb"), default=None)
    p.add_argument("--workloads", default="point-select,read-write")
    p.add_argument("--instrument", default="on,off", help="on (pg_stat_statements / performance_schema), off")
    p.add_argument("--out", type=Path, default=Path("bench/results/observer-cost-last-run.json"))
    a = p.parse_args(argv)
    a.workloads = [w.strip() for w in a.workloads.split(",") if w.strip()]
    instr = [x.strip() == "on" for x in a.instrument.split(",") if x.strip()]
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "cpus": os.cpu_count(),
                              "load_average_at_start": os.getloadavg(), "rounds": a.rounds,
                              "duration_s": a.duration, "warmup_s": a.warmup, "clients": a.clients,
                              "command": "python3 -m bench.observer_cost " + " ".join(argv or sys.argv[1:]),
                              "aims": {"ratio_min": AIM_RATIO, "collectors_pct_max": AIM_COLLECTORS_PCT},
                              "cells": {}}
    try:
        for engine in [e for e, o in (("postgres", "pg"), ("mysql", "mariadb")) if a.only in (None, o)]:
            for on in instr:
                engine_section(engine, on, a, report)
    finally:
        report["load_average_at_end"] = os.getloadavg()
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(report, indent=1))
    print(table(report))
    print(f"written: {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
