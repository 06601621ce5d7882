"""The report's time-accounting section: one stacked bar per step (targets side by side) and its limit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from diag.bundle import Bundle
from reports.accounting import accounts, limit_of
from reports.charts import stacked_bars


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
                            "symptoms": list(lim.symptoms), "advice": lim.advice})
    for g in groups.values():
        g["chart"] = stacked_bars(g.pop("bars"))
    return list(groups.values())


def step_limit_finding(findings: list[Mapping[str, Any]], target: str, workload: str, clients: int) -> Mapping[str, Any] | None:
    """The ``limit`` finding of one step (the summary's "What limits it"), None when the step has none."""
    return next((f for f in findings if f.get("category") == "limit" and f.get("target") == target and
                 f.get("workload") == workload and f.get("clients") == clients), None)
