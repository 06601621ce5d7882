"""How the statistics over a step's intervals scale: this tree's diag.core.stats against a git ref's, in one run.

    python3 -m bench.stats_scaling [--sizes 600,1200,1800,3600] [--rounds 5] [--baseline-ref main]
                                   [--baseline-cap 20] [--out bench/results/DATE-stats.json]

For each size n (per-second intervals of a step: a one-hour step is 3,600) it times, in alternating
rounds (baseline, this tree, baseline, ...), the statistics a run and its reports compute over a step's
intervals, on seeded synthetic throughput series (floats with two decimals, about 1,000 tps with 3% noise):

- ``median_ci(xs)``: the interval of the median (run after every step and every repeat);
- ``mann_kendall(xs)``: the trend test and its Theil-Sen slope (the noise rule);
- ``hodges_lehmann(a, b)``: the change between two sides of n intervals each (the significance of a
  comparison; n x n pairwise differences).

The baseline is ``diag/core/stats.py`` as it is at ``--baseline-ref`` (read with ``git show``, loaded as its own
module), so both run in the same process on the same inputs and the results are checked equal. A baseline
call slower than ``--baseline-cap`` seconds is not run at the next larger size (its figure says why).
Prints a table of median wall seconds per call (min-max) and median CPU seconds (``time.process_time``: on
a shared machine the wall time also counts waiting for a CPU), and writes the JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from diag.core import stats

ROOT = Path(__file__).resolve().parent.parent


def baseline_module(ref: str) -> types.ModuleType:
    """diag/core/stats.py at git ``ref`` (diag/stats.py before the core/ folder), as a module of its own (its
    imports are the standard library's)."""
    path = "diag/core/stats.py"
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{ref}:{path}"], capture_output=True,
                      timeout=60).returncode != 0:
        path = "diag/stats.py"
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:{path}"], check=True,
                         capture_output=True, text=True, timeout=60).stdout
    mod = types.ModuleType(f"stats_at_{ref}")
    sys.modules[mod.__name__] = mod  # dataclasses look their module up by name
    exec(compile(src, f"{ref}:{path}", "exec"), mod.__dict__)  # noqa: S102 (our own file at a ref)
    return mod


def series(n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [round(rng.gauss(1000.0, 30.0), 2) for _ in range(n)]


def cases(n: int) -> dict[str, Callable[[types.ModuleType], Any]]:
    xs, a, b = series(n, 1), series(n, 2), [x * 1.01 for x in series(n, 3)]
    return {"median_ci": lambda m: m.median_ci(xs),
            "mann_kendall": lambda m: m.mann_kendall(xs),
            "hodges_lehmann": lambda m: m.hodges_lehmann(a, b)}


def timed(fn: Callable[[], Any], cpu: list[float]) -> tuple[float, Any]:
    """Wall seconds of one call (its CPU seconds appended to ``cpu``: the machine may be shared)."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    cpu.append(time.process_time() - c0)
    return wall, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="600,1200,1800,3600")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline-ref", default="main")
    ap.add_argument("--baseline-cap", type=float, default=20.0, help="seconds per baseline call")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    old = baseline_module(args.baseline_ref)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows: list[dict[str, Any]] = []
    too_slow: set[str] = set()
    for n in sizes:
        for name, call in cases(n).items():
            t_old: list[float] = []
            t_new: list[float] = []
            c_old: list[float] = []
            c_new: list[float] = []
            same = None
            for _ in range(args.rounds):
                if name not in too_slow:
                    dt, r_old = timed(lambda: call(old), c_old)
                    t_old.append(dt)
                    if dt > args.baseline_cap:
                        too_slow.add(name)  # one call says how slow it is; the rounds go on for this tree
                dt, r_new = timed(lambda: call(stats), c_new)
                t_new.append(dt)
                if t_old:
                    same = same is not False and repr(r_old) == repr(r_new)
            row = {"n": n, "stat": name, "new_s": statistics.median(t_new), "new_min_s": min(t_new),
                   "new_max_s": max(t_new), "rounds_new": len(t_new),
                   "new_cpu_s": statistics.median(c_new), "old_cpu_s": statistics.median(c_old) if c_old else None,
                   "old_s": statistics.median(t_old) if t_old else None, "rounds_old": len(t_old),
                   "same_result": same}
            rows.append(row)
            old_txt = (f"{row['old_s']:9.4f} s, cpu {row['old_cpu_s']:8.4f} ({len(t_old)})" if t_old
                       else "not run (slower than the cap at a smaller n)")
            print(f"n={n:5d} {name:15s} baseline {old_txt} | this tree {row['new_s']:7.4f} s "
                  f"[{row['new_min_s']:.4f}-{row['new_max_s']:.4f}], cpu {row['new_cpu_s']:.4f} ({len(t_new)}) | "
                  f"same result: {same}", flush=True)
    out = args.out or ROOT / "bench" / "results" / f"{_dt.datetime.now(_dt.timezone.utc):%Y%m%dT%H%M%S}-stats.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"baseline_ref": args.baseline_ref, "rounds": args.rounds,
                               "loadavg": os.getloadavg(), "rows": rows}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
