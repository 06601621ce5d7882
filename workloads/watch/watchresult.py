"""The result row of one window of ``dbdiag watch``: the same row a run's step has, filled from the server.

A window is a step (../shared/ARCHITECTURE.md): target, a workload name (``watch#NN``,
so each window is a step of its own), clients, a measured window and its counts. Here
the counts come from :mod:`workloads.watch.watch_counters` and the client count from the
sessions the watch saw: ``clients`` is the mean number of the workload's sessions
(PostgreSQL: connected ones, dbdiag's own left out; MySQL/MariaDB: sessions running a
statement, as its own idle ones cannot be told apart without performance_schema), at
least 1. The row says ``source: "server"`` and how it counted (``counted``). What the
load command printed (client side) goes in ``client``; the driver's fields a server
cannot give (latency percentiles, client CPU of our own processes) are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from diag.core.schema import ResultRow

from workloads.watch.progress_lines import ProgressPoint
from workloads.watch.watch_counters import WindowCounts

WORKLOAD_PREFIX = "watch#"
# A server keeps no per-transaction latencies: the percentiles a driver's row has are not known (None).
NO_PERCENTILES = {"p50": None, "p95": None, "p99": None, "p999": None, "max": None}


def window_name(index: int) -> str:
    """The workload name of window ``index`` (1-based): ``watch#01``."""
    return f"{WORKLOAD_PREFIX}{index:02d}"


def is_watch_row(row: Mapping[str, Any]) -> bool:
    return str(row.get("workload") or "").startswith(WORKLOAD_PREFIX)


def mean_clients(sessions: Sequence[int]) -> int:
    """The window's client count: the mean of the sessions seen, rounded, at least 1."""
    return max(1, round(sum(sessions) / len(sessions))) if sessions else 1


def client_side(points: Sequence[tuple[float, ProgressPoint]], t0: float, t1: float) -> dict[str, Any] | None:
    """The load tool's own figures for the window [t0, t1] (Unix s): the mean of its interval lines
    stamped inside (``points``: (stamp, point)), or None when it printed none there."""
    inside = [p for t, p in points if t0 < t <= t1]
    if not inside:
        return None
    out: dict[str, Any] = {"tool": inside[0].tool, "lines": len(inside),
                           "tps": round(sum(p.tps for p in inside) / len(inside), 2)}
    qps = [p.qps for p in inside if p.qps is not None]
    if qps:
        out["qps"] = round(sum(qps) / len(qps), 2)
    lat = [p.latency_ms for p in inside if p.latency_ms is not None]
    if lat:
        out["latency_ms"] = round(sum(lat) / len(lat), 3)
        out["latency_kind"] = inside[0].latency_kind
    return out


def window_row(target: str, product: str, index: int, t0: float, t1: float, counts: WindowCounts,
               sessions: Sequence[int], hidden: int = 0) -> ResultRow:
    """The record of one window before the step hooks add their parts (statements, profile).

    ``t0``/``t1``: the window in Unix s; ``sessions``: the workload's sessions at each look inside it.
    """
    secs = max(t1 - t0, 1e-9)
    txn = max(0, round(counts.transactions))
    row: dict[str, Any] = {
        "target": target, "engine": product, "workload": window_name(index), "clients": mean_clients(sessions),
        "measured_s": round(secs, 3), "transactions": txn,
        "tps": round(txn / secs, 2), "latency_ms": dict(NO_PERCENTILES), "errors": {}, "retries": 0, "reconnects": 0,
        "complete": True, "server_transactions": round(counts.raw),
        "own_estimate": round(counts.own_estimate, 1), "driver": "server counters (dbdiag watch)", "protocol": "", "isolation": "",
        "t_start": round(t0, 6), "t_end": round(t1, 6), "source": "server", "window": index,
        "counted": counts.rule, "own_transactions": round(counts.own_transactions, 1),
        "sessions_seen": list(sessions),
    }
    if counts.statements is not None:
        row["qps"] = round(max(0.0, counts.statements) / secs, 2)
    if counts.busy_ms is not None and txn > 0:
        # active + idle-in-transaction time per transaction: the server-side mean transaction latency
        row["latency_ms"] = {**NO_PERCENTILES, "mean": round(counts.busy_ms / txn, 3)}
        row["latency_source"] = "pg_stat_database active_time + idle_in_transaction_time per transaction"
    if hidden:
        row["sessions_hidden"] = hidden
    return ResultRow.from_dict(row, f"{target} {row['workload']}")


def with_statement_rates(row: ResultRow) -> ResultRow:
    """The row with statements/s and mean statement latency from the step's statement digests, when it has them
    and no count of its own (PostgreSQL: pg_stat_statements; dbdiag's own statements are already left out)."""
    st = row.statements
    if st is None:
        return row
    top = [s for s in st.get("statements") or [] if isinstance(s, Mapping)]
    calls = st.get("calls")
    if not isinstance(calls, (int, float)):
        calls = sum(float(s.get("calls") or 0) for s in top)
    ms = st.get("total_ms")
    if not isinstance(ms, (int, float)):
        ms = sum(float(s.get("total_ms") or 0) for s in top)
    secs = float(row.measured_s or 0)
    extra = dict(row.extra)
    qps = row.qps
    if qps is None and calls and secs > 0:
        qps = round(calls / secs, 2)
        extra["qps_source"] = "statement digests (dbdiag's own left out)"
    if calls:
        extra["statement_mean_ms"] = round(ms / calls, 4)
    return replace(row, qps=qps, extra=extra)
