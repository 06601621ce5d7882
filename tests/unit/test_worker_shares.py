"""A step spread over Dask workers: its clients' indexes and their pacing are the step's, not the worker's.

Each worker runs a share of the step's clients in its own pool (``ClientSpec`` of that share). A client's
index (TPC-C: home warehouse = index mod W + 1) must count across workers, and ``--rate`` (the step's total)
must be split over all the step's clients, so the workers together send R, not R per worker. The end-to-end
check of the rate on real workers is in tests/integration/test_dask_workers.py.
"""

from __future__ import annotations

import pytest

from diag.core.db import DriverInfo
from diag.core.targets import parse_target
from workloads.base import ClientCtx
from workloads.remote.dask_steps import share_starts, split_clients
from workloads.steps.loop import ClientSpec
from workloads.tpcc.tpcc import Tpcc


def _share_specs(n: int, workers: int, rate: float | None, scale: float = 2.0) -> list[ClientSpec]:
    """The ClientSpec each worker's pool gets for ``n`` clients, as the Dask path builds it."""
    split = split_clients(n, workers)
    target = parse_target("postgresql://u@127.0.0.1:1/db")
    drv = DriverInfo("psycopg", "0", None)
    return [ClientSpec(target, "PostgreSQL", drv, Tpcc(), k, scale, "prepared", "read-committed", 10, rate, False,
                       7, "continue", first, n) for k, first in zip(split, share_starts(split))]


def _ctxs(specs: list[ClientSpec]) -> list[ClientCtx]:
    return [s.ctx(i) for s in specs for i in range(s.clients)]


@pytest.mark.parametrize("n,workers", [(2, 2), (4, 2), (5, 2), (7, 3), (3, 5)])
def test_every_client_of_the_step_has_its_own_index(n: int, workers: int) -> None:
    ctxs = _ctxs(_share_specs(n, workers, None))
    assert sorted(c.index for c in ctxs) == list(range(n))
    assert all(c.clients == n for c in ctxs)


def test_each_warehouse_gets_a_home_client_across_workers() -> None:
    """Two warehouses, two workers with one client each: before the fix both clients were index 0 (home 1)."""
    ctxs = _ctxs(_share_specs(2, 2, None, scale=2.0))
    assert sorted(c.index % 2 + 1 for c in ctxs) == [1, 2]


@pytest.mark.parametrize("n,workers", [(4, 2), (5, 2), (1, 2), (6, 4)])
def test_the_workers_together_send_the_rate(n: int, workers: int) -> None:
    specs = _share_specs(n, workers, 120.0)
    assert sum(s.clients * s.client_rate() for s in specs) == pytest.approx(120.0)


def test_a_local_pool_is_the_whole_step() -> None:
    """Without workers (first_index 0, step_clients 0) a pool's clients are the step's, as before."""
    target = parse_target("postgresql://u@127.0.0.1:1/db")
    spec = ClientSpec(target, "PostgreSQL", DriverInfo("psycopg", "0", None), Tpcc(), 4, 1.0, "prepared",
                      "read-committed", 10, 100.0, False, 7)
    assert [spec.ctx(i).index for i in range(4)] == [0, 1, 2, 3] and spec.ctx(0).clients == 4
    assert spec.client_rate() == 25.0
    assert ClientSpec(target, "PostgreSQL", DriverInfo("psycopg", "0", None), Tpcc(), 4, 1.0, "prepared",
                      "read-committed", 10, None, False, 7).client_rate() == 0
