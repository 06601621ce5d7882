"""A/B of the read-write cost of looking: default sources, the same without flush tracing (``noflush``), and every
source off, on a throwaway server, 4 clients, 8 s, alternating the order each round.

    python3 bench/readwrite_sources_ab.py [ROUNDS] [postgres|mysql]

Prints each round's tps and the median ratio of each variant to ``off`` (BENCHMARKS.md, Cost of looking).
"""
import dataclasses, io, json, statistics, sys, tempfile, time
from pathlib import Path
from diag import servers
from diag.run import Run, RunOptions, run_plan
from workloads.driver import DriverOptions
from collectors.registry import SourcePlan

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
engine = sys.argv[2] if len(sys.argv) > 2 else "postgres"
srv = servers.start_postgres() if engine == "postgres" else servers.start_mysql()
tmp = Path(tempfile.mkdtemp())
drv = DriverOptions(clients=(4,), duration_s=8.0, warmup_s=1.0, scale=1)
def one(name, **kw):
    o = RunOptions(targets=[f"t={srv.dsn()}"], workloads=["read-write"], driver=drv, out=tmp / f"{name}-{time.time()}",
                   argv=["dbdiag"], flush_capability=1000.0, profile=False, **kw)
    base = run_plan(o)
    if name == "noflush":
        o = dataclasses.replace(o, sources=dataclasses.replace(base, flush=False, flush_off="A/B"))
    p = Run(o, out=io.StringIO()).execute()
    return json.loads((p / "results.json").read_text())["results"][0]["tps"]
one("warm", collect=False)
res = {k: [] for k in ("off", "default", "noflush")}
for r in range(ROUNDS):
    order = ["off", "default", "noflush"] if r % 2 == 0 else ["noflush", "default", "off"]
    for k in order:
        res[k].append(one(k, collect=(k != "off")))
    print(r, {k: v[-1] for k, v in res.items()}, flush=True)
for k in ("default", "noflush"):
    ratios = [a / b for a, b in zip(res[k], res["off"])]
    print(k, "median ratio vs off", round(statistics.median(ratios), 3), [round(x, 3) for x in ratios])
srv.stop()
