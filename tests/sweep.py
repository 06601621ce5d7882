"""A sweep's result rows as results.json holds them, for tests that read a row by its keys.

:func:`workloads.driver.run_sweep` returns typed :class:`diag.core.schema.ResultRow` records; these tests check
the written form (its keys, a workload's own fields such as TPC-C's ``tpm``, the Dask shares), so they read
``to_dict()``: the same dict the bundle writer stores.
"""

from __future__ import annotations

from typing import Any

from workloads.driver import run_sweep


def sweep_rows(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """:func:`run_sweep`'s rows, each as results.json stores it."""
    return [r.to_dict() for r in run_sweep(*args, **kwargs)]
