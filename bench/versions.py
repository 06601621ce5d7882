"""Two versions of dbdiag's driver against each other on the same throwaway server, rounds alternating.

    python3 -m bench.versions OLD_TREE [--engine mysql|postgres] [--rounds 5] [--duration 8] [--clients 4]

OLD_TREE is a source tree of another commit with its C modules built in place, e.g.::

    git archive 7851820 | tar -x -C /tmp/old && (cd /tmp/old && python setup.py build_ext --inplace)

Each round runs the point-select step once with OLD_TREE's code and once with this tree's (in that order on
odd rounds, reversed on even ones), each in its own Python process importing only its tree, against one
throwaway server started by this tree. Prints per-round TPS, the per-round ratio new/old and the median; a
ratio of 1 means the change did not move the driver's throughput. Results to --out as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diag.core import servers  # noqa: E402

HERE = Path(__file__).resolve().parent.parent
STEP = """
import json, sys, tempfile
from pathlib import Path
from diag.core.bundle import BundleWriter
from diag.core.targets import parse_target
from workloads.driver import DriverOptions, run_sweep
dsn, clients, duration = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with tempfile.TemporaryDirectory() as d:
    rows = run_sweep(parse_target(dsn), ["point-select"],
                     DriverOptions(clients=(clients,), duration_s=duration, warmup_s=1.0, protocol="prepared"),
                     BundleWriter(Path(d) / "b"), progress=None)
import workloads.driver as wd
# A typed ResultRow from this tree's driver; an older tree's (OLD_TREE) returns the row as a dict.
row = rows[0].to_dict() if hasattr(rows[0], "to_dict") else rows[0]
print(json.dumps({"tps": row["tps"], "driver": row["driver"], "client_cpu_s": row.get("client_cpu_s"),
                  "transactions": row["transactions"], "code": wd.__file__}))
"""


def one(tree: Path, dsn: str, clients: int, duration: float) -> dict[str, object]:
    """One point-select step with ``tree``'s code (its own process, its tree first on sys.path)."""
    out = subprocess.run([sys.executable, "-c", STEP, dsn, str(clients), str(duration)], cwd=tree,
                         env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"},
                         capture_output=True, text=True, timeout=duration * 10 + 120)
    if out.returncode != 0:
        raise SystemExit(f"{tree}: step failed: {out.stderr.strip().splitlines()[-1:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if not str(got["code"]).startswith(str(tree)):  # the other tree's code would make the comparison moot
        raise SystemExit(f"{tree}: the step ran {got['code']}, not this tree's code")
    return got


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("old", type=Path)
    ap.add_argument("--engine", default="mysql")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--out", default="bench/results/last-versions.json")
    a = ap.parse_args()
    srv = servers.start_server(a.engine)
    try:
        dsn = srv.dsn()
        one(HERE, dsn, a.clients, 2.0)  # loads the table and warms the cache
        rounds = []
        for r in range(a.rounds):
            order = [("old", a.old), ("new", HERE)] if r % 2 == 0 else [("new", HERE), ("old", a.old)]
            got = {name: one(tree, dsn, a.clients, a.duration) for name, tree in order}
            ratio = float(got["new"]["tps"]) / float(got["old"]["tps"])
            rounds.append({"round": r + 1, **{f"{k}_tps": v["tps"] for k, v in got.items()},
                           **{f"{k}_driver": v["driver"] for k, v in got.items()},
                           # client CPU per transaction (µs): what a faster loop should lower, load or not
                           **{f"{k}_client_us_per_txn": round(float(v["client_cpu_s"] or 0) / max(int(v["transactions"]), 1)
                                                              * 1e6, 2) for k, v in got.items()},
                           "load": [round(x, 2) for x in os.getloadavg()], "ratio_new_old": round(ratio, 3)})
            print(json.dumps(rounds[-1]), flush=True)
        med = statistics.median(x["ratio_new_old"] for x in rounds)
        print(f"{a.engine} point-select c={a.clients}: new/old median {med:.3f} "
              f"(rounds {', '.join(str(x['ratio_new_old']) for x in rounds)})")
        Path(a.out).write_text(json.dumps({"engine": a.engine, "clients": a.clients, "duration_s": a.duration,
                                           "old": str(a.old), "rounds": rounds, "median": med}, indent=1))
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
