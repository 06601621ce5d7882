"""Each engine's sources, one package per engine (collectors/pg/, collectors/mysql/: its collectors, their SQL in
``sql/``, its process roles), and the registry that finds them: :data:`SOURCE_PARTS`, keyed by
:attr:`Engine.name <diag.core.engines.base.Engine.name>`. A new engine is a package and a line here. Imported at the
top: a broken collector module fails the run at start, it does not silently remove that engine's collectors.
"""

from __future__ import annotations

from collectors import mysql, pg
from collectors.engine_parts import SourceParts
from diag.core.engines import MYSQL, POSTGRES, Engine

SOURCE_PARTS: dict[str, SourceParts] = {POSTGRES.name: pg.PARTS, MYSQL.name: mysql.PARTS}


def source_parts(engine: Engine) -> SourceParts:
    """``engine``'s sources."""
    return SOURCE_PARTS[engine.name]


__all__ = ["SOURCE_PARTS", "SourceParts", "source_parts"]
