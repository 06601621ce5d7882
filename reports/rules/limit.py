"""limit: every step names the resource that limits it (reports.limits), from its time accounting.

One finding per step that can be accounted (:func:`reports.accounting.account_step`). Its impact is the
share of the transaction's time the limit explains (the CPU parts for a CPU limit, the commit-flush wait for
the log device, the round trips and client CPU for round trips...), so it ranks with the wait findings.
The evidence carries the accounting (µs per transaction of each component) and the symptoms: waits for
something that is not saturated, shown as queueing under the limit.
"""

from __future__ import annotations

from typing import Any

from diag.bundle import Bundle
from reports.accounting import accounts, limit_of
from reports.rules.base import Finding, num

# A limit that makes the measurement the load generator's, not the server's, is a warning; the rest say
# what any benchmark step has: a limit.
_WARNING_KINDS = frozenset({"client_cpu"})


def step_limit(b: Bundle) -> list[Finding]:
    """One ``limit`` finding per accounted step."""
    out: list[Finding] = []
    for step, acc in accounts(b):
        lim = limit_of(b, step, acc)
        ev: dict[str, Any] = {k: v for k, v in lim.evidence.items() if k != "window"}
        if lim.utilisation is not None:
            ev["utilisation_pct"] = num(100 * lim.utilisation)
        ev["wall_us_per_txn"] = num(acc.wall_us_per_txn)
        ev["accounting_us_per_txn"] = ", ".join(f"{c.key} {num(c.us_per_txn):g} ({100 * c.share:.0f}%)"
                                                for c in acc.components if c.us_per_txn > 0 or
                                                c.key == "unaccounted")
        if lim.symptoms:
            ev["symptoms"] = "; ".join(lim.symptoms)
        severity = "warning" if lim.kind in _WARNING_KINDS else "info"
        out.append(step.finding("limit", severity, lim.title, ev, lim.advice, lim.impact,
                                kind=lim.kind, utilisation=lim.utilisation, symptoms=list(lim.symptoms)))
    return out
