"""The report's "Blocking sessions" section: per step with lock waits, who blocked whom, how long, the chains.

Read from the blocking series through :func:`reports.rules.blocking.step_blocking` (the same numbers as
lock_contention's evidence). Steps where nobody waited for a lock are left out; a step whose waits had no
blocker in sight says so, with why when the sampler knew.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from diag.core.bundle import Bundle
from reports.model.steps import steps
from reports.rules.blocking import SHOWN_BLOCKERS, chains, step_blocking

ROWS_SHOWN = 2 * SHOWN_BLOCKERS
# A step with no blocker is listed for its unattributed waits only from this many seconds of them: one or
# two samples of a lock granted between the sampler's two catalog reads (measured: 0.1 s in a 1-client step
# with nothing planted) are not worth a section entry; lock_contention still says so when waits matter.
MIN_UNATTRIBUTED_S = 0.3


def _utc(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%H:%M:%S.%f")[:-5]


def blocking_sections(b: Bundle) -> dict[str, Any]:
    """``{"sampled": any blocking series in the bundle, "steps": [...]}``: one entry per step with lock waits."""
    out: list[dict[str, Any]] = []
    sampled = False
    for step in steps(b):
        sb = step_blocking(b, step)
        if sb is None:
            continue
        sampled = True
        if not sb.blockers and sb.unattributed_s < MIN_UNATTRIBUTED_S:
            continue
        rows = [{"pid": m.pid, "user": m.last.user, "client": m.last.client, "state": m.last.state,
                 "statement": m.last.statement, "xact_s": m.last.xact_s, "lock": m.lock,
                 "from": _utc(m.first_t), "to": _utc(m.last_t), "span_s": m.span_s,
                 "longest_s": max(m.waiter_s.values()) if m.waiter_s else None, "blocked": len(m.behind or m.blocked),
                 "blocked_s": m.behind_s or m.blocked_s, "waits_for": sorted(m.waits_for)} for m in sb.blockers[:ROWS_SHOWN]]
        out.append({"target": step.target, "workload": step.workload, "clients": step.clients,
                    "waiting_s": sb.waiting_s, "unattributed_s": sb.unattributed_s, "unattributed": sb.unattributed,
                    "more": max(0, len(sb.blockers) - ROWS_SHOWN), "rows": rows,
                    "chains": chains(sb).split("; ") if sb.blockers else []})
    return {"sampled": sampled, "steps": out}
