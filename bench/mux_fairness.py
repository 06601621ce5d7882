"""How evenly one multiplexed process serves its connections, by mx_group's eager bound (issue 26;
workloads/steps/mux.py EAGER_TXNS): PostgreSQL point selects on N connections of one process for D seconds,
the bound alternating round by round; per round the transactions and how they spread over the connections
(min, 10th percentile, median, 90th, max per connection, and the share the busiest tenth ran).

    python3 -m bench.mux_fairness [--conns 100] [--seconds 4] [--rounds 5] [--eager 0,64] [--out FILE]

One process on a 2-vCPU machine: the server's backends take the other CPU and a half, as at the step's one
process per CPU. A throwaway PostgreSQL (max_connections 1100), dbdiag's sbtest1 at scale 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from array import array
from pathlib import Path
from typing import Any

from bench import many_clients as mc
from diag.core import servers
from workloads.base import ClientCtx
from workloads.clients.client import fastest_driver
from workloads.native.native import NativeClient, open_native
from workloads.native.nativelib import _native
from workloads.sysbench import PointSelect


def _open(srv: servers.ThrowawayServer, n: int) -> list[NativeClient]:
    t = srv.target()
    out = []
    for i in range(n):
        prog = PointSelect().program(ClientCtx(i, n, 1.0, seed=7))
        nc = open_native(t, "", fastest_driver(t.dbms), "read-committed", prog, ClientCtx(i, n, 1.0, seed=7).key_seed(),
                         nonblock=True)
        assert nc is not None and _native.mx_init(nc.cap, nc.state)
        out.append(nc)
    return out


def one(ncs: list[NativeClient], seconds: float, eager: int) -> dict[str, Any]:
    """Transactions per connection over ``seconds`` with the bound ``eager``."""
    group = _native.mx_group(len(ncs), True, eager)
    caps = tuple(nc.cap for nc in ncs)
    on = bytearray(b"\x01" * len(ncs))
    out, busy = array("q", bytes(16)), array("q", bytes(8 * len(ncs)))
    per = [0] * len(ncs)
    t0 = time.perf_counter_ns()
    end = t0 + int(seconds * 1e9)
    while True:
        now = time.perf_counter_ns()
        if now >= end:
            on[:] = bytes(len(ncs))
        _, errs = _native.mx_run(group, caps, on, max(end, now + 20_000_000), out, busy)
        assert not errs, errs
        for i, c in enumerate(array("q", _native.mx_take(group)[0])):
            per[i] += c
        if now >= end and not any(busy):
            break
    wall = (time.perf_counter_ns() - t0) / 1e9
    s = sorted(per)
    q = lambda f: s[min(len(s) - 1, int(f * len(s)))]  # noqa: E731
    top = sum(s[-max(1, len(s) // 10):])
    waits, _, early = _native.mx_stats(group)
    return {"eager": eager, "tps": round(sum(per) / wall), "min": s[0], "p10": q(0.1), "median": q(0.5),
            "p90": q(0.9), "max": s[-1], "busiest_tenth_share": round(top / sum(per), 3),
            "early_per_txn": round(early / sum(per), 3), "waits_per_txn": round(waits / sum(per), 4)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conns", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--eager", default="0,64")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    bounds = [int(x) for x in a.eager.split(",")]
    srv = mc.start("pg")
    runs: list[dict[str, Any]] = []
    try:
        mc.ours(srv, 2, 1)  # loads the table and warms the cache
        ncs = _open(srv, a.conns)
        try:
            for r in range(a.rounds):
                for e in (bounds if r % 2 == 0 else bounds[::-1]):
                    got = {"round": r + 1, **one(ncs, a.seconds, e)}
                    runs.append(got)
                    print(json.dumps(got), flush=True)
        finally:
            for nc in ncs:
                nc.close()
    finally:
        srv.stop()
    summary = {str(e): {k: statistics.median(x[k] for x in runs if x["eager"] == e)
                        for k in runs[0] if k not in ("round", "eager")} for e in bounds}
    print(json.dumps(summary), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"conns": a.conns, "seconds": a.seconds, "runs": runs,
                                           "medians": summary}, indent=1))


if __name__ == "__main__":
    main()
