"""Cost of ``dbdiag watch`` on the server it watches: pgbench -S at saturation with and without a watch.

    python3 -m bench.watch_cost [--rounds 5] [--duration 6] [--clients 4] [--out bench/results/NAME.json]

One throwaway PostgreSQL (diag.servers.start_postgres), pgbench scale 1 in its postgres database. Each round
runs ``pgbench -n -S -c N -j 2 -T D`` twice, once alone (OFF) and once under ``dbdiag watch --no-profile``
(ON: every other source a watch starts by default), the order flipped every round so a drift of the machine
hits both alike. The watch is started first and pgbench only once its first window is written (its sources
are up). Reported: pgbench's own tps each side, the median of per-round ON/OFF ratios and its range, and the
server CPU of dbdiag's own sessions during the ON runs (utime + stime from /proc of every backend whose
application_name starts with ``dbdiag:``) as a share of one core.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diag import servers  # noqa: E402
from diag.db import Session  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def _own_backends(s: Session) -> list[int]:
    return [int(r["pid"]) for r in s.query("SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'dbdiag:%'")]


def _pgbench(port: int, clients: int, seconds: float) -> float:
    p = subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-n", "-S", "-c",
                        str(clients), "-j", "2", "-T", str(int(seconds)), "postgres"], capture_output=True,
                       text=True, timeout=seconds + 60, check=True)
    return float(re.search(r"^tps = ([\d.]+)", p.stdout, re.M)[1])


def _on(srv: Any, clients: int, seconds: float, out: Path) -> tuple[float, float]:
    """pgbench's tps under a watch, and the CPU seconds/s of dbdiag's own backends meanwhile."""
    watch = subprocess.Popen([sys.executable, "-m", "diag", "watch", f"pg={srv.dsn()}", "--window", "2",
                              "--no-profile", "--out", str(out)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (out / "results.json").exists() or \
                not json.loads((out / "results.json").read_text() or '{"results": []}')["results"]:
            time.sleep(0.2)
        with Session(srv.target()) as s:
            pids = _own_backends(s)
        before = sum(_cpu_s(p) for p in pids)
        t0 = time.monotonic()
        tps = _pgbench(srv.port, clients, seconds)
        cores = (sum(_cpu_s(p) for p in pids) - before) / (time.monotonic() - t0)
    finally:
        watch.send_signal(signal.SIGINT)
        watch.wait(60)
    return tps, cores


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    srv = servers.start_postgres()
    try:
        subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(srv.port), "-U", "postgres", "-i", "-s", "1", "-q",
                        "postgres"], check=True, capture_output=True, timeout=300)
        rounds = []
        with tempfile.TemporaryDirectory(prefix="dbdiag-watch-cost-") as tmp:
            for i in range(a.rounds):
                got: dict[str, Any] = {}
                for side in (("off", "on") if i % 2 == 0 else ("on", "off")):
                    if side == "off":
                        got["off"] = _pgbench(srv.port, a.clients, a.duration)
                    else:
                        got["on"], got["own_server_cores"] = _on(srv, a.clients, a.duration, Path(tmp) / f"w{i}")
                got["ratio"] = got["on"] / got["off"]
                rounds.append(got)
                print(f"round {i + 1}: off {got['off']:.0f} tps, on {got['on']:.0f} tps, ratio {got['ratio']:.3f}, "
                      f"dbdiag's backends {100 * got['own_server_cores']:.2f}% of a core", flush=True)
        ratios = [r["ratio"] for r in rounds]
        own = [r["own_server_cores"] for r in rounds]
        summary = {"ratio_median": statistics.median(ratios), "ratio_range": [min(ratios), max(ratios)],
                   "off_tps_median": statistics.median(r["off"] for r in rounds),
                   "on_tps_median": statistics.median(r["on"] for r in rounds),
                   "own_server_core_share_median": statistics.median(own), "rounds": rounds,
                   "clients": a.clients, "duration_s": a.duration, "load1": os.getloadavg()[0]}
        print(json.dumps({k: v for k, v in summary.items() if k != "rounds"}, indent=1))
        if a.out:
            a.out.write_text(json.dumps(summary, indent=1))
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
