"""Page weight and render time of report.html against the run's length (issue 23: the page grows with steps,
not with the run's length; a one-hour run's report <= 2 MB, rendered in <= 2 s).

Usage: python -m bench.report_length [--minutes 1,10,60] [--rounds 5] [--bundle PATH ...]

A synthetic long bundle is the saved two-target run (tests/data/bundles/point_select) with its time series
repeated until they span the given minutes: each repetition's ``t`` moves on by the original span, cumulative
counters (every numeric top-level field of a non-workload series) by their growth over the span, so rates stay
what they were; the workload series' per-interval records repeat as they are. Steps keep their windows, so
only the run's length changes. ``--bundle`` measures real bundles as they are (e.g. the one-hour soak).
Render time: wall and CPU (load-independent, mostly), the median of ``--rounds`` in-process renders (the jinja templates compiled once, as in
``dbdiag report``), alternating the bundles round by round. ``--cli`` times ``python -m diag report`` in a new
process instead (interpreter start and imports included: what a user waits for), CPU from the child's rusage,
on this script's tree or ``--tree PATH`` (another worktree: the baseline). In-process, the code measured is the
tree this script is imported from: run it from outside a tree with ``PYTHONPATH=TREE`` (``python -m`` puts the
current directory first, ahead of PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from reports.views.render import render_bundle

SOURCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "bundles" / "point_select"
PER_INTERVAL = ("workload--", "pg_waits--", "my_waits--")  # series whose records are per interval, not counters


def _stretch(records: list[dict], minutes: float, cumulative: bool) -> list[dict]:
    if len(records) < 2:
        return records
    t0, t1 = records[0]["t"], records[-1]["t"]
    span = (t1 - t0) + (t1 - t0) / (len(records) - 1)
    growth = {k: records[-1][k] - records[0][k] for k, v in records[0].items()
              if cumulative and k != "t" and isinstance(v, (int, float)) and isinstance(records[-1].get(k), (int, float))}
    out, k = [], 0
    while not out or out[-1]["t"] - t0 < minutes * 60:
        for r in records:
            rec = dict(r, t=r["t"] + k * span)
            for key, g in growth.items():
                rec[key] = r[key] + k * g
            out.append(rec)
        k += 1
    return out


def synthetic(minutes: float, into: Path) -> Path:
    """The saved run with its series stretched to ``minutes``."""
    dest = into / f"point_select_{minutes:g}min"
    shutil.copytree(SOURCE, dest)
    for f in (dest / "series").glob("*.jsonl"):
        recs = [json.loads(ln) for ln in f.read_text().splitlines() if ln.strip()]
        recs = _stretch(recs, minutes, cumulative=not f.name.startswith(PER_INTERVAL))
        f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return dest


def _render(path: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one render in this process."""
    t, c = time.perf_counter(), time.process_time()
    render_bundle(path)
    return time.perf_counter() - t, time.process_time() - c


def _cli_render(path: Path, tree: Path) -> tuple[float, float]:
    """(wall s, CPU s) of ``python -m diag report PATH`` run from source tree ``tree``, in a new process."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "diag", "report", str(path)], cwd=tempfile.gettempdir(), env=env,
                   check=True, capture_output=True, timeout=300)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", default="1,10,60")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--bundle", type=Path, action="append", default=[])
    ap.add_argument("--cli", action="store_true", help="time `python -m diag report` in a new process")
    ap.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1],
                    help="with --cli: the source tree whose `diag report` runs (default: this script's)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bundles = [(f"synthetic {m} min", synthetic(float(m), Path(tmp))) for m in a.minutes.split(",") if m]
        for b in a.bundle:  # a real bundle is copied: report.html and findings.json are rewritten by a render
            bundles.append((f"bundle {b.name}", Path(shutil.copytree(b, Path(tmp) / b.name, symlinks=True))))
        if not a.cli:
            render_bundle(bundles[0][1])  # compile the templates once, as a second report in a process would
        times: dict[str, list[float]] = {n: [] for n, _ in bundles}
        cpu: dict[str, list[float]] = {n: [] for n, _ in bundles}
        for _ in range(a.rounds):
            for name, path in bundles:
                wall, used = _cli_render(path, a.tree) if a.cli else _render(path)
                times[name].append(wall)
                cpu[name].append(used)
        for name, path in bundles:
            size = (path / "report.html").stat().st_size
            series = sum(f.stat().st_size for f in (path / "series").glob("*.jsonl"))
            print(f"{name}: series {series / 1e6:.2f} MB, report.html {size / 1e3:.0f} KB, render median "
                  f"{statistics.median(times[name]):.2f} s (min {min(times[name]):.2f}, max {max(times[name]):.2f},"
                  f" {a.rounds} rounds), CPU median {statistics.median(cpu[name]):.2f} s")


if __name__ == "__main__":
    main()
