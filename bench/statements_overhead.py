"""Cost of the statement instrumentation of throwaway servers: the same workload, instrumented ON vs OFF.

    python3 -m bench.statements_overhead [--rounds 5] [--duration 6] [--warmup 1] [--only pg|mariadb]
                                         [--workload point-select] [--out bench/results/NAME.json]

Per engine, two throwaway servers of the same kind, started the same way
(:func:`diag.core.servers.start_server`), one with the engine's instrumentation
(``Engine.instrumentation``: PostgreSQL pg_stat_statements preloaded and created,
track_io_timing, track_wal_io_timing; MariaDB performance_schema with the
statement, stage and wait consumers and instruments) and one without
(``instrument=False``). The same data (sbtest, scale 1) on both; then rounds
alternating OFF and ON (the order flips every round so drift hits both alike) of
the workload at N = 2 x cores clients through the real orchestrator with no
collectors (``collect=False``: only the server-side instrumentation differs).
Reported: the median of per-round TPS ratios ON/OFF with the range, and the
server's CPU per transaction on each side. On a machine other processes load,
the sequential rounds' ratio moves with that load; so each round is also run
*paired*: both servers at once, one ``dbdiag run --no-collect`` each, started
together, whose TPS ratio sees the same seconds of the machine on both sides.

Then one round per side with every collector on (``collect=True``), whose findings
are listed side by side: what the instrumentation changes in a default run's
findings (the statement rules need it; the other rules should not change).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import diag.run as drun  # noqa: E402
from bench.tools import server_cpu  # noqa: E402
from diag.core import servers  # noqa: E402
from diag.core.bundle import load_bundle  # noqa: E402
from diag.core.db import Session  # noqa: E402
from reports.rules.findings import derive_findings  # noqa: E402
from workloads import load as wload  # noqa: E402
from workloads.driver import DriverOptions  # noqa: E402
from workloads.sysbench import sbtest_dataset  # noqa: E402

ENGINES = {"pg": "postgres", "mariadb": "mysql"}
ROOT = Path(__file__).resolve().parent.parent


def one_run(srv: servers.ThrowawayServer, clients: int, args: argparse.Namespace, collect: bool = False
            ) -> dict[str, Any]:
    """One step of the workload against ``srv``; its TPS, the server's CPU per transaction, and (``collect``)
    the finding categories of the run."""
    drv = DriverOptions(clients=(clients,), duration_s=args.duration, warmup_s=args.warmup, scale=1)
    with tempfile.TemporaryDirectory(prefix="dbdiag-stmtbench-") as d:
        opts = drun.RunOptions(targets=[srv.dsn()], workloads=[args.workload], driver=drv, out=Path(d) / "b",
                               name="statements-overhead", collect=collect, profile=False, render=False)
        s0 = server_cpu(srv)
        run = drun.Run(opts, out=io.StringIO())
        run.execute()
        s1 = server_cpu(srv)
        res = run.results[0]
        found = sorted({f["category"] for f in derive_findings(load_bundle(Path(d) / "b"))}) if collect else []
    n = res["transactions"] * (args.duration + args.warmup) / args.duration
    return {"tps": res["tps"], "transactions": res["transactions"],
            "server_us_per_txn": round((s1 - s0) / max(n, 1) * 1e6, 2), "findings": found}


def paired_round(on: servers.ThrowawayServer, off: servers.ThrowawayServer, clients: int,
                 args: argparse.Namespace) -> dict[str, Any]:
    """Both servers at once: one ``dbdiag run --no-collect`` per server started together, so a load that other
    processes put on the machine hits both sides in the same seconds; their TPS ratio is the ratio of what
    each transaction costs (the two sides share the CPUs alike: the same clients and server processes)."""
    with tempfile.TemporaryDirectory(prefix="dbdiag-stmtpair-") as d:
        cpu0 = {k: server_cpu(srv) for k, srv in (("on", on), ("off", off))}
        procs = {k: subprocess.Popen([sys.executable, "-m", "diag", "run", srv.dsn(), "-w", args.workload,
                                      "-c", str(clients), "-T", str(args.duration), "--warmup", str(args.warmup),
                                      "--no-collect", "--no-profile", "-o", f"{d}/{k}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
                 for k, srv in (("on", on), ("off", off))}
        for p in procs.values():
            p.wait(timeout=args.duration + args.warmup + 120)
        cpu1 = {k: server_cpu(srv) for k, srv in (("on", on), ("off", off))}
        out: dict[str, Any] = {}
        for k in procs:
            res = json.loads(Path(f"{d}/{k}/results.json").read_text())["results"][0]
            n = res["transactions"] * (args.duration + args.warmup) / args.duration
            out[k] = {"tps": res["tps"], "transactions": res["transactions"],
                      "server_us_per_txn": round((cpu1[k] - cpu0[k]) / max(n, 1) * 1e6, 2)}
    out["ratio_on_off"] = round(out["on"]["tps"] / out["off"]["tps"], 4)
    return out


def _server(engine: str, instrument: bool) -> tuple[servers.ThrowawayServer, str]:
    srv = servers.start_server(engine, instrument=instrument)
    with Session(srv.target(), statement_timeout_ms=0) as s:
        wload.ensure_schema(s)
        if not wload.is_loaded(s, sbtest_dataset(1)):
            wload.load(s, sbtest_dataset(1), None)
        return srv, f"{s.product} {s.version_text.split(' on ')[0]}"


def engine_section(engine: str, args: argparse.Namespace, report: dict[str, Any]) -> None:
    """Both servers of ``engine``, the alternating rounds, the findings of one collected round per side."""
    on, product = _server(engine, True)
    try:
        off, _ = _server(engine, False)
        try:
            side = {True: on, False: off}
            n = 2 * (os.cpu_count() or 1)
            warm = argparse.Namespace(duration=2.0, warmup=0.0, workload=args.workload)
            for srv in (off, on):
                one_run(srv, n, warm)  # warm both caches
            rounds = []
            for r in range(args.rounds):
                order = (False, True) if r % 2 == 0 else (True, False)
                got = {c: one_run(side[c], n, args) for c in order}
                rounds.append({"round": r + 1, "order": ["on" if c else "off" for c in order], "off": got[False],
                               "on": got[True], "ratio_on_off": round(got[True]["tps"] / got[False]["tps"], 4)})
                print(engine, r + 1, "off", got[False]["tps"], "on", got[True]["tps"], "ratio",
                      rounds[-1]["ratio_on_off"], flush=True)
            paired = []
            for r in range(args.rounds):
                paired.append(paired_round(on, off, n, args))
                print(engine, "paired", r + 1, paired[-1], flush=True)
            findings = {("on" if c else "off"): one_run(side[c], n, args, collect=True)["findings"]
                        for c in (False, True)}
            ratios = [x["ratio_on_off"] for x in rounds]
            report[engine] = {
                "server": f"throwaway {product}", "clients": n, "workload": args.workload, "rounds": rounds,
                "tps_off_median": statistics.median(x["off"]["tps"] for x in rounds),
                "tps_on_median": statistics.median(x["on"]["tps"] for x in rounds),
                "ratio_median": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
                "server_us_per_txn_median": {s: statistics.median(x[s]["server_us_per_txn"] for x in rounds)
                                             for s in ("off", "on")},
                "findings_collected_round": findings, "paired_rounds": paired,
                "paired_ratio_median": statistics.median(x["ratio_on_off"] for x in paired),
                "paired_ratio_min": min(x["ratio_on_off"] for x in paired),
                "paired_ratio_max": max(x["ratio_on_off"] for x in paired),
                "paired_server_us_per_txn_median": {s: statistics.median(x[s]["server_us_per_txn"] for x in paired)
                                                    for s in ("off", "on")}}
        finally:
            off.stop()
    finally:
        on.stop()


def summarize(report: dict[str, Any]) -> str:
    lines = []
    for eng in ENGINES.values():
        s = report.get(eng)
        if isinstance(s, dict):
            lines.append(f"{eng} ({s['server']}), {s['workload']}, {s['clients']} clients: OFF "
                         f"{s['tps_off_median']:,.0f} TPS, ON {s['tps_on_median']:,.0f} TPS, ratio ON/OFF median "
                         f"{s['ratio_median']:.3f} (range {s['ratio_min']:.3f}-{s['ratio_max']:.3f}); server µs/txn "
                         f"{s['server_us_per_txn_median']}; paired (simultaneous) ratio median "
                         f"{s['paired_ratio_median']:.3f} (range {s['paired_ratio_min']:.3f}-"
                         f"{s['paired_ratio_max']:.3f}), server µs/txn {s['paired_server_us_per_txn_median']}; "
                         f"findings {s['findings_collected_round']}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--only", choices=tuple(ENGINES), default=None)
    ap.add_argument("--workload", default="point-select")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    report: dict[str, Any] = {"command": " ".join(sys.argv), "cpus": os.cpu_count()}
    for key, engine in ENGINES.items():
        if args.only in (None, key):
            engine_section(engine, args, report)
    print(summarize(report))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
