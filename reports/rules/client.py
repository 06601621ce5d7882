"""client_bound: the numbers are the load generator's limit, not the server's.

Only client CPU evidence fires the rule (seeds/003: sysbench used half the
machine's CPU and could not load the server):

* the client processes are saturated: each runs one query loop on one thread,
  so a client near one full CPU cannot send faster;
* the clients spend over half of each transaction's wall time on their own
  CPU (reports.model.accounting): their work is the serial bottleneck;
* the machine is busy and the clients take most of the CPU the run's processes
  got, or cost much more CPU per transaction than the server: CPU is the scarce
  resource and the clients spend most of it.

The server waiting for the next statement is not such evidence: at low client
CPU it is the round trips (issue 12: a 7-statement transaction at 2 clients,
each client 19% busy, was called client-bound). The ``limit`` rule names that
case; this rule only reports the server's client waits beside CPU evidence.

It fires only where that evidence made the clients the step's limit (the same tests, in reports.model.limits),
with impact = the share of the transaction's time the clients explain (their CPU and the round trips to
them), the limit's own share, so it never outranks the limit.
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle
from reports.model.cpu import HOST_BUSY, cpu_use
# the thresholds are the limit's (reports.model.limits): this finding says why the clients are the limit it named
from reports.model.limits import (CLIENT_COST_RATIO, CLIENT_MAJORITY, CLIENT_SATURATED, CLIENT_TIME_SHARE,
                            OWN_SHARE_OF_BUSY)
from reports.model.steps import Finding, num, pct
from reports.model.wait_profiles import MIN_WAIT_SAMPLES, sampler, wait_profile
from reports.rules.limit import step_limits


def client_bound(b: Bundle) -> list[Finding]:
    """The load generator is saturated, or crowds the server out, or the server waits on it."""
    out: list[Finding] = []
    for step, acc, lim in step_limits(b).values():
        if lim.kind != "client_cpu":  # the same evidence names the limit (reports.model.limits): never a rival to it
            continue
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
            busy = acc.share("client_cpu")
            if busy >= CLIENT_TIME_SHARE:
                ev["client_cpu_share_of_txn_pct"] = num(100 * busy)
                reasons.append((busy, f"the clients spent {pct(busy)} of each transaction's time on their own CPU"))
            own = u.client_cores + (u.server_cores or 0.0)
            # only when the run itself saturates the host: a host kept busy by others says nothing of it
            if u.host_busy >= HOST_BUSY and own > 0 and own >= OWN_SHARE_OF_BUSY * u.busy_cores:
                share = u.client_cores / own
                ev["client_share_of_run_cpu_pct"] = num(100 * share)
                if share >= CLIENT_MAJORITY:
                    reasons.append((share, f"on a saturated machine the clients used {pct(share)} of the CPU "
                                           "the server and clients got"))
            if u.host_busy >= HOST_BUSY and u.server_cores:
                ratio = u.client_cores / u.server_cores
                ev["client_to_server_cpu_per_txn"] = num(ratio, 2)
                if ratio >= CLIENT_COST_RATIO:
                    reasons.append((ratio / (1 + ratio), f"on a busy machine the clients spent {num(ratio, 2):g}x "
                                                         "the server's CPU per transaction"))
        if not reasons:
            continue
        p = wait_profile(b, step)
        if p is not None and p.samples >= MIN_WAIT_SAMPLES:
            ev["server_waits_on_client_pct"] = num(100 * p.share("client"))
            ev["client_waits"] = p.describe(p.keys_of("client")) or "none"
            ev["wait_source"] = sampler(p)
            ev["backend_samples"] = p.samples
        # impact: the share of the transaction's time the clients explain (their CPU and the round trips to
        # them, from the accounting), the limit's own share: ranked just below the limit (findings' tie-break)
        impact = acc.share("client_cpu") + acc.share("round_trips")
        ev["client_cpu_share_of_txn_pct"] = num(100 * acc.share("client_cpu"))
        ev["round_trips_share_of_txn_pct"] = num(100 * acc.share("round_trips"))
        out.append(step.finding(
            "client_bound", "warning", "Client-bound: " + "; ".join(r for _, r in reasons), ev,
            "The measured rate is the load generator's limit, not the server's: run the clients on another "
            "machine or give them more CPU, use more client processes, and check that the application does "
            "no slow work between statements of a transaction. Compare servers only at client counts where "
            "this finding is absent.",
            impact, share=impact))
    return out
