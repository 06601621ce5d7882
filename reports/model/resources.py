"""What each step cost per transaction, from the bundle's host series: server and client CPU, context switches.

Shared by the report's resource table (:mod:`reports.views.render`) and the
comparison of two steps (:mod:`reports.model.compare`), so both show the same numbers.
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle
from reports.model.series import group_series, window_sum


def step_resources(b: Bundle) -> list[dict[str, Any]]:
    """Per result row: server and client CPU µs per transaction, context switches per transaction."""
    out = []
    client = group_series(b, "client")
    for r in b.rows:
        t0, t1, txn = r.t_start, r.t_end, r.transactions or 0
        row: dict[str, Any] = {"target": r.target, "workload": r.workload, "clients": r.clients}
        if t0 and t1 and txn:
            srv = window_sum(group_series(b, "server", r.target), t0, t1)
            cli = window_sum(client, t0, t1)
            if srv:
                row["server_cpu_us_per_txn"] = (srv[0] + srv[1]) * 1e6 / txn
                row["server_user_us_per_txn"] = srv[0] * 1e6 / txn
                row["server_sys_us_per_txn"] = srv[1] * 1e6 / txn
                row["server_ctx_per_txn"] = (srv[2] + srv[3]) / txn
            # The driver's own measure covers exactly the measured window; the host series only
            # knows the clients from the step's start, so its first interval lacks a baseline.
            if r.client_cpu_s is not None:
                row["client_cpu_us_per_txn"] = r.client_cpu_s * 1e6 / txn
            elif cli:
                row["client_cpu_us_per_txn"] = (cli[0] + cli[1]) * 1e6 / txn
        out.append(row)
    return out
