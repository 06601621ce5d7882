"""Whether the native executor (``workloads/native/_native.c``) can run here for an engine.

Kept apart from :mod:`workloads.native.native` so the client picker (:mod:`workloads.clients.client`) can name the
loop on the start-up line without importing the workload base (which imports the client picker). The compiled
module is :mod:`workloads.native.cext`'s; the client library each engine opens is its native binding's
(``NativeBinding.library`` in :mod:`workloads.engines`).
"""

from __future__ import annotations

from diag.core.engines import Engine
from workloads.engines import workload_parts
from workloads.native.cext import LABEL, STALE, _native, enabled, stale_reason


def available(engine: Engine) -> bool:
    """Whether the native executor can run for ``engine`` here (module built, library found)."""
    return enabled() and workload_parts(engine).native.library() is not None


__all__ = ["LABEL", "STALE", "_native", "available", "enabled", "stale_reason"]
