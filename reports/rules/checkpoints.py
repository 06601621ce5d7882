"""checkpoint_pressure: checkpoints forced by WAL volume (PostgreSQL), redo log nearly full (InnoDB).

Each engine judges its own pressure from its own counters: its module in :mod:`reports.rules.engines`
(``RuleParts.checkpoint_pressure``: :func:`reports.rules.engines.pg.checkpoint_pressure`,
:func:`reports.rules.engines.mysql.checkpoint_pressure`).
"""

from __future__ import annotations

from diag.core.bundle import Bundle
from reports.model.steps import Finding, steps
from reports.rules.engines import rule_parts


def checkpoint_pressure(b: Bundle) -> list[Finding]:
    """Each step's engine judges its own checkpoint pressure (its module in :mod:`reports.rules.engines`)."""
    out: list[Finding] = []
    for step in steps(b):
        f = rule_parts(step.engine).checkpoint_pressure(b, step)
        if f is not None:
            out.append(f)
    return out
