"""Each engine's part of the findings rules, one module per engine (:mod:`reports.rules.engines.pg`,
:mod:`reports.rules.engines.mysql`), and the registry that finds it: :data:`RULE_PARTS`, keyed by
:attr:`Engine.name <diag.core.engines.base.Engine.name>`. A new engine is a module here and a line there.
"""

from __future__ import annotations

from diag.core.engines import MYSQL, POSTGRES, Engine
from reports.rules.engines import mysql, pg
from reports.rules.engines.parts import RuleParts

RULE_PARTS: dict[str, RuleParts] = {POSTGRES.name: pg.PARTS, MYSQL.name: mysql.PARTS}


def rule_parts(engine: Engine) -> RuleParts:
    """``engine``'s part of the findings rules."""
    return RULE_PARTS[engine.name]


__all__ = ["RULE_PARTS", "RuleParts", "rule_parts"]
