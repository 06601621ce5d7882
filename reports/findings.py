"""Findings: ranked, evidence-backed statements derived from a bundle (pure functions).

Each rule is a function ``rule(bundle) -> list[Finding]`` listed in ``RULES`` (an
explicit registry). A rule fires only on its evidence; thresholds are module
constants with the reason next to them (see the modules of :mod:`reports.rules`,
and :mod:`reports.rules.base` for what ``impact`` measures).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from diag.bundle import Bundle
from reports.rules import checkpoints, client, cpu, durability, limit, lost, waits
from reports.rules.base import SEVERITIES, Finding

__all__ = ["RULES", "SEVERITIES", "Finding", "Rule", "derive_findings"]

Rule = Callable[[Bundle], list[Finding]]
RULES: tuple[Rule, ...] = (
    lost.server_lost,
    durability.durability_unsafe,
    durability.durability_implausible,
    limit.step_limit,
    waits.commit_flush_bound,
    waits.lock_contention,
    waits.latch_contention,
    waits.io_read_bound,
    cpu.cpu_parse_plan,
    cpu.cpu_bound,
    client.client_bound,
    checkpoints.checkpoint_pressure,
    cpu.context_switch_storm,
    cpu.host_contention,
)


def derive_findings(b: Bundle) -> list[dict[str, Any]]:
    """All findings of all rules, highest impact first (ties: severity, then target and title)."""
    found: list[Finding] = []
    for rule in RULES:
        found.extend(rule(b))
    order = {s: i for i, s in enumerate(SEVERITIES)}
    found.sort(key=lambda f: (-f.impact, order.get(f.severity, 9), f.target, f.title))
    return [f.to_dict() for f in found]
