"""Lock share of read-write at 4 clients on a throwaway PostgreSQL (BENCHMARKS.md, Cost of looking): per wait event, the
samples of a 6 s step, and the blocking windows with their waiting time.

    python3 bench/rw_lock_share.py
"""
import io, json, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from diag.core import servers
from diag.run import Run, RunOptions
from workloads.driver import DriverOptions
from collectors import lockgate
srv = servers.start_postgres()
opened = []
orig_tick = lockgate.LockGate.tick
tmp = Path(tempfile.mkdtemp())
drv = DriverOptions(clients=(4,), duration_s=6.0, warmup_s=1.0, scale=1)
o = RunOptions(targets=[f"t={srv.dsn()}"], workloads=["read-write"], driver=drv, out=tmp / "rw", argv=["dbdiag"],
               flush_capability=1000.0, profile=False)
p = Run(o, out=io.StringIO()).execute()
from diag.core.bundle import load_bundle
b = load_bundle(p)
for k, v in b.series.items():
    if "waits" in k:
        tot = {}
        for r in v:
            for kk, vv in (r.get("waits") or {}).items():
                tot[kk] = tot.get(kk, 0) + vv
        print(k, sorted(tot.items(), key=lambda kv: -kv[1])[:8], "samples", sum(r.get("samples", 0) for r in v))
    if "blocking" in k:
        print(k, len(v), "windows; waiting_s", round(sum(r.get("waiting_s", 0) for r in v), 3), "ticks", sum(r.get("ticks", 0) for r in v))
srv.stop()
