"""Findings: ranked, evidence-backed statements derived from a bundle (pure functions).

Each rule is a function ``rule(bundle) -> list[Finding]`` listed in ``RULES`` (an
explicit registry). A rule fires only on its evidence; thresholds are module
constants with the reason next to them (see the modules of :mod:`reports.rules`,
and :mod:`reports.rules.base` for what ``impact`` measures).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from diag.core.bundle import Bundle
from reports.rules import (cache, checkpoints, churn, client, cpu, durability, limit, lost, noise, oldxact, scans,
                           spills, statements, symptoms, watch)
from reports.model.steps import Finding
from reports.rules.base import SEVERITIES

__all__ = ["RULES", "SEVERITIES", "Finding", "Rule", "derive_findings"]

Rule = Callable[[Bundle], list[Finding]]
RULES: tuple[Rule, ...] = (
    lost.server_lost,
    lost.step_aborted,
    lost.statement_stuck,
    durability.durability_unsafe,
    durability.durability_implausible,
    limit.step_limit,
    symptoms.commit_flush_bound,
    symptoms.lock_contention,
    symptoms.latch_contention,
    symptoms.io_read_bound,
    cache.buffer_pool_misses,
    cpu.cpu_parse_plan,
    symptoms.cpu_bound,
    client.client_bound,
    checkpoints.checkpoint_pressure,
    cpu.context_switch_storm,
    symptoms.host_contention,
    statements.full_scan,
    scans.table_scan,
    oldxact.old_transaction,
    statements.statement_hotspot,
    spills.temp_spill,
    churn.connection_churn,
    noise.noisy_measurement,
    noise.unsteady_window,
    watch.client_server_disagree,
)


def derive_findings(b: Bundle) -> list[dict[str, Any]]:
    """All findings of all rules, highest impact first (ties: critical, a step's limit, severity, target, title);
    no finding of a step ranks above its limit unless it is critical (:func:`limit.rank_under_limits`)."""
    found: list[Finding] = []
    for rule in RULES:
        found.extend(rule(b))
    found = limit.rank_under_limits(found)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    found.sort(key=lambda f: (-f.impact, f.severity != "critical", f.category != "limit", order.get(f.severity, 9),
                              f.target, f.title))
    return [f.to_dict() for f in found]
