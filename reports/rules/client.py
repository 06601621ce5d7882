"""client_bound: the numbers are the load generator's limit, not the server's.

Three kinds of evidence, any of which fires the rule (seeds/003: sysbench used
half the machine's CPU and could not load the server):

* the client processes are saturated: each runs one query loop on one thread,
  so a client near one full CPU cannot send faster;
* the machine is busy and the clients take a large share of it, or cost much
  more CPU per transaction than the server: CPU is the scarce resource and the
  clients spend most of it;
* the server waits on the client inside transactions: for its next statement
  (ClientRead, the transaction held open, idle) or, on PostgreSQL, for it to
  take the result (ClientWrite, the socket buffer full) for most of the time.
"""

from __future__ import annotations

from typing import Any

from diag.bundle import Bundle
from reports.rules.base import Finding, num, pct, steps
from reports.rules.cpu import HOST_BUSY, cpu_use
from reports.rules.waits import MIN_WAIT_SAMPLES, sampler, wait_profile

# One client is one process with one query loop: at 80% of a CPU (sampled once
# a second, so short of 100% even when it never waits) it is the bottleneck.
CLIENT_SATURATED = 0.80
# With the host busy, clients using a third of the busy CPU leave the server at
# most two thirds of it: with the clients elsewhere it could have had half as
# much CPU again (seeds/003: sysbench took half the machine). Measured here on 2
# CPUs with nothing else running: 35-40% for point selects at 2 clients.
CLIENT_SHARE_OF_BUSY = 1 / 3
# With the host busy, a client that costs twice the server's CPU per transaction
# sets the pace of the pair: two thirds of the CPU they get goes to the client.
# Measured: 0.6-0.9x on point selects (psycopg, prepared), 0.3-0.5x on inserts
# and hot-row updates, 6-8x on a 5 MB result per transaction.
CLIENT_COST_RATIO = 2.0
# Half of the backends' sampled time waiting for the client (its next statement,
# or to take the result): the server is not what the transaction waits for.
# Normal round trips stay well below (measured: 9% with 4 clients and four
# statements per transaction on PostgreSQL, 4% on MariaDB).
CLIENT_WAIT_SHARE = 0.50


def client_bound(b: Bundle) -> list[Finding]:
    """The load generator is saturated, or crowds the server out, or the server waits on it."""
    out: list[Finding] = []
    for step in steps(b):
        ev: dict[str, Any] = {}
        reasons: list[tuple[float, str]] = []
        u = cpu_use(b, step)
        if u is not None and u.client_cores is not None:
            per_client = u.client_cores / step.clients
            ev["source"] = "per-process CPU of the client processes (psutil)"
            ev["client_cpu_cores"] = num(u.client_cores, 2)
            ev["client_cpu_per_client_pct"] = num(100 * per_client)
            ev["host_busy_pct"] = num(100 * u.host_busy)
            if u.server_cores is not None:
                ev["server_cpu_cores"] = num(u.server_cores, 2)
            if per_client >= CLIENT_SATURATED:
                reasons.append((min(1.0, per_client), f"each client process used {pct(per_client)} of a CPU"))
            if u.host_busy >= HOST_BUSY and u.busy_cores > 0:
                share = u.client_cores / u.busy_cores
                ev["client_share_of_busy_cpu_pct"] = num(100 * share)
                if share >= CLIENT_SHARE_OF_BUSY:
                    reasons.append((share, f"the clients used {pct(share)} of a saturated machine's CPU"))
                if u.server_cores:
                    ratio = u.client_cores / u.server_cores
                    ev["client_to_server_cpu_per_txn"] = num(ratio, 2)
                    if ratio >= CLIENT_COST_RATIO:
                        reasons.append((ratio / (1 + ratio), f"on a busy machine the clients spent {num(ratio, 2):g}x "
                                                             "the server's CPU per transaction"))
        p = wait_profile(b, step)
        if p is not None and p.samples >= MIN_WAIT_SAMPLES:
            share = p.share("client")
            ev["server_waits_on_client_pct"] = num(100 * share)
            ev["client_waits"] = p.describe(p.keys_of("client")) or "none"
            ev["wait_source"] = sampler(p)
            ev["backend_samples"] = p.samples
            if share >= CLIENT_WAIT_SHARE:
                reasons.append((share, f"the server waited for the client {pct(share)} of its sampled time"))
        if not reasons:
            continue
        impact, _ = max(reasons)
        out.append(step.finding(
            "client_bound", "warning", "Client-bound: " + "; ".join(r for _, r in reasons), ev,
            "The measured rate is the load generator's limit, not the server's: run the clients on another "
            "machine or give them more CPU, use more client processes, and check that the application does "
            "no slow work between statements of a transaction. Compare servers only at client counts where "
            "this finding is absent.",
            impact, share=impact))
    return out
