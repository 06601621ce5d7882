"""What a server profile costs the workload: throughput with no profile, frame-pointer, DWARF and off-CPU recording.

    python3 -m bench.profile_cost [--rounds 4] [--duration 5] [--clients 2] [--out bench/results/profile_cost.json]

One throwaway PostgreSQL (the embedded 18, no frame pointers) with a pgbench scale-1 database; each round
runs ``pgbench -S -M prepared -c CLIENTS -P 1`` once per mode, the order rotating by one mode per round,
while the mode's ``perf record -a`` of the server's processes runs through the measured window (perf starts
once the backends are connected and is given SETTLE_S to settle, so its start-up is not in the window).
Modes use the exact arguments the profile source uses: ``fp`` (-g, 499 Hz), ``dwarf`` (--call-graph
dwarf,8192, 249 Hz), ``offcpu`` (sched_switch/sched_wakeup tracepoints). ``perf script`` afterwards is
timed on its own (wall seconds the orchestrator spends on it in a step). Besides TPS it measures the
server's CPU per transaction (user + system time of the server's processes from /proc over the window, µs),
which other load on the host moves less than throughput. Prints per-round values and ratios to ``none``;
medians are the result. Other helpers load this machine: trust the ratios of alternating rounds, not the
absolute TPS.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collectors.host import process_tree  # noqa: E402
from collectors.profile.offcpu import SCRIPT_FIELDS, offcpu_argv  # noqa: E402
from collectors.profile.parse import PERF_SCRIPT_FIELDS  # noqa: E402
from collectors.profile.record import call_graph_args  # noqa: E402
from diag.core import servers  # noqa: E402

MODES = ("none", "fp", "dwarf", "offcpu")
SETTLE_S = 1.5
TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` so far (gone ones count 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def _perf_argv(mode: str, pids: list[int], seconds: float, data: Path) -> list[str]:
    if mode == "offcpu":
        return offcpu_argv("perf", pids, seconds, data)
    freq = "249" if mode == "dwarf" else "499"
    return ["perf", "record", "-e", "cpu-clock", "-F", freq, *call_graph_args("dwarf" if mode == "dwarf" else "fp"),
            "--no-buildid-cache", "-a", "-o", str(data), "--", "sleep", f"{seconds:.1f}"]


def one(mode: str, port: int, postmaster: int, clients: int, duration: float, tmp: Path) -> dict[str, float]:
    """One measured window under ``mode``: TPS, server CPU µs per transaction, perf.data size, perf script time.

    pgbench runs throughout (``-P 1``); once its backends are connected, perf starts (given SETTLE_S), then
    the window of ``duration`` s is measured: TPS from pgbench's per-second progress lines inside it, CPU
    from /proc of the server's processes (the backends included) at its two ends.
    """
    start = time.monotonic()
    bench = subprocess.Popen(["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-S", "-n",
                              "-M", "prepared", "-c", str(clients), "-T", str(int(duration + SETTLE_S + 3)),
                              "-P", "1", "postgres"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    pids = [p.pid for p in process_tree(postmaster)]
    data = tmp / f"{mode}.data"
    perf = None
    if mode != "none":
        perf = subprocess.Popen(_perf_argv(mode, pids, duration + SETTLE_S + 0.5, data),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(SETTLE_S)
    cpu0, t0 = _cpu_s(pids), time.monotonic() - start
    time.sleep(duration)
    cpu1, t1 = _cpu_s(pids), time.monotonic() - start
    _, err = bench.communicate(timeout=duration + 60)
    per_s = [(float(m.group(1)), float(m.group(2)))
             for m in re.finditer(r"progress: ([\d.]+) s, ([\d.]+) tps", err)]
    inside = [tps for t, tps in per_s if t0 + 1 <= t <= t1 + 0.5]  # a line covers the second before it
    tps = statistics.mean(inside) if inside else 0.0
    out: dict[str, float] = {"tps": round(tps, 1), "seconds": len(inside),
                             "server_cpu_us_per_tx": round((cpu1 - cpu0) * 1e6 / (tps * (t1 - t0)), 2) if tps else 0.0}
    if perf is not None:
        perf.wait(timeout=120)
        fields = SCRIPT_FIELDS if mode == "offcpu" else PERF_SCRIPT_FIELDS
        r0 = time.monotonic()
        res = subprocess.run(["perf", "script", "--no-inline", "-i", str(data), "-F", fields],
                             capture_output=True, timeout=600)
        out["script_s"] = round(time.monotonic() - r0, 2)
        out["data_mb"] = round(data.stat().st_size / 1e6, 1)
        out["script_ok"] = float(res.returncode == 0)
        data.unlink(missing_ok=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("bench/results/profile_cost.json"))
    a = ap.parse_args()
    if shutil.which("pgbench") is None or shutil.which("perf") is None:
        sys.exit("needs pgbench and perf")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the server on kill too
    srv = servers.start_postgres()
    rounds = []
    try:
        subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(srv.port), "-U", "postgres", "-i", "-s", "1", "-q",
                        "postgres"], check=True, capture_output=True)
        with tempfile.TemporaryDirectory(prefix="dbdiag-bench-perf-") as d:
            for i in range(a.rounds):
                order = MODES[i % len(MODES):] + MODES[:i % len(MODES)]
                res = {m: one(m, srv.port, srv.pid or 0, a.clients, a.duration, Path(d)) for m in order}
                ratios = {m: round(res[m]["tps"] / res["none"]["tps"], 3) for m in MODES}
                cpu = {m: round(res[m]["server_cpu_us_per_tx"] / res["none"]["server_cpu_us_per_tx"], 3)
                       for m in MODES}
                rounds.append({"order": list(order), "modes": res, "ratio_to_none": ratios, "cpu_ratio_to_none": cpu})
                print(f"round {i + 1} ({', '.join(order)}): " + "  ".join(
                    f"{m} {res[m]['tps']:.0f} tps x{ratios[m]:.3f} cpu/tx x{cpu[m]:.3f}" for m in MODES), flush=True)
    finally:
        srv.stop()
    summary = {m: {"median_ratio": statistics.median(r["ratio_to_none"][m] for r in rounds),
                   "median_cpu_ratio": statistics.median(r["cpu_ratio_to_none"][m] for r in rounds),
                   "median_server_cpu_us_per_tx": statistics.median(r["modes"][m]["server_cpu_us_per_tx"]
                                                                    for r in rounds),
                   "median_tps": statistics.median(r["modes"][m]["tps"] for r in rounds),
                   **({"median_data_mb": statistics.median(r["modes"][m]["data_mb"] for r in rounds),
                       "median_script_s": statistics.median(r["modes"][m]["script_s"] for r in rounds)}
                      if m != "none" else {})} for m in MODES}
    for m, s in summary.items():
        print(f"{m:7} median tps ratio {s['median_ratio']:.3f}  cpu/tx ratio {s['median_cpu_ratio']:.3f}  "
              f"median tps {s['median_tps']:.0f}"
              + (f"  perf.data {s['median_data_mb']} MB  perf script {s['median_script_s']} s" if m != "none" else ""))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"clients": a.clients, "duration_s": a.duration, "rounds": rounds,
                                 "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
