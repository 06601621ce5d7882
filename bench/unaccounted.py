"""Unaccounted time of the built-in workloads on the embedded servers (issue 22: under 10% of the mean
transaction on both engines), with the run-queue part and without it, on the same bundles.

    python3 -m bench.unaccounted [--duration 4] [--clients 3] [--out bench/results/NAME.json]
    python3 -m bench.unaccounted --bundles DIR...   (only the accounting of bundles already written)

Runs ``python -m diag run embedded:postgres embedded:mysql`` once per workload (point-select, read-write, and
tpcc with --tpcc-mode sp as in seed 000), --no-profile, and reads each step's accounting twice: as this
version accounts it (the server threads' run-queue time from /proc schedstat fills the CPU run-queue part on
a host that is not busy on average) and with that part set to zero (as the accounting did before it). Both
readings come from the same bundle, so the ratio is not moved by a drift of the machine; the host's busy
share is printed beside each step because the result depends on it (a host above 90% busy puts the whole
active-but-not-on-CPU time in the run queue either way).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import reports.model.accounting as accounting  # noqa: E402
from diag.core.bundle import load_bundle  # noqa: E402

WORKLOADS = (("point-select", ()), ("read-write", ()), ("tpcc", ("--tpcc-mode", "sp")))


def _steps(path: Path) -> dict[tuple[str, str, int], Any]:
    return {(s.engine.name, s.workload, s.clients): (s, a) for s, a in accounting.accounts(load_bundle(path))}


def read(path: Path) -> list[dict[str, Any]]:
    """Per step of the bundle at ``path``: unaccounted share with and without the run-queue part."""
    after = _steps(path)
    keep = accounting.run_queue_us
    accounting.run_queue_us = lambda _u, _t: 0.0  # type: ignore[assignment]
    try:
        before = _steps(path)
    finally:
        accounting.run_queue_us = keep  # type: ignore[assignment]
    out = []
    for key, (_step, acc) in sorted(after.items()):
        ev = acc.evidence
        out.append({"engine": key[0], "workload": key[1], "clients": key[2], "wall_us": round(acc.wall_us_per_txn),
                    "unaccounted_pct_without_run_queue": round(100 * before[key][1].share("unaccounted"), 1),
                    "unaccounted_pct": round(100 * acc.share("unaccounted"), 1),
                    "host_busy_pct": ev.get("host_busy_pct"), "run_queue_us": ev.get("run_queue_us_per_txn"),
                    "hidden_us": ev.get("cpu_sampled_not_on_cpu_us"), "why": ev.get("unaccounted_why")})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--bundles", type=Path, nargs="*")
    a = ap.parse_args()
    bundles = list(a.bundles or [])
    if not bundles:
        root = Path(tempfile.mkdtemp(prefix="dbdiag-unaccounted-"))
        for wl, extra in WORKLOADS:
            out = root / wl
            subprocess.run([sys.executable, "-m", "diag", "run", "embedded:postgres", "embedded:mysql", "-w", wl,
                            *extra, "-c", str(a.clients), "-T", str(a.duration), "--warmup", "1", "--no-profile",
                            "--out", str(out)], check=True, capture_output=True, text=True,
                           cwd=str(Path(__file__).resolve().parent.parent))
            bundles.append(out)
    rows = [r for p in bundles for r in read(p)]
    for r in rows:
        print(f"{r['engine']:8} {r['workload']:12} c={r['clients']} wall {r['wall_us']:>7} µs  unaccounted "
              f"{r['unaccounted_pct_without_run_queue']:5.1f}% -> {r['unaccounted_pct']:5.1f}%  host busy "
              f"{r['host_busy_pct']}%  run queue {r['run_queue_us']} µs")
        if r["why"]:
            print(f"    {r['why']}")
    if a.out:
        a.out.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
