"""limit: every step names the resource that limits it (reports.model.limits), from its time accounting.

One finding per step that can be accounted (:func:`reports.model.accounting.account_step`). Its impact is the
share of the transaction's time the limit explains (the CPU parts for a CPU limit, the commit-flush wait for
the log device, the round trips and client CPU for round trips...), so it ranks with the wait findings.
The evidence carries the accounting (µs per transaction of each component) and the symptoms: waits for
something that is not saturated, shown as queueing under the limit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from diag.core.bundle import Bundle
from reports.model.accounting import Limit, StepAccounting, accounts, limit_of
from reports.model.steps import Finding, Step, num
from reports.rules.blocking import blocking_evidence, title_part

StepKey = tuple[str, str, int]  # (target, workload, clients)

# A limit that makes the measurement the load generator's, not the server's, is a warning; the rest say
# what any benchmark step has: a limit.
_WARNING_KINDS = frozenset({"client_cpu"})


def step_limits(b: Bundle) -> dict[StepKey, tuple[Step, StepAccounting, Limit]]:
    """Every accounted step's accounting and limit, by (target, workload, clients)."""
    return {s.key: (s, acc, limit_of(b, s, acc)) for s, acc in accounts(b)}


def key_of(f: Finding) -> StepKey | None:
    """The step a finding is about (None for a finding about a whole target)."""
    return None if f.workload is None or f.clients is None else (f.target, f.workload, f.clients)


def rank_under_limits(found: Iterable[Finding]) -> list[Finding]:
    """The ``limit`` finding ranks first for its step: no other finding of that step that is not critical
    (a result that is not durable or a lost server outranks any speed finding) keeps an impact above the
    limit's. A condition whose proxy impact exceeds it (a busy host, context switches) is capped there,
    its own value kept in ``extra["impact_before_limit"]``; findings.derive_findings breaks the tie."""
    found = list(found)
    limits = {key_of(f): f.impact for f in found if f.category == "limit"}
    out = []
    for f in found:
        cap = limits.get(key_of(f))
        if f.category != "limit" and f.severity != "critical" and cap is not None and f.impact > cap:
            f = replace(f, impact=cap, extra={**f.extra, "impact_before_limit": f.impact})
        out.append(f)
    return out


def step_limit(b: Bundle) -> list[Finding]:
    """One ``limit`` finding per accounted step."""
    out: list[Finding] = []
    for step, acc, lim in step_limits(b).values():
        ev: dict[str, Any] = {k: v for k, v in lim.evidence.items() if k != "window"}
        if lim.utilisation is not None:
            ev["utilisation_pct"] = num(100 * lim.utilisation)
        ev["wall_us_per_txn"] = num(acc.wall_us_per_txn)
        ev["accounting_us_per_txn"] = ", ".join(f"{c.key} {num(c.us_per_txn):g} ({100 * c.share:.0f}%)"
                                                for c in acc.components if c.us_per_txn > 0 or
                                                c.key == "unaccounted")
        if "parts_exceed_wall_us" in acc.evidence:  # the µs above add to more than wall_us_per_txn: say so
            ev["parts_exceed_wall_us"] = acc.evidence["parts_exceed_wall_us"]
            ev["accounting_note"] = acc.evidence.get("note", "")
        if lim.symptoms:
            ev["symptoms"] = "; ".join(lim.symptoms)
        title = lim.title
        if lim.kind == "lock":  # the holder, when the blocking sampler saw one (lock_contention has the rest)
            title += title_part(b, step)
            ev.update({k: v for k, v in blocking_evidence(b, step).items()
                       if k in ("blocker", "blocked_for_s", "blocking_chain")})
        severity = "warning" if lim.kind in _WARNING_KINDS else "info"
        out.append(step.finding("limit", severity, title, ev, lim.advice, lim.impact,
                                kind=lim.kind, utilisation=lim.utilisation, symptoms=list(lim.symptoms),
                                saturated=lim.saturated))
    return out
