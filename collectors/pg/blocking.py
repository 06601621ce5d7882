"""Blocking chains of PostgreSQL: who blocks the sessions that wait for a lock, sampled at the wait rate.

Each tick (10 Hz, the rate of :mod:`collectors.pg.waits`) reads the backends of the target's database
that wait for a heavyweight lock (``wait_event_type = 'Lock'``) with ``pg_blocking_pids()`` and the
blockers' pg_stat_activity rows (query ``blocking``); only when someone waits, pg_locks once more for
what each waiter wants and what its blocker holds on the same object (query ``blocking_locks``;
``waitstart`` on 14+). One record a second (:mod:`diag.core.schema.blocking`) names each blocker: PID, user,
application and address, state (``idle in transaction`` for a transaction left open), its statement (the
last one when idle), transaction and state age, first and last sample seen blocking, the waiters' time.

In a run that read is made only while the wait sampler has seen a ``Lock`` wait in the last
:data:`collectors.lockgate.HOLD_S` s, or whenever that sampler is not ticking (:mod:`collectors.lockgate`);
the other ticks count as samples that saw nobody wait and cost no query. So a wait in a session the wait
sampler leaves out (dbdiag's own, a background worker) is seen only while a workload session waits too. The
first read after skipped ticks counts each waiter's time by the server's wait start (pg_locks.waitstart on 14+,
else its statement's start), at most back to the previous read (:func:`collectors.blocking.catch_up`).

Privileges: every role sees pg_locks and pg_blocking_pids; other roles' state and query need
pg_read_all_stats (pg_monitor): without it a blocker of another role is named by PID only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from collectors.base import Probe
from collectors.blocking import (Seen, Wait, WindowBuilder, blocking_metrics, catch_up, catch_up_gap, seconds,
                                text)
from collectors.lockgate import TickPace
from collectors.pg.common import (DEFAULT_HZ, SAMPLER_TIMEOUT_MS, new_parts, open_session, plain, probe_sampler,
                                  sampling_options)
from collectors.sampling import TickSampler
from collectors.sql import session_sql
from diag.core.db import Session

HIDDEN_NOTE = "state and statement of other roles' blocking sessions: needs pg_monitor or pg_read_all_stats"
HIDDEN_QUERY = "<insufficient privilege>"  # pg_stat_activity.query of another role's session without the role
NOT_VISIBLE = "not visible to this role (needs pg_read_all_stats or pg_monitor)"
PREPARED = "a prepared transaction (see pg_prepared_xacts: COMMIT PREPARED or ROLLBACK PREPARED ends it)"
NO_BLOCKER = ("waiting for a lock no session holds by the time it was sampled (granted between the two "
              "catalog reads), or held by a prepared transaction")


def blocker_state(r: dict[str, Any]) -> str:
    """What a blocking backend is doing, in pg_stat_activity's words ("idle in transaction", "active, waits
    Lock:relation"); its backend type when it is not a client backend; :data:`NOT_VISIBLE` when this role may
    not see it."""
    if r.get("b_state") is None and text(r.get("b_query")) == HIDDEN_QUERY:
        return NOT_VISIBLE
    state = text(r.get("b_state"))
    btype = text(r.get("b_type"))
    if r.get("b_wait_type") and state == "active":
        state += f", waits {text(r['b_wait_type'])}:{text(r.get('b_wait'))}"
    if btype and btype != "client backend":
        state = f"{btype}: {state}" if state else btype
    return state


def seen_blocker(r: dict[str, Any]) -> Seen:
    """The blocker of one ``blocking`` row (PID 0: a prepared transaction, pg_blocking_pids' word for it)."""
    if int(r["blocker"]) == 0:
        return Seen(0, state=PREPARED)
    hidden = blocker_state(r) == NOT_VISIBLE
    # client_addr NULL: a Unix-socket client, unless this role may not see the session at all
    app, addr = text(r.get("b_app")), text(r.get("b_addr")) or ("" if hidden else "local socket")
    return Seen(pid=int(r["blocker"]), user=text(r.get("b_user")),
                client=f"{app} ({addr})" if app and addr else app or addr, state=blocker_state(r),
                statement="" if text(r.get("b_query")) == HIDDEN_QUERY else text(r.get("b_query")),
                xact_s=seconds(plain(r.get("b_xact_s"))), state_s=seconds(plain(r.get("b_state_s"))))


def lock_text(r: dict[str, Any]) -> str:
    """What one waiter wants, from a ``blocking_locks`` row: "RowExclusiveLock on relation t (held:
    ExclusiveLock)", "ShareLock on transactionid 742 (row of t) (held: ExclusiveLock)"."""
    locktype = text(r.get("locktype"))
    what = {"relation": text(r.get("relation")), "transactionid": text(r.get("xid")),
            "tuple": text(r.get("relation"))}.get(locktype, "")
    out = f"{text(r.get('mode'))} on {locktype}" + (f" {what}" if what else "")
    if locktype == "transactionid" and r.get("tuple_relation"):
        out += f" (row of {text(r['tuple_relation'])})"
    if r.get("held"):
        out += f" (held: {text(r['held'])})"
    return out


def waits_of(rows: list[dict[str, Any]], locks: list[dict[str, Any]], period_s: float) -> list[Wait]:
    """One :class:`Wait` per waiting backend of a tick, from its ``blocking`` and ``blocking_locks`` rows."""
    by_waiter: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_waiter.setdefault(int(r["pid"]), []).append(r)
    lock_of: dict[int, dict[str, Any]] = {}
    for r in locks:  # a waiter has one ungranted lock; prefer the row that names a holder
        pid = int(r["pid"])
        if pid not in lock_of or (r.get("holder") and not lock_of[pid].get("holder")):
            lock_of[pid] = r
    out = []
    for pid, rs in by_waiter.items():
        blockers = tuple(sorted({int(r["blocker"]) for r in rs if r.get("blocker") is not None}))
        lk = lock_of.get(pid, {})
        wait_s = seconds(plain(lk.get("wait_s")))
        if wait_s is None:
            wait_s = seconds(plain(rs[0].get("query_s")))
        out.append(Wait(pid, blockers, lock_text(lk) if lk else "a heavyweight lock", period_s, wait_s,
                        "" if blockers else NO_BLOCKER))
    return out


class PgBlockingCollector(TickSampler[WindowBuilder]):
    """Who blocks whom (pg_blocking_pids, pg_stat_activity, pg_locks) at the wait-sampling rate."""

    name = "pg_blocking"
    title = "blocking sessions"
    interval_s = 1.0 / DEFAULT_HZ
    metrics = blocking_metrics("samples this window", "sessions", "the previous one",
                               "each blocking session: pid, user, client, state, statement, xact_s, state_s (s), "
                               "first_t/last_t (Unix s), ticks, blocked_s (s), blocked pids, lock, waits_for pids, "
                               "longest_wait_s (s)")

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.interval_s, self.all_databases = sampling_options(ctx)
        self._tick_s = self.interval_s  # interval_s grows to QUIET_TICKS of it while the lock gate is quiet
        self.parts = new_parts()
        self._sql: dict[str, str] = {}
        self._read: Callable[[], list[dict[str, Any]]] = list
        self._skipped = False  # the previous tick was skipped on the lock gate's word
        self._last_read: float | None = None  # monotonic s of the last tick that read the server
        self._pace = TickPace()

    def probe(self) -> Probe:
        def reads(s: Session) -> None:
            s.query(session_sql(s, "blocking"), {"all_databases": self.all_databases})
            s.query(session_sql(s, "blocking_locks"), {"pids": [0]})
        return probe_sampler(self.ctx.target, self.name, reads, HIDDEN_NOTE)

    def start(self) -> None:
        self.session = open_session(self.ctx.target, self.name, SAMPLER_TIMEOUT_MS)
        self._sql = {n: session_sql(self.session, n) for n in ("blocking", "blocking_locks")}
        # the tick's first read, its parameter fixed for the run: prepared once (Session.prepared)
        self._read = self.session.prepared(self._sql["blocking"], {"all_databases": self.all_databases})
        self._window = self._new_window()

    def _new_window(self) -> WindowBuilder:
        return WindowBuilder(self.ctx.statement_text)

    def _tick(self) -> None:
        assert self.session is not None, "start() first"
        now = time.monotonic()
        period = self._since("tick", now, self._tick_s)
        gate = self.ctx.lock_gate
        quiet = gate is not None and gate.quiet(self._tick_s, now)
        self.interval_s = (self._pace.tick_s(self._tick_s, quiet, now, gate.ticking(self._tick_s, now))
                           if gate is not None else self._tick_s)
        if quiet:
            self._window.add(time.time(), [], {})  # the wait sampler saw no Lock wait: nobody to look behind
            self._skipped = True
            return
        skipped, self._skipped = self._skipped, False
        gap_s = catch_up_gap(gate, now, self._last_read)
        self._last_read = now
        rows = self.parts.call("blocking", self._read)
        if rows is None:
            return  # a timed-out or refused read: no sample, rather than a sample that saw no one waiting
        if not rows:
            self._window.add(time.time(), [], {})
            return
        pids = sorted({int(r["pid"]) for r in rows} | {int(r["blocker"]) for r in rows if r.get("blocker")})
        locks = self.parts.query("pg_locks", self.session, self._sql["blocking_locks"], {"pids": pids}) or []
        seen = {int(r["blocker"]): seen_blocker(r) for r in rows if r.get("blocker") is not None}
        waits = waits_of(rows, locks, period)
        self._window.add(time.time(), catch_up(waits, gap_s) if skipped else waits, seen)

    def _record(self, window: WindowBuilder) -> dict[str, Any]:
        return window.record(time.time(), self.parts.unsaid())
