"""Point-select throughput with the clients on 1 and on 2 Dask workers, and locally, against one server.

    python3 -m bench.dask_workers [--rounds 5] [--duration 6] [--clients 4] [--out FILE]

Starts a throwaway PostgreSQL and two Dask clusters on loopback: A (a scheduler and one ``dask worker``)
and B (a scheduler and two). Each round runs the same point-select step three ways, in rotating order: the
clients in this process's pool (no ``--workers``, the reference), on cluster A, on cluster B. Prints the
per-round TPS and the ratios to the reference of the same round, with their medians. On one machine every
worker shares its CPUs with the server, so this measures the cost of the Dask path and of splitting the
clients, not the gain of a second client host.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diag.core import servers  # noqa: E402
from diag.core.bundle import BundleWriter  # noqa: E402
from workloads.remote.dask_steps import connect  # noqa: E402
from workloads.driver import DriverOptions, run_sweep  # noqa: E402


def cluster(workers: int) -> tuple[str, list[subprocess.Popen[bytes]]]:
    """A scheduler and ``workers`` workers (one thread, no nanny) on loopback; its address and processes."""
    dask = shutil.which("dask") or "dask"
    port = servers.free_port()
    addr = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    procs += [subprocess.Popen([dask, "worker", addr, "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host",
                                "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
              for _ in range(workers)]
    c = connect(addr)
    deadline = time.monotonic() + 60
    while len(c.scheduler_info()["workers"]) < workers:
        if time.monotonic() > deadline:
            raise SystemExit(f"{workers} dask workers did not join within 60 s")
        time.sleep(0.2)
    c.close()
    return addr, procs


def step(srv: servers.ThrowawayServer, clients: int, duration: float, workers: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        (row,) = run_sweep(srv.target(), ["point-select"],
                           DriverOptions(clients=(clients,), duration_s=duration, warmup_s=1.0, workers=workers),
                           BundleWriter(Path(d) / "b"), progress=None)
    return {"tps": row.tps, "complete": True if row.complete is None else row.complete,
            "workers": [{k: w[k] for k in ("clients", "tps", "host_cpu_busy_pct")}
                        for w in row.extra.get("workers", [])]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    srv = servers.start_postgres()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        one, p1 = cluster(1)
        two, p2 = cluster(2)
        procs = p1 + p2
        ways = {"local": None, "1 worker": one, "2 workers": two}
        names = list(ways)
        rounds = []
        for r in range(a.rounds):
            order = names[r % 3:] + names[:r % 3]
            res = {name: step(srv, a.clients, a.duration, ways[name]) for name in order}
            res["order"] = order
            rounds.append(res)
            print(f"round {r + 1} ({', '.join(order)}): " + ", ".join(
                f"{n} {res[n]['tps']:.0f} tps" for n in names) + f"; 1w/local {res['1 worker']['tps'] / res['local']['tps']:.3f}"
                f", 2w/local {res['2 workers']['tps'] / res['local']['tps']:.3f}", flush=True)
        summary = {n: statistics.median(x[n]["tps"] for x in rounds) for n in names}
        ratios = {f"{n}/local": statistics.median(x[n]["tps"] / x["local"]["tps"] for x in rounds)
                  for n in names[1:]}
        ratios["2 workers/1 worker"] = statistics.median(x["2 workers"]["tps"] / x["1 worker"]["tps"] for x in rounds)
        print("median tps:", json.dumps(summary), "median ratios:", json.dumps({k: round(v, 3) for k, v in ratios.items()}))
        if a.out:
            a.out.write_text(json.dumps({"clients": a.clients, "duration_s": a.duration, "rounds": rounds,
                                         "median_tps": summary, "median_ratios": ratios}, indent=1) + "\n")
    finally:
        for p in procs:
            p.kill()
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
