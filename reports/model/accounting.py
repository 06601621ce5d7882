"""Time accounting per step: where the mean transaction's wall time went, and what limits the step.

For each step, per mean transaction (µs; ../shared/ARCHITECTURE.md "Time accounting")::

    wall = client CPU + round trips + server CPU (user, system) + server waits by class + unaccounted

* wall: clients x measured window / transactions (each client runs one transaction at a time, so this is the
  mean transaction's time as a client sees it, and the time of its backend).
* client CPU: the client processes' CPU (host series, psutil) per transaction.
* connect (``--connect-per-transaction`` only): the clients' wall time opening each transaction's connection.
* round trips: the backend's time waiting for the client (Client:ClientRead / ClientRead inside a transaction,
  and idle between transactions, from the wait sampler) minus the client CPU spent inside it: the network,
  the client's scheduling and the driver's wake-ups between statements.
* server CPU: the server process group's user and system CPU per transaction (host series).
* server waits by class (:data:`WAIT_CLASSES`, mapped by the engine): each sampled class's share of backend
  time (samples in it over all samples of the workload's backends, idle ones included) x wall. The ``cpu``
  class (active with no wait event) is what server CPU already counts; the part of it the measured CPU does
  not cover is the run queue on a busy host (``wait:cpu``); on a host not busy on average, the part the
  kernel's run-queue time of the server's threads covers (/proc schedstat: bursts of runnable threads on few
  CPUs), and the rest an uninstrumented wait (unaccounted).
* unaccounted: the rest, shown, never hidden; from 10% of the transaction up the evidence says which part the
  sources could not see and why (:func:`reports.model.accounting_gaps.unaccounted_why`), and so does the limit's.
  When the parts add to more than the wall time (the server's
  background processes' CPU is in server CPU but not in backend time; sampling error), the remainder clamps
  to 0 and the evidence says by how much they exceeded it; shares are then of that sum, so they add to 1.0.

Rates only through :mod:`collectors.rates` (via :func:`reports.model.cpu.cpu_use`) and the wait sampler's
counts; this module reads the bundle only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from diag.core.bundle import Bundle
from reports.model.accounting_gaps import run_queue_us, unaccounted_why
from reports.model.accounting_records import WAIT_CLASSES, Component, Limit, StepAccounting
from reports.model.cpu import HOST_BUSY, CpuUse, cpu_use
from reports.model.limits import limit_of
from reports.model.steps import Step, num, steps
from reports.model.wait_profiles import WaitProfile, sampler, wait_profile

__all__ = ["WAIT_CLASSES", "Component", "Limit", "StepAccounting", "account_step", "accounts", "limit_of"]

# Wait classes that are a component of their own (cpu and client are split into CPU and round trips).
_WAIT_COMPONENTS = tuple(c for c in WAIT_CLASSES if c not in ("cpu", "client"))
# Detail key for backends idle between transactions (not a wait event: the sampler counts them apart).
IDLE_DETAIL = "idle (between transactions)"


def accounts(b: Bundle) -> Iterator[tuple[Step, StepAccounting]]:
    """(step, accounting) of every step that can be accounted (see :func:`account_step`)."""
    for step in steps(b):
        acc = account_step(b, step)
        if acc is not None:
            yield step, acc


def account_step(b: Bundle, step: Step) -> StepAccounting | None:
    """The time accounting of one step; None only when the row has no measured window or no transactions."""
    txn = step.transactions
    if txn <= 0 or step.duration <= 0:
        return None
    wall = step.clients * step.duration * 1e6 / txn
    ev: dict[str, Any] = {"window_s": num(step.duration, 2), "transactions": txn, "clients": step.clients,
                          "wall_us_per_txn": num(wall)}
    if step.statements and step.statements != txn:
        ev["statements_per_txn"] = num(step.statements / txn, 2)
    parts: list[tuple[str, str, float, dict[str, float]]] = []  # (key, label, us, detail)
    u = cpu_use(b, step)
    client_us = _client_cpu_us(step, u, ev)
    if client_us is not None:
        parts.append(("client_cpu", "client CPU (the load generator)", client_us, {}))
    connect_ms = step.row.connect_ms_per_txn
    connect_us = 0.0
    if isinstance(connect_ms, (int, float)) and connect_ms > 0:  # --connect-per-transaction
        connect_us = float(connect_ms) * 1000.0
        # The clients' wall time opening each transaction's connection (connect, authenticate, prepare). The
        # CPU both sides spend on it is in client / server CPU too: the parts may exceed the wall (said so).
        parts.append(("connect", "connect (a new connection per transaction, as the client waited for it)",
                      connect_us, {}))
        ev["connect_note"] = ("connect is wall time on the client; the CPU spent in it is also in client and "
                              "server CPU (the backend's start-up)")
    server_us = _server_cpu(step, u, ev, parts)
    p = wait_profile(b, step)
    if p is not None and p.samples + p.idle > 0:
        parts.extend(_wait_parts(step, p, wall, client_us or 0.0, server_us, u, ev, connect_us))
    else:
        ev["waits"] = "not sampled: no wait sampler ran for this target, or it saw no workload backend"
    return _assemble(step, wall, parts, ev)


def _client_cpu_us(step: Step, u: CpuUse | None, ev: dict[str, Any]) -> float | None:
    """Client CPU per transaction (µs): the host series' client group, else the result row's own count."""
    if u is not None and u.client_cores is not None:
        ev["client_cpu_cores"] = num(u.client_cores, 2)
        ev["client_cpu_source"] = "per-process CPU of the client processes (psutil)"
        return u.client_cores * step.duration * 1e6 / step.transactions
    cs = step.row.client_cpu_s
    if isinstance(cs, (int, float)) and cs >= 0:
        ev["client_cpu_source"] = "the driver's own count of its client processes' CPU (result row)"
        return float(cs) * 1e6 / step.transactions
    if step.row.source == "server":  # dbdiag watch: no load command, no local process connected
        ev["client_cpu"] = ("not known: no load command, and no process of this host was connected to the "
                            "server's TCP port (the clients are on another host, or use a unix socket): their "
                            "time is in the round trips and unaccounted, not guessed")
    return None


def _server_cpu(step: Step, u: CpuUse | None, ev: dict[str, Any],
                parts: list[tuple[str, str, float, dict[str, float]]]) -> float | None:
    """Adds server CPU user/system parts (µs per transaction); returns their sum, None when not measured."""
    if u is None or u.server_cores is None or u.span_s <= 0:
        ev["server_cpu"] = "not measured: no per-process CPU of the server's processes in the host series"
        return None
    scale = step.duration / u.span_s  # intervals that miss part of the step count for the whole of it
    user = u.server_user_s * scale * 1e6 / step.transactions
    system = u.server_sys_s * scale * 1e6 / step.transactions
    ev["server_cpu_cores"] = num(u.server_cores, 2)
    ev["host_busy_pct"] = num(100 * u.host_busy)
    ev["cpus"] = u.ncpu
    ev["host_cpu_span_s"] = num(u.span_s, 2)
    parts.append(("server_cpu_user", "server CPU (user)", user, {}))
    parts.append(("server_cpu_system", "server CPU (system: network, I/O calls)", system, {}))
    return user + system


def _wait_parts(step: Step, p: WaitProfile, wall: float, client_us: float, server_us: float | None,
                u: CpuUse | None, ev: dict[str, Any],
                connect_us: float = 0.0) -> list[tuple[str, str, float, dict[str, float]]]:
    """Round trips, CPU run queue and the wait classes from the sampled backend time. A backend waiting for
    its client while the client is still connecting (the start-up handshake, the client not yet scheduled to
    send its first statement) is inside ``connect_us``: taken out of the round trips, not counted twice."""
    total = p.samples + p.idle
    ev["wait_source"] = sampler(p)
    ev["backend_samples"] = total
    ev["backend_samples_in_transaction"] = p.samples
    by_class: dict[str, dict[str, float]] = {c: {} for c in WAIT_CLASSES}
    for key, n in p.counts.items():
        by_class[step.engine.wait_class(key)][key] = n * wall / total
    if p.idle:
        by_class["client"][IDLE_DETAIL] = p.idle * wall / total
    out: list[tuple[str, str, float, dict[str, float]]] = []
    client_wait = sum(by_class["client"].values())
    ev["client_wait_us_per_txn"] = num(client_wait)
    # The server's CPU the sampler did not see as active ran while it showed the backend idle or waiting for
    # the client (PostgreSQL reports "active" from a statement's start, not while it receives, parses and
    # sends: at one point-select client 58 of 65 µs of backend CPU fell there): not a round trip.
    cpu_sampled = sum(by_class["cpu"].values())
    unseen_cpu = max(0.0, (server_us or 0.0) - cpu_sampled)
    if unseen_cpu:
        ev["server_cpu_while_sampled_waiting_us"] = num(unseen_cpu)
    rt = client_wait - client_us - connect_us - unseen_cpu
    if connect_us:
        ev["round_trips_less_connect_us"] = num(connect_us)
    if rt < 0:
        ev["round_trips_clamped_us"] = num(-rt)  # client CPU beyond the time the backend waited for it
    stmts = step.statements / step.transactions if step.statements else 1.0
    ev["round_trip_gap_us"] = num(max(0.0, rt) / max(1.0, stmts))
    out.append(("round_trips", f"round trips ({num(stmts, 2):g} per transaction: waiting for the next statement)",
                max(0.0, rt), _rounded(by_class["client"])))
    ev["cpu_sampled_us_per_txn"] = num(cpu_sampled)
    if server_us is not None:
        queue = cpu_sampled - server_us
        if queue > 0 and u is not None and u.host_busy >= HOST_BUSY:
            out.append(("wait:cpu", "waits: CPU run queue (runnable, no CPU free)", queue,
                        _rounded(by_class["cpu"])))
        elif queue > 0:
            # Active with no wait event and not on a CPU: waiting for one (the kernel's run-queue time of the
            # server's threads says how long, even when the host is not busy on average: bursts of runnable
            # threads on few CPUs), or waiting on something the server does not instrument (the rest).
            rq = run_queue_us(u, step.transactions)
            if rq:
                out.append(("wait:cpu", "waits: CPU run queue (runnable, no CPU free; the kernel's run-queue "
                            "time of the server's threads)", min(queue, rq), _rounded(by_class["cpu"])))
                ev["run_queue_us_per_txn"] = num(rq)
            if queue > rq:
                ev["cpu_sampled_not_on_cpu_us"] = num(queue - rq)  # no wait event, not on or waiting for a CPU
    for cls in _WAIT_COMPONENTS:
        us = sum(by_class[cls].values())
        if us > 0:
            out.append((f"wait:{cls}", f"waits: {step.engine.wait_label(cls)}", us, _rounded(by_class[cls])))
    return out


def _rounded(d: dict[str, float]) -> dict[str, float]:
    return {k: num(v) for k, v in sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))}


def _assemble(step: Step, wall: float, parts: list[tuple[str, str, float, dict[str, float]]],
              ev: dict[str, Any]) -> StepAccounting:
    """Components with shares that add to 1.0: of the wall time, or of the parts' sum when that exceeds it."""
    used = sum(us for _k, _l, us, _d in parts)
    rest = wall - used
    if rest < 0:
        ev["parts_exceed_wall_us"] = num(-rest)
        ev["note"] = ("the parts add to more than the wall time (server background CPU, sampling error): "
                      "unaccounted clamps to 0 and shares are of the parts' sum")
    base = max(wall, used)
    comps = [Component(k, label, us, us / base, d) for k, label, us, d in parts]
    comps.append(Component("unaccounted", "unaccounted (not measured by any source)", max(0.0, rest),
                           max(0.0, rest) / base, {}))
    why = unaccounted_why(step.engine, ev, max(0.0, rest), wall)
    if why:
        ev["unaccounted_why"] = why
    return StepAccounting(step.target, step.workload, step.clients, wall, tuple(comps), ev)
