"""Findings: ranked, evidence-backed statements derived from a bundle (pure functions).

Each rule is a function ``rule(bundle) -> list[Finding]`` listed in ``RULES`` (an
explicit registry). A rule fires only on its evidence; thresholds are module
constants with the reason next to them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from diag.bundle import Bundle

SEVERITIES = ("critical", "warning", "info")


@dataclass(frozen=True)
class Finding:
    """One diagnosis: what, how sure, on what numbers, what to do, how much it matters."""

    category: str
    severity: str
    target: str
    title: str
    evidence: dict[str, Any]
    advice: str
    impact: float
    workload: str | None = None
    clients: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Rule = Callable[[Bundle], list[Finding]]
RULES: tuple[Rule, ...] = ()


def derive_findings(b: Bundle) -> list[dict[str, Any]]:
    """All findings of all rules, highest impact first (ties: severity, then title)."""
    found: list[Finding] = []
    for rule in RULES:
        found.extend(rule(b))
    order = {s: i for i, s in enumerate(SEVERITIES)}
    found.sort(key=lambda f: (-f.impact, order.get(f.severity, 9), f.target, f.title))
    return [f.to_dict() for f in found]
