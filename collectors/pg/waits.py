"""Wait-event sampling of the workload's PostgreSQL sessions (ASH-like), 10 times a second or more.

Each tick reads pg_stat_activity once: client backends in the target's
database, leaving out dbdiag's own sessions (this one, the other collectors',
data loads and probes: every application_name starting with
:data:`diag.core.db.OWN_PREFIX`). A backend that is ``active`` counts under its
``wait_event_type:wait_event``, or ``CPU`` when it waits for nothing (running,
or in a wait PostgreSQL does not instrument). A backend ``idle in transaction``
counts under its wait event too, which is ``Client:ClientRead``: the server
waits for the client while holding the transaction's locks. Plain ``idle``
backends (between transactions) are counted apart in ``idle``.

One record a second aggregates the ticks::

    {"samples": 37, "ticks": 10, "waits": {"CPU": 20, "Lock:transactionid": 9, "Client:ClientRead": 8},
     "idle": 3, "hidden": 0, "window_s": 1.0}

``samples`` counts (backend, tick) pairs in the ``waits``; the share of sampled
backend time spent in an event is ``waits[event] / samples``. ``hidden``
counts sessions of other roles whose state this role may not see (needs
pg_read_all_stats, part of pg_monitor).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from collectors.base import Metric, Probe
from collectors.pg.common import (DEFAULT_HZ, SAMPLER_TIMEOUT_MS, new_parts, open_session, probe_sampler,
                                  sampling_options)
from collectors.sampling import TickSampler
from collectors.sql import session_sql
from diag.core.db import OWN_PREFIX

ACTIVE_STATES = ("active", "fastpath function call")
IN_TRANSACTION_STATES = ("idle in transaction", "idle in transaction (aborted)")
HIDDEN_NOTE = "wait events of other roles' sessions: needs pg_monitor or pg_read_all_stats"


def wait_key(state: str, wait_event_type: str | None, wait_event: str | None) -> str | None:
    """The profile key of one sampled backend, or None when it is not in a transaction (idle, disabled)."""
    if state in ACTIVE_STATES:
        return f"{wait_event_type}:{wait_event}" if wait_event_type else "CPU"
    if state in IN_TRANSACTION_STATES:
        # always Client:ClientRead in practice; the fallback keeps the sample visible
        return f"{wait_event_type}:{wait_event}" if wait_event_type else "Client:ClientRead"
    return None


class WaitWindow:
    """Counts of one aggregation window; ``add`` takes the grouped rows of one tick."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.ticks = 0
        self.samples = 0
        self.idle = 0
        self.hidden = 0
        self.waits: Counter[str] = Counter()

    def add(self, rows: Iterable[Mapping[str, Any]]) -> None:
        self.ticks += 1
        for r in rows:
            n = int(r["n"])
            state = r["state"]
            if state == "hidden":
                self.hidden += n
                continue
            key = wait_key(str(state), r["wait_event_type"], r["wait_event"])
            if key is None:
                if state == "idle":
                    self.idle += n
                continue
            self.waits[key] += n
            self.samples += n

    def record(self) -> dict[str, Any]:
        return {"samples": self.samples, "ticks": self.ticks, "waits": dict(self.waits), "idle": self.idle,
                "hidden": self.hidden, "window_s": round(time.monotonic() - self.t0, 3)}


def profile(records: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Share of sampled backend time per wait event over several records (0..1; {} with no samples)."""
    total = 0
    waits: Counter[str] = Counter()
    for r in records:
        total += int(r.get("samples", 0))
        waits.update(r.get("waits", {}))
    return {k: v / total for k, v in waits.most_common()} if total else {}


class PgWaitsCollector(TickSampler[WaitWindow]):
    """ASH-like wait profile of the workload's client backends (pg_stat_activity at >= 10 Hz)."""

    name = "pg_waits"
    interval_s = 1.0 / DEFAULT_HZ
    metrics = (
        Metric("samples", "backend samples", "gauge", "(backend, tick) pairs in a transaction this window"),
        Metric("ticks", "count", "gauge", "pg_stat_activity reads this window"),
        Metric("waits.<type:event>", "backend samples", "gauge",
               "samples per wait event; CPU = active with no wait event; share = count / samples"),
        Metric("idle", "backend samples", "gauge", "samples of workload backends idle between transactions"),
        Metric("hidden", "backend samples", "gauge", "samples of sessions this role may not look into"),
        Metric("window_s", "s", "gauge", "length of the aggregation window"),
    )

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.interval_s, self.all_databases = sampling_options(ctx)
        self.exclude = list(ctx.options.get("pg_waits_exclude_apps", ()))  # more application_names to leave out
        self.parts = new_parts()
        self._sql = ""
        self._read: Callable[[], list[dict[str, Any]]] = list
        self._lock_waiting: frozenset[int] = frozenset()  # sessions waiting for a lock at the last tick

    def _params(self) -> dict[str, Any]:
        return {"own_prefix": OWN_PREFIX, "exclude": self.exclude, "all_databases": self.all_databases}

    def probe(self) -> Probe:
        return probe_sampler(self.ctx.target, self.name, lambda s: s.query(session_sql(s, "activity"), self._params()),
                             HIDDEN_NOTE)

    def start(self) -> None:
        self.session = open_session(self.ctx.target, self.name, SAMPLER_TIMEOUT_MS)
        self._sql = session_sql(self.session, "activity")
        # prepared once, its parameters fixed for the run: a tick costs ~40% of a cursor's (Session.prepared)
        self._read = self.session.prepared(self._sql, self._params())
        self._window = self._new_window()

    def _new_window(self) -> WaitWindow:
        return WaitWindow()

    def _tick(self) -> None:
        assert self.session is not None, "start() first"
        rows = self.parts.call("pg_stat_activity", self._read)
        if rows is not None:
            self._window.add(rows)
            if self.ctx.lock_gate is not None:  # the blocking sampler reads its chains only after a Lock wait
                waiting = frozenset(pid for r in rows if r["wait_event_type"] == "Lock" and r["state"] in ACTIVE_STATES
                                    for pid in r.get("lock_pids") or ())
                # of a session seen waiting at this tick and the one before (lockgate: short waits do not open)
                self.ctx.lock_gate.tick(bool(waiting), opens=bool(waiting & self._lock_waiting))
                self._lock_waiting = waiting

    def _record(self, window: WaitWindow) -> dict[str, Any]:
        rec = window.record()
        news = self.parts.unsaid()
        if news:
            rec["off"] = news
        return rec
