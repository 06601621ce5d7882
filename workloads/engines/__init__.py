"""Each engine's part of the workloads layer, one module per engine (:mod:`workloads.engines.pg`,
:mod:`workloads.engines.mysql`: its clients, bulk load, native-executor binding, watch), and the registry that finds
it: :data:`WORKLOAD_PARTS`, keyed by :attr:`Engine.name <diag.core.engines.base.Engine.name>`. A new engine is a
module here and a line there.
"""

from __future__ import annotations

from diag.core.engines import MYSQL, POSTGRES, Engine
from workloads.engines import mysql, pg
from workloads.engines.parts import NativeBinding, WatchReading, WorkloadParts

WORKLOAD_PARTS: dict[str, WorkloadParts] = {POSTGRES.name: pg.PARTS, MYSQL.name: mysql.PARTS}


def workload_parts(engine: Engine) -> WorkloadParts:
    """``engine``'s part of the workloads layer."""
    return WORKLOAD_PARTS[engine.name]


__all__ = ["WORKLOAD_PARTS", "NativeBinding", "WatchReading", "WorkloadParts", "workload_parts"]
