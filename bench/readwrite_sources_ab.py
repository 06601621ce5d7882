"""A/B of the read-write cost of looking: default sources, the same without flush tracing (``noflush``), the same
with the blocking sampler's gate kept shut (``nochains``: blocking chains never read), with the engine's global
counters only (``stats``: no wait, blocking or statement sources), with the fsync test before the step
(``fsynctest``: the others are given --flush-capability), and every source off, on a throwaway server, 4 clients,
8 s, alternating the order each round; profiles off on every side.

    python3 bench/readwrite_sources_ab.py [ROUNDS] [postgres|mysql] [VARIANT,...]

Prints each round's tps and the median ratio of each variant to ``off`` (BENCHMARKS.md, Cost of looking).
"""
import dataclasses, io, json, statistics, sys, tempfile, time
from pathlib import Path
from diag.core import servers
from diag.run import Run, RunOptions, run_plan
from workloads.driver import DriverOptions
from collectors.registry import SourcePlan
from collectors import lockgate

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 5
engine = sys.argv[2] if len(sys.argv) > 2 else "postgres"
srv = servers.start_postgres() if engine == "postgres" else servers.start_mysql()
tmp = Path(tempfile.mkdtemp())
drv = DriverOptions(clients=(4,), duration_s=8.0, warmup_s=1.0, scale=1)
def one(name, **kw):
    o = RunOptions(targets=[f"t={srv.dsn()}"], workloads=["read-write"], driver=drv, out=tmp / f"{name}-{time.time()}",
                   argv=["dbdiag"], flush_capability=None if name == "fsynctest" else 1000.0, profile=False,
                   **kw)
    base = run_plan(o)
    if name == "noflush":
        o = dataclasses.replace(o, sources=dataclasses.replace(base, flush=False, flush_off="A/B"))
    if name == "stats":
        o = dataclasses.replace(o, sources=dataclasses.replace(base, engine="stats"))
    quiet = lockgate.LockGate.quiet
    if name == "nochains":  # the collectors fork from this process: the patched gate goes with them
        lockgate.LockGate.quiet = lambda self, interval_s, now=None: True
    try:
        p = Run(o, out=io.StringIO()).execute()
    finally:
        lockgate.LockGate.quiet = quiet
    return json.loads((p / "results.json").read_text())["results"][0]["tps"]
one("warm", collect=False)
VARIANTS = ("off", *(sys.argv[3].split(",") if len(sys.argv) > 3 else ("default", "noflush", "nochains")))
res = {k: [] for k in VARIANTS}
for r in range(ROUNDS):
    order = list(VARIANTS) if r % 2 == 0 else list(reversed(VARIANTS))
    for k in order:
        res[k].append(one(k, collect=(k != "off")))
    print(r, {k: v[-1] for k, v in res.items()}, flush=True)
for k in VARIANTS[1:]:
    ratios = [a / b for a, b in zip(res[k], res["off"])]
    print(k, "median ratio vs off", round(statistics.median(ratios), 3), [round(x, 3) for x in ratios])
srv.stop()
