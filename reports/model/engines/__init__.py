"""Each engine's part of the report model, one module per engine (:mod:`reports.model.engines.pg`,
:mod:`reports.model.engines.mysql`), and the registry that finds it: :data:`MODEL_PARTS`, keyed by
:attr:`Engine.name <diag.core.engines.base.Engine.name>`. A new engine is a module here and a line there.
"""

from __future__ import annotations

from diag.core.engines import MYSQL, POSTGRES, Engine
from reports.model.engines import mysql, pg
from reports.model.engines.parts import ModelParts

MODEL_PARTS: dict[str, ModelParts] = {POSTGRES.name: pg.PARTS, MYSQL.name: mysql.PARTS}


def model_parts(engine: Engine) -> ModelParts:
    """``engine``'s part of the report model."""
    return MODEL_PARTS[engine.name]


__all__ = ["MODEL_PARTS", "ModelParts", "model_parts"]
