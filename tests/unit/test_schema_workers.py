"""The Dask part of a result row (``--workers``): validated when the bundle loads, typed on request."""

from __future__ import annotations

from typing import Any

import pytest

from diag.core.schema import BundleFormatError, ResultRow


def _row(**extra: Any) -> dict[str, Any]:
    share = {"worker": "tcp://10.0.0.2:40001", "host": "c1", "clients": 2, "transactions": 1000, "tps": 500.0,
             "latency_ms": {"p95": 1.0}, "host_cpu_busy_pct": 55.0, "client_cpu_pct": 30.0, "saturated": False,
             "histogram": "artifacts/workload--db--point-select--c4--w0.hdr"}
    base = {"target": "db", "workload": "point-select", "clients": 4, "transactions": 1000, "tps": 500.0,
            "complete": False, "workers": [share],
            "workers_lost": [{"worker": "tcp://10.0.0.3:40001", "clients": 2, "reason": "left", "share": 1}],
            "lost_clients": 2, "lost_transactions": 321}
    return {**base, **extra}


def test_a_dask_row_loads_and_types() -> None:
    w = ResultRow.from_dict(_row()).step_workers
    assert w is not None and len(w.shares) == 1 and w.shares[0].clients == 2 and w.lost[0].reason == "left"
    assert (w.lost_clients, w.lost_transactions) == (2, 321)
    assert ResultRow.from_dict(_row()).to_dict()["workers"][0]["worker"] == "tcp://10.0.0.2:40001"


def test_a_local_row_has_no_workers() -> None:
    row = _row()
    for k in ("workers", "workers_lost", "lost_clients", "lost_transactions"):
        row.pop(k)
    assert ResultRow.from_dict(row).step_workers is None


@pytest.mark.parametrize("bad, match", [
    ({"lost_clients": 3}, "lost_clients 3 is not the lost workers' 2 clients"),
    ({"workers": [{"worker": "w", "clients": 1, "transactions": 1, "tps": 1.0, "host_cpu_busy_pct": 150}]},
     "host_cpu_busy_pct should be 0..100"),
    ({"workers": [{"worker": "w", "transactions": 1, "tps": 1.0}]}, "clients is missing"),
    ({"workers": "w"}, "workers should be"),
])
def test_bad_worker_fields_name_the_row(bad: dict[str, Any], match: str) -> None:
    with pytest.raises(BundleFormatError, match=match):
        ResultRow.from_dict(_row(**bad), "results[3]")
