"""TPC-C client CPU per transaction against the server's (issue 15), both modes, both engines.

    python3 -m bench.tpcc_cpu [--rounds 5] [--duration 8] [--clients 2] [--scale 1] [--only pg|mariadb]
                              [--sides client,client-py,sp,sp-py] [--out FILE]

One throwaway server per engine (PostgreSQL 18 from the embedded wheel, MariaDB 10.11; default settings),
TPC-C loaded once at ``--scale`` warehouses, the routines created, one unmeasured 3 s step of each side.
Then ``--rounds`` rounds of the sides, in one order in even rounds and reversed in odd ones (a drift of
the shared machine hits all sides alike): ``client`` (client-side mode: every statement from the client,
native executor), ``client-py`` (the same program on the Python loop, ``DBDIAG_PY_LOOP=1``), ``sp``
(``--tpcc-mode sp``: one CALL per transaction, native executor) and ``sp-py`` (the same on the Python
loop). Per side and round: TPS, NOPM, TPM, client
CPU per transaction (our client processes' user+sys, the result row's client_cpu_s) and server CPU per
transaction (the server process and its reaped children over the side's run, bench.compare.server_cpu),
and the load average. The table gives the medians over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compare import _load, alternated  # noqa: E402
from bench.tools import us_per_txn  # noqa: E402
from diag.core import servers  # noqa: E402
from diag.core.bundle import BundleWriter  # noqa: E402
from diag.core.schema import ResultRow  # noqa: E402
from workloads.driver import DriverOptions, run_sweep  # noqa: E402

SIDES = (("client", "client", False), ("client-py", "client", True), ("sp", "sp", False), ("sp-py", "sp", True))


def step(target: Any, mode: str, py_loop: bool, clients: int, duration: float, scale: float) -> ResultRow:
    """One measured tpcc step (no warmup, as bench.compare's sides); ``py_loop``: DBDIAG_PY_LOOP=1."""
    if py_loop:
        os.environ["DBDIAG_PY_LOOP"] = "1"
    try:
        opts = DriverOptions(clients=(clients,), duration_s=duration, warmup_s=0.0, scale=scale,  # type: ignore[arg-type]
                             tpcc_mode=mode)
        with tempfile.TemporaryDirectory(prefix="dbdiag-bench-") as d:
            row = run_sweep(target, ["tpcc"], opts, BundleWriter(Path(d)), progress=None)[0]
    finally:
        os.environ.pop("DBDIAG_PY_LOOP", None)
    if row.errors or not row.transactions:  # a broken side must not become a row of figures
        raise SystemExit(f"tpcc {mode} (py_loop={py_loop}) failed: {dict(row.errors)} {dict(row.error_samples)}")
    if ("native executor" in row.driver) == py_loop:
        raise SystemExit(f"tpcc {mode} (py_loop={py_loop}) ran on {row.driver!r}, not the loop this side names")
    return row


def engine_rounds(srv: servers.ThrowawayServer, name: str, args: argparse.Namespace) -> list[dict]:
    """Warm-up, then the alternated rounds of the chosen sides on ``srv``."""
    target = srv.target()
    chosen = [s for s in SIDES if s[0] in args.sides]
    sides = [(side, (lambda m=mode, p=py: step(target, m, p, args.clients, args.duration, args.scale)))
             for side, mode, py in chosen]
    for side, mode, py in chosen:  # loads the data the first time, creates the routines, warms caches
        step(target, mode, py, args.clients, 3.0, args.scale)
    rows = []
    for r in range(args.rounds):
        got = alternated(srv, r, sides)
        for side, (res, server_s) in got.items():
            rows.append({"engine": name, "round": r, "side": side, "order": list(got), "load": _load(),
                         "tps": res.tps, "nopm": res.extra["nopm"], "tpm": res.extra["tpm"],
                         "transactions": res.transactions, "errors": dict(res.errors), "retries": res.retries,
                         "driver": res.driver,
                         "client_us_per_txn": us_per_txn(res.client_cpu_s or 0.0, res.transactions or 0),
                         "server_us_per_txn": us_per_txn(server_s, res.transactions or 0)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def table(rows: list[dict]) -> str:
    """Markdown: medians per engine and side."""
    out = ["| engine | side | rounds | TPS | NOPM | client µs/txn | server µs/txn | client share of the CPU per txn |",
           "|---|---|---|---|---|---|---|---|"]
    for eng in dict.fromkeys(r["engine"] for r in rows):
        for side, _, _ in SIDES:
            rs = [r for r in rows if r["engine"] == eng and r["side"] == side]
            if not rs:
                continue

            def med(k: str) -> float:
                return statistics.median(r[k] for r in rs)
            share = statistics.median(r["client_us_per_txn"] / (r["client_us_per_txn"] + r["server_us_per_txn"])
                                      for r in rs)
            out.append(f"| {eng} | {side} | {len(rs)} | {med('tps'):,.0f} | {med('nopm'):,.0f} | "
                       f"{med('client_us_per_txn'):,.0f} | {med('server_us_per_txn'):,.0f} | {share:.1%} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--only", choices=("pg", "mariadb"), default=None)
    ap.add_argument("--sides", type=lambda v: v.split(","), default=[s for s, _, _ in SIDES])
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if unknown := set(args.sides) - {s for s, _, _ in SIDES}:
        ap.error(f"unknown sides: {', '.join(sorted(unknown))}")
    rows: list[dict] = []
    for name, start in (("pg", servers.start_postgres), ("mariadb", servers.start_mysql)):
        if args.only and args.only != name:
            continue
        srv = start()
        try:
            rows += engine_rounds(srv, name, args)
        finally:
            srv.stop()
    print(table(rows))
    if args.out:
        Path(args.out).write_text(json.dumps({"argv": sys.argv, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
