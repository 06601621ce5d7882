"""connection_churn: the load opens a new connection for many of its transactions (pgbench -C, an application
without a pool), and each one costs the server a backend's start-up.

Evidence from the server's own count of the connections it accepted (:attr:`diag.core.engines.Engine.
connection_counter`: PostgreSQL 14+'s pg_stat_database ``sessions`` of the target's database, MySQL/MariaDB's
``Connections``), over the step's window by interpolation between the samples around its ends
(:func:`reports.rules.base.counter_in_step`: the clients connect all through the step, so the rate is what
counts, not whole events), per second and per transaction. MySQL's ``Threads_created`` says
how many of them needed a new thread (the thread cache served the rest).

Where the client timed its connects (``dbdiag run --connect-per-transaction`` writes ``connect_ms_per_txn``),
the finding's impact is the share of the mean transaction (clients x window / transactions, the accounting's
wall time) the client spent opening its connection; the accounting's own share of its ``connect`` part is given
beside it (smaller when the parts add to more than the wall: the CPU spent connecting is in CPU parts too).
Otherwise (``dbdiag watch -- pgbench -C``, an application
that reconnects) the connect time is not known and the finding ranks as a condition
(:data:`reports.rules.cpu.CONDITION_WEIGHT` x the new connections per transaction, at most 1), and says so;
the server CPU per transaction, which holds each backend's start-up, is given as evidence either way.
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle
from reports.model.accounting import account_step
from reports.model.steps import Finding, Step, num, pct, steps
from reports.rules.base import counter_in_step
from reports.rules.cpu import CONDITION_WEIGHT

# One new connection in five transactions, and a few dozen in the step: a load whose clients connect once
# (before the measured window) adds none; dbdiag's own sessions add a handful at most (measured: 0-3 in a
# 1.5 s step of a load that kept its connections, on both engines).
MIN_CONNECTS_PER_TXN = 0.2
MIN_CONNECTS = 20

ADVICE = ("Keep connections open: a pool in the application, or PgBouncer / ProxySQL in front of the server, "
          "so a transaction reuses a connection instead of paying for a new one each time.")


def connection_churn(b: Bundle) -> list[Finding]:
    """A finding per step whose load opened new connections for a good share of its transactions."""
    out: list[Finding] = []
    for step in steps(b):
        f = _churn(b, step)
        if f is not None:
            out.append(f)
    return out


def _churn(b: Bundle, step: Step) -> Finding | None:
    eng, txn = step.engine, step.transactions
    if not eng.connection_counter or txn <= 0:
        return None
    conns = counter_in_step(b, step, eng.stats_series, eng.connection_counter)
    if conns is None or conns < MIN_CONNECTS or conns / txn < MIN_CONNECTS_PER_TXN:
        return None
    ev: dict[str, Any] = {
        "source": f"{eng.connection_counter_source}, over the step, interpolated between samples",
        "new connections": round(conns), "transactions": txn,
        "new connections per transaction": num(conns / txn, 2),
        "new connections per second": num(conns / step.duration),
        "what a new connection costs the server": eng.backend_start}
    if eng.thread_create_counter:
        threads = counter_in_step(b, step, eng.stats_series, eng.thread_create_counter)
        if threads is not None:
            ev["threads created per new connection"] = num(threads / conns, 2)
    acc = account_step(b, step)
    if acc is not None:
        cpu = sum(acc.us(k) for k in ("server_cpu_user", "server_cpu_system") if acc.get(k) is not None)
        if cpu > 0:
            ev["server CPU per transaction, start-ups included (µs)"] = num(cpu)
            # The start-up's own cost is not separable from the statements' on the host series: all of the
            # server's CPU over its new connections bounds it from above.
            ev["server CPU per new connection, at most (µs)"] = num(cpu * txn / conns)
    connect_ms = step.row.connect_ms_per_txn
    if isinstance(connect_ms, (int, float)) and connect_ms > 0:
        # The client's wall time connecting over the mean transaction's (clients x window / transactions): the
        # share of the transaction it takes. The accounting's share of it is smaller when the parts add to more
        # than the wall (the CPU spent connecting is in client and server CPU too): given beside it.
        wall_us = step.clients * step.duration * 1e6 / txn
        share = min(1.0, float(connect_ms) * 1000.0 / wall_us)
        ev["connect per transaction, as the client waited (ms)"] = num(float(connect_ms), 3)
        ev["connect share of the mean transaction"] = pct(share)
        if acc is not None and acc.get("connect") is not None:
            ev["connect share in the step's accounting (of the parts' sum)"] = pct(acc.share("connect"))
        ev["impact_from"] = ("the client's connect time over the mean transaction's time (clients x window / "
                             "transactions)")
        impact = share
        timed = f"opening them takes {pct(share)} of the mean transaction"
    else:
        impact = CONDITION_WEIGHT * min(1.0, conns / txn)
        ev["impact_from"] = ("not timed: the load did not say how long its connects took, so the rank is that of "
                             "a condition (half the new connections per transaction, at most half)")
        timed = "their cost to the clients was not timed"
    title = (f"Connection churn: {num(conns / txn, 2)} new connections per transaction "
             f"({num(conns / step.duration)}/s); {timed}")
    return step.finding("connection_churn", "warning", title, ev, ADVICE, impact)
