"""old_transaction: a session that kept its transaction open through the whole step while the workload's
changes piled up behind it (dead row versions VACUUM cannot remove; InnoDB undo the purge cannot free).

Reads each step's ``old_transaction`` (:mod:`collectors.oldest`): the other session whose transaction was
oldest at the step's end, and the cleanup backlog at the step's start and end. It fires when that
transaction was open before the step began (so for all of it) and the backlog grew over the step: the cause
of the growth is named (pid, user, client, state, how long, its last statement), the growth per transaction
is the evidence. Its cost lands later (bloat, longer scans, purge lag), so it ranks as a condition
(:data:`reports.rules.cpu.CONDITION_WEIGHT` x the share of the step's transactions whose changes it held,
at most 1).
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle
from reports.model.steps import Finding, Step, num, steps
from reports.rules.cpu import CONDITION_WEIGHT

# The backlog must grow by this many entries per transaction of the span (one changed row in ten
# transactions) and by a few hundred in all: a read-only workload, or one a holder does not hinder, stays put.
MIN_GROWTH_PER_TXN = 0.1
MIN_GROWTH = 200


def old_transaction(b: Bundle) -> list[Finding]:
    """A finding per step whose cleanup a transaction older than the step held back (module docstring)."""
    out: list[Finding] = []
    for step in steps(b):
        f = _held(step)
        if f is not None:
            out.append(f)
    return out


def _held(step: Step) -> Finding | None:
    rec = step.row.old_transaction
    if not isinstance(rec, dict) or not isinstance(rec.get("oldest"), dict):
        return None
    o: dict[str, Any] = rec["oldest"]
    vals = (o.get("xact_age_s"), rec.get("t1"), rec.get("backlog_start"), rec.get("backlog_end"), rec.get("t0"))
    tps = step.row.tps
    nums = [float(x) for x in vals if isinstance(x, (int, float))]
    if tps is None or len(nums) < len(vals):
        return None
    age, t1, b0, b1, t0 = nums
    if tps <= 0 or t1 <= t0:
        return None
    if t1 - age > step.t0:  # opened after the step began: not in the way for all of it
        return None
    txn = tps * (t1 - t0)
    growth = b1 - b0
    if growth < MIN_GROWTH or growth / txn < MIN_GROWTH_PER_TXN:
        return None
    backlog = step.engine.cleanup_backlog
    who = f"pid {o.get('pid')}" + (f", user {o['user']}" if o.get("user") else "") \
        + (f", from {o['client']}" if o.get("client") else "")
    ev: dict[str, Any] = {
        "session": who, "state": o.get("state") or "not visible", "transaction open for (s)": num(float(age)),
        "in this state for (s)": num(float(o["state_age_s"])) if isinstance(o.get("state_age_s"), (int, float)) else None,
        "last statement": str(o["query"])[:300] if o.get("query") else step.engine.last_statement_hint,
        "application": o.get("application_name") or None,
        f"{backlog} at the step's start": round(b0), f"{backlog} at its end": round(b1),
        f"{backlog} added per transaction": num(growth / txn, 2),
        "source": "pg_stat_activity backend_xmin / INNODB_TRX and the cleanup backlog at the step's start and end",
        "impact_from": "its cost lands later (bloat, purge lag): ranked as a condition"}
    if isinstance(o.get("xmin_age"), (int, float)):
        ev["snapshot age (transactions)"] = round(o["xmin_age"])
    title = (f"A transaction open for {num(float(age))} s ({who}, {o.get('state') or 'state not visible'}) holds "
             f"back cleanup: {backlog} grew by {round(growth)} during the step")
    return step.finding("old_transaction", "warning", title, ev, step.engine.old_transaction_advice,
                        CONDITION_WEIGHT * min(1.0, growth / txn), pid=o.get("pid"))
