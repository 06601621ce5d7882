"""The report's time-accounting section: one stacked bar per step (targets side by side) and its limit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from diag.core.bundle import Bundle
from reports.model.accounting import StepAccounting, accounts, limit_of
from reports.views.charts import stacked_bars


def accounting_view(b: Bundle) -> list[dict[str, Any]]:
    """Per (workload, clients), in run order: the bar chart of every target's accounting and their limits."""
    groups: dict[tuple[str, int], dict[str, Any]] = {}
    for step, acc in accounts(b):
        g = groups.setdefault((step.workload, step.clients), {"workload": step.workload, "clients": step.clients,
                                                              "bars": [], "limits": []})
        lim = limit_of(b, step, acc)
        parts = [(c.key, c.label, c.share, c.us_per_txn) for c in acc.components if c.share > 0]
        g["bars"].append((f"{step.target} ({acc.wall_us_per_txn:,.0f} µs)", parts))
        g["limits"].append({"target": step.target, "title": lim.title, "kind": lim.kind,
                            "symptoms": list(lim.symptoms), "advice": lim.advice, "excess": excess_note(acc)})
    for g in groups.values():
        g["chart"] = stacked_bars(g.pop("bars"))
    return list(groups.values())


def excess_note(acc: StepAccounting) -> str:
    """Where the parts add to more than the wall time, that sentence (the bar's shares are of their sum); where
    10% or more of the transaction is unaccounted, which part the sources could not see and why; else ""."""
    over = acc.evidence.get("parts_exceed_wall_us")
    if not isinstance(over, (int, float)) or over <= 0:
        return str(acc.evidence.get("unaccounted_why") or "").rstrip(".")
    used = sum(c.us_per_txn for c in acc.components)
    return (f"the parts add to {used:,.0f} µs per transaction, {over:,.0f} µs more than the wall time of "
            f"{acc.wall_us_per_txn:,.0f} µs (server background CPU and sampling error), so the bar's shares are "
            "of the parts' sum and unaccounted is 0")


def step_limit_finding(findings: Sequence[Mapping[str, Any]], target: str, workload: str, clients: int) -> Mapping[str, Any] | None:
    """The ``limit`` finding of one step (the summary's "What limits it"), None when the step has none."""
    return next((f for f in findings if f.get("category") == "limit" and f.get("target") == target and
                 f.get("workload") == workload and f.get("clients") == clients), None)
