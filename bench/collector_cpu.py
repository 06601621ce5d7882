"""Each collector's own CPU in a run, two code trees alternating (issue 25: the collectors use <= 1% of one core).

    python3 -m bench.collector_cpu --old DIR --new DIR [--rounds 5] [--duration 12] [--clients 4] [--rate 400]
                                   [--pg DSN] [--mariadb DSN] [--out bench/results/NAME.json]

For each engine (the machine's services by default, each in a scratch database this script creates and drops) and
each round, one ``dbdiag run`` (``diag.run.Run``: point-select, ``--clients`` clients in an open loop at ``--rate``
transactions/s in total, so both trees sample the same load; every collector, no profiles, no report) is made with
each tree's code, in a child process that imports only that tree (``--old`` first in odd rounds, ``--new`` first in
even ones). Per collector process it reads:

* ``measured``: its CPU over the step's measured part, from the host series (``procs.collector.<pid>``: user + system
  seconds of the process and its children, read by the host collector once a second), in % of one core: what the
  run's report states (reports.model.observer);
* ``life``: its CPU over its whole life, start-up (fork, connect, probe reads) included, read from /proc just before
  it is stopped, over the seconds it ran: what bench.observer_cost reports.

Printed and written: per engine, collector and tree the median over rounds and the per-round values; "all" is the
sum of a run's collectors. Each run is a child process (bench/collector_cpu_run.py) whose PYTHONPATH is the
tree's, so neither tree's imports or caches reach the other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diag.core.db import Session  # noqa: E402
from diag.core.targets import parse_target  # noqa: E402

PG_DSN = "postgresql://postgres@127.0.0.1:5432/{db}"
MARIADB_DSN = "mysql://root@127.0.0.1:3306/{db}"
SCRATCH = f"dbdiag_collcpu_{os.getpid()}"


def _child(code: str, dsn: str, a: argparse.Namespace, duration: float | None = None) -> dict[str, Any]:
    out = subprocess.run([sys.executable, str(Path(__file__).resolve().with_name("collector_cpu_run.py")), dsn,
                          str(duration or a.duration), str(a.clients), str(a.rate)],
                         capture_output=True, text=True, timeout=600, cwd=code, env={**os.environ, "PYTHONPATH": code})
    if out.returncode != 0:
        raise SystemExit(f"run with {code} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _scratch(dsn_fmt: str, create: bool) -> None:
    """Create (or drop) the scratch database on the service."""
    admin = parse_target(dsn_fmt.format(db="postgres" if dsn_fmt.startswith("postgres") else "mysql"))
    with Session(admin, statement_timeout_ms=0) as s:  # a drop waits for the run's last sessions to end
        s.execute(f"DROP DATABASE IF EXISTS {SCRATCH}" + (" WITH (FORCE)" if s.engine == "postgres" else ""))
        if create:
            s.execute(f"CREATE DATABASE {SCRATCH}")


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 3) if xs else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--old", default=None)
    p.add_argument("--new", default=None)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--duration", type=float, default=12.0)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--rate", type=float, default=400.0)
    p.add_argument("--engines", default="postgres,mariadb")
    p.add_argument("--pg", default=PG_DSN)
    p.add_argument("--mariadb", default=MARIADB_DSN)
    p.add_argument("--out", type=Path, default=Path("bench/results/collector-cpu-last-run.json"))
    a = p.parse_args(argv)
    trees = {"old": str(Path(a.old).resolve()), "new": str(Path(a.new).resolve())}
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "trees": trees,
                              "args": {k: v for k, v in vars(a).items() if k != "out"},
                              "engines": {}}
    for engine in a.engines.split(","):
        fmt = a.pg if engine == "postgres" else a.mariadb
        _scratch(fmt, True)
        rounds: list[dict[str, Any]] = []
        try:
            _child(trees["new"], fmt.format(db=SCRATCH), a, duration=3.0)  # loads the data: not counted
            for r in range(a.rounds):
                order = ("old", "new") if r % 2 == 0 else ("new", "old")
                got = {side: _child(trees[side], fmt.format(db=SCRATCH), a) for side in order}
                rounds.append({"round": r + 1, "order": list(order), **got})
                report["engines"][engine] = {"rounds": rounds}
                a.out.parent.mkdir(parents=True, exist_ok=True)
                a.out.write_text(json.dumps(report, indent=1))
                print(f"{engine} round {r + 1}: " + "; ".join(
                    f"{s} all {sum(got[s]['measured'].values()):.2f}% {got[s]['measured']} (life "
                    f"{sum(got[s]['life'].values()):.2f}) tps {got[s]['tps']:.0f} load {got[s]['load1']:.1f}"
                    for s in order), flush=True)
        finally:
            _scratch(fmt, False)
        summary: dict[str, Any] = {}
        for side in ("old", "new"):
            names = sorted({k for x in rounds for part in ("measured", "life") for k in x[side][part]})
            summary[side] = {
                "measured": {k: _median([x[side]["measured"][k] for x in rounds if k in x[side]["measured"]])
                             for k in names},
                "life": {k: _median([x[side]["life"][k] for x in rounds if k in x[side]["life"]]) for k in names},
                "measured_all": _median([sum(x[side]["measured"].values()) for x in rounds]),
                "life_all": _median([sum(x[side]["life"].values()) for x in rounds])}
        report["engines"][engine] = {"rounds": rounds, "median": summary}
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(report, indent=1))
    for engine, e in report["engines"].items():
        m = e["median"]
        print(f"\n{engine}: collector | old measured | new measured | old life | new life")
        for k in sorted(set(m["old"]["measured"]) | set(m["new"]["measured"])):
            print(f"  {k} | {m['old']['measured'].get(k)} | {m['new']['measured'].get(k)} | "
                  f"{m['old']['life'].get(k)} | {m['new']['life'].get(k)}")
        print(f"  all | {m['old']['measured_all']} | {m['new']['measured_all']} | {m['old']['life_all']} | "
              f"{m['new']['life_all']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
