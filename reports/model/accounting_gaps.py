"""What the time accounting could not see, and why: the run-queue part it can measure and one sentence for the
unaccounted rest (:mod:`reports.model.accounting`, the limit's evidence in :mod:`reports.model.limits`).

Unaccounted time is the mean transaction's wall time less every measured part. Where it is 10% of the
transaction or more, :func:`unaccounted_why` says which part the sources could not see, from the accounting's
own evidence: a server thread the wait sampler saw active with no wait event while it was neither on a CPU
nor on a run queue (a wait the server does not name), a source that did not run (no wait samples, no server
CPU, no run-queue time), and the sampling error of the wait samples themselves.
"""

from __future__ import annotations

import math
from typing import Any

from diag.core.engines import Engine
from reports.model.cpu import CpuUse
from reports.model.steps import num, pct

__all__ = ["UNACCOUNTED_SAY", "run_queue_us", "unaccounted_why"]

# Unaccounted time from this share of the mean transaction up is explained in a sentence (issue 22: under 10%
# on the built-in workloads; where larger, the report says which part the sources could not see and why).
UNACCOUNTED_SAY = 0.10


def run_queue_us(u: CpuUse | None, transactions: int) -> float:
    """µs per transaction the server's threads waited on a run queue for a CPU (/proc schedstat over the
    window); 0.0 when not measured (an older bundle, a remote server, a kernel without schedstats)."""
    if u is None or u.server_run_delay_s is None or transactions <= 0:
        return 0.0
    return u.server_run_delay_s * 1e6 / transactions


def unaccounted_why(engine: Engine, ev: dict[str, Any], rest_us: float, wall_us: float) -> str | None:
    """One sentence on the unaccounted ``rest_us`` of a transaction of ``wall_us`` (µs) when it is at least
    :data:`UNACCOUNTED_SAY` of it, from the accounting's evidence ``ev``; None below that."""
    if wall_us <= 0 or rest_us / wall_us < UNACCOUNTED_SAY:
        return None
    why: list[str] = []
    if "waits" in ev:
        why.append("no wait samples, so the time the server's sessions waited (for the client, locks, flushes) "
                   "was not seen")
    if "server_cpu" in ev:
        why.append("no per-process CPU of the server (--no-collect, or a server on another host), so its CPU "
                   "time was not seen")
    hidden = ev.get("cpu_sampled_not_on_cpu_us")
    if isinstance(hidden, (int, float)) and hidden > 0:
        rq = "" if "run_queue_us_per_txn" in ev else " (its run-queue time was not read: no schedstats here)"
        why.append(f"{num(hidden):g} µs the server showed its sessions active with no wait event while they were "
                   f"neither on a CPU nor waiting for one{rq}: {engine.unnamed_waits}")
    n = ev.get("backend_samples")
    if isinstance(n, int) and n > 0:
        why.append(f"the {n} wait samples place each part only to about ±{pct(1 / math.sqrt(n))} of the "
                   "transaction (one sample's weight is the wall time over the samples)")
    head = f"{num(rest_us):g} µs per transaction ({pct(rest_us / wall_us)}) is unaccounted"
    return f"{head}: " + "; ".join(why) + "." if why else \
        f"{head}: no source covers it (time between the client's and the server's measurements)."
