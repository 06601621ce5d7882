"""MySQL / MariaDB wait profile: what the workload's threads are doing, sampled at 10 Hz.

Every ``TICK_S`` the collector looks at each client thread and counts one
state per thread; once a second it emits a record::

    {"samples": 23, "ticks": 10, "idle": 7, "source": "performance_schema",
     "waits": {"Lock:row": 10, "ClientRead": 10, "CPU": 3}, "cpu_states": {"Commit": 2, "Update": 1},
     "summary": {"wait/io/file/innodb/innodb_log_file": {"count": 120, "sum_ps": 81234000}},
     "summary_full": false}

``samples`` is the number of (thread, tick) pairs counted in ``waits`` (the
share of a state is its count / samples); ``ticks`` the sampling rounds in that
second; ``idle`` the (thread, tick) pairs of connections idle outside any
transaction (not in ``waits``: the server had nothing to do for them).

States, in the order they are decided:

* ``Lock:row``: INFORMATION_SCHEMA.INNODB_TRX says ``trx_state = 'LOCK WAIT'``.
* ``Lock:metadata``, ``Lock:table``, ``Lock:global_read``...: the thread state
  is "Waiting for ... lock".
* ``ClientRead``: command Sleep with an open InnoDB transaction: the server
  waits for the client inside a transaction (PostgreSQL's "idle in
  transaction" / ClientRead).
* source ``performance_schema``: the current wait's event name
  (``wait/io/file/innodb/innodb_data_file``...), or ``CPU`` for a running
  statement with no current wait. ``CPU`` means "no instrumented wait", which
  is not always on-CPU: MariaDB 10.8+ does not instrument redo log writes and
  fsyncs in performance_schema (measured on 10.11: no innodb_log_file event
  under an insert load), so a commit waiting for its fsync counts as CPU there.
  ``cpu_states`` ({thread state: count}) breaks the CPU samples down by thread
  state ("Commit", "Updating"...) so a report can tell.
* source ``processlist`` (performance_schema off, or its events_waits_current
  consumer off): ``State:<thread state>`` (``State:Update``, ``State:Commit``...),
  or ``CPU`` for a running statement with an empty state. Without
  performance_schema there is no wait instrumentation, so a state is the most
  the server can tell.

``summary`` holds performance_schema.events_waits_summary_global_by_event_name
raw sums (``count`` = COUNT_STAR, ``sum_ps`` = SUM_TIMER_WAIT in picoseconds)
for events with a non-zero count: all of them in the first record and every
``SUMMARY_FULL_EVERY`` records (``summary_full`` true), otherwise only those
whose count changed since the previous record; a missing event means
"unchanged" (:func:`collectors.rates.total_delta` skips gaps).

INNODB_TRX (transaction state per thread) is read every ``TRX_EVERY_TICKS``
ticks only: InnoDB refreshes that table's cache only after 100 ms without
readers, so reading it every tick would freeze it. Another client polling it
faster than that freezes it for us too.

Left out: dbdiag's own statements (SQL files start with ``/* dbdiag */``), this
session, server background threads and, with performance_schema ON, every
connection of dbdiag's own (collectors, data loads, probes: the program_name
connection attribute starts with :data:`diag.core.db.OWN_PREFIX`, read from
session_connect_attrs once a second). With performance_schema OFF the server shows
no connection attributes: another dbdiag session counts while it is idle
(``idle``) or runs a statement not from the SQL files. Privileges: PROCESS to see other
users' threads and INNODB_TRX; SELECT on performance_schema for the p_s parts.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from collectors.base import CollectorContext, Metric, Probe
from collectors.mysql.common import GRANT_PROCESS, GRANT_PS, MyCollector, Parts, query_named
from collectors.sql import MARKER, session_sql
from diag.core.db import OWN_PREFIX, Session
from diag.core.errors import DbError

TICK_S = 0.1
# INNODB_TRX is a cache InnoDB refreshes only when nobody has read it for 100 ms
# (trx0i_s.cc, can_cache_be_updated): read at every 100 ms tick it would never
# refresh. Every 3rd tick leaves ~200 ms between reads; the map is reused between.
TRX_EVERY_TICKS = 3
# dbdiag's own connections (performance_schema's connect attributes), read once a second: the read costs ~0.7 ms
# (16 connections, MariaDB 10.11), 0.2% of a core at INNODB_TRX's rate, and a connection of ours lives for seconds
# (one made since the last read shows idle, or runs marked statements, which are left out by their marker).
OWN_EVERY_TICKS = 10
WINDOW_S = 1.0
SUMMARY_FULL_EVERY = 60
PS_OFF_HINT = "performance_schema=ON in my.cnf, restart"
CONSUMER_HINT = ("UPDATE performance_schema.setup_consumers SET ENABLED='YES' WHERE NAME='events_waits_current' "
                 "(or performance-schema-consumer-events-waits-current=ON in my.cnf); enable the wait/% "
                 "instruments in setup_instruments for more than file I/O")
HINTS = {
    "performance_schema": PS_OFF_HINT,
    "waits_summary": GRANT_PS,
    "waits_current": GRANT_PS,
    "innodb_trx": GRANT_PROCESS,
    "processlist": GRANT_PROCESS,
    "own_sessions": GRANT_PS,
}

IDLE = "idle"
_SKIP = ""
_BACKGROUND_USERS = frozenset({"system user", "event_scheduler"})
_BACKGROUND_COMMANDS = ("Daemon", "Binlog Dump", "Binlog Dump GTID", "Slave_IO", "Slave_SQL", "Slave_worker",
                        "Register Slave")
_LOCK_STATE = re.compile(r"^Waiting for (?:table )?(.*?)\s*lock$", re.IGNORECASE)
_LOCK_NAMES = {"level": "table", "table level": "table", "global read": "global_read", "backup": "backup",
               "commit": "commit", "": "table"}


def _text(v: Any) -> str:
    if v is None:
        return ""
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def thread_state(row: dict[str, Any], trx_state: str | None, source: str) -> str:
    """The state one thread sample counts as; ``IDLE`` or ``""`` (not a workload thread) when not counted.

    ``row``: id, user, command, state, info (first characters), wait_event (p_s only).
    ``trx_state``: its INNODB_TRX trx_state, None when it has no InnoDB transaction.
    """
    command = _text(row.get("command"))
    user = _text(row.get("user"))
    if _text(row.get("info")).startswith(MARKER) or user in _BACKGROUND_USERS or \
            command.startswith(_BACKGROUND_COMMANDS):
        return _SKIP
    if trx_state == "LOCK WAIT":
        return "Lock:row"
    state = _text(row.get("state")).strip()
    m = _LOCK_STATE.match(state)
    if m:
        what = m.group(1).strip().lower()
        if "metadata" in what:
            return "Lock:metadata"
        return "Lock:" + _LOCK_NAMES.get(what, re.sub(r"\W+", "_", what))
    if command == "Sleep":
        return "ClientRead" if trx_state is not None else IDLE
    if source == "performance_schema":
        event = _text(row.get("wait_event"))
        return event if event and event != "idle" else "CPU"
    return f"State:{state}" if state else "CPU"


def classify(rows: Iterable[dict[str, Any]], trx: dict[int, str], source: str,
             cpu_states: Counter[str] | None = None, own: frozenset[int] = frozenset(),
             locked: set[int] | None = None) -> tuple[Counter[str], int]:
    """(states counted, idle threads) of one sampling tick; ``locked``, when given, gets the ids of the threads
    counted in a ``Lock:`` state.

    p_s rows may repeat a thread (nested current waits): the innermost one,
    the highest wait_id, stands for it. ``cpu_states``, when given, counts the
    thread state of each sample counted as ``CPU``. Threads in ``own`` (dbdiag's
    own connections) are not counted.
    """
    by_thread: dict[Any, dict[str, Any]] = {}
    for r in rows:
        key = r.get("id")
        if key is not None and int(key) in own:
            continue
        old = by_thread.get(key)
        if old is None or (r.get("wait_id") or 0) > (old.get("wait_id") or 0):
            by_thread[key] = r
    counts: Counter[str] = Counter()
    idle = 0
    for key, r in by_thread.items():
        st = thread_state(r, trx.get(int(key)) if key is not None else None, source)
        if st == IDLE:
            idle += 1
        elif st:
            counts[st] += 1
            if locked is not None and key is not None and st.startswith("Lock:"):
                locked.add(int(key))
            if st == "CPU" and cpu_states is not None:
                cpu_states[_text(r.get("state")).strip() or "-"] += 1
    return counts, idle


def processlist(s: Session, own_id: int | None) -> list[dict[str, Any]]:
    """The processlist rows :func:`thread_state` reads (id, user, command, state, info), every thread but
    ``own_id`` (this session's): SHOW PROCESSLIST, which makes no temporary table on the server (the SQL file says
    why); its Info is at most 100 characters, of which only the first (the marker) matter here."""
    out = []
    # Read as text by position (Id, User, Host, db, Command, Time, State, Info[, Progress] on both products):
    # a cursor's column descriptions and converters were most of this read's CPU at 10 Hz.
    for r in s.text_rows(session_sql(s, "processlist")):
        pid = r[0]
        if pid is None or int(pid) == own_id:
            continue
        out.append({"id": int(pid), "user": r[1], "command": r[4], "state": r[6], "info": r[7],
                    "wait_event": None, "wait_id": None})
    return out


def connection_id(s: Session) -> int | None:
    """This session's thread id (CONNECTION_ID()); None if the server does not say."""
    rows = s.query("SELECT CONNECTION_ID() AS id")
    return int(rows[0]["id"]) if rows and rows[0].get("id") is not None else None


def own_threads(s: Session) -> frozenset[int]:
    """Thread ids of dbdiag's own connections (performance_schema's session_connect_attrs)."""
    return frozenset(int(r["id"]) for r in query_named(s, "own_threads", {"prefix": OWN_PREFIX}))


class _Plan:
    """Which sources this server and user allow, decided once per process."""

    def __init__(self, s: Session, parts: Parts) -> None:
        self.ps_on = False
        self.source = "processlist"
        rows = s.query("SELECT @@performance_schema AS ps")
        self.ps_on = bool(rows and str(rows[0]["ps"]) in ("1", "ON"))
        if not self.ps_on:
            parts.switch_off("performance_schema", "OFF: no wait summaries and no wait events; sampling "
                             "processlist and INNODB_TRX instead")
        else:
            consumers = parts.call("waits_current", lambda: query_named(s, "consumers"))
            if consumers is not None:
                on = {_text(r["name"]): _text(r["enabled"]).upper() == "YES" for r in consumers}
                needed = ("global_instrumentation", "thread_instrumentation", "events_waits_current")
                off = [n for n in needed if not on.get(n, False)]
                if off:
                    parts.switch_off("waits_current", f"consumer {', '.join(off)} off: sampling processlist "
                                     "states instead of wait events", hint=CONSUMER_HINT)
                else:
                    self.source = "performance_schema"
            parts.call("waits_summary", lambda: query_named(s, "waits_summary"))
            parts.call("own_sessions", lambda: own_threads(s))
        parts.call("innodb_trx", lambda: query_named(s, "innodb_trx"))
        if not parts.is_on("innodb_trx"):
            # INNODB_TRX and other users' threads need the same privilege (PROCESS).
            parts.switch_off("processlist", "without PROCESS only this user's own threads are visible")


class MyWaitsCollector(MyCollector):
    """ASH-like wait profile of client threads at 10 Hz, and performance_schema wait summaries."""

    name = "my_waits"
    interval_s = TICK_S
    hints = HINTS
    statement_timeout_ms = 1000
    metrics = (
        Metric("samples", "thread-samples", "gauge", "(thread, tick) pairs counted in waits this second"),
        Metric("ticks", "ticks", "gauge", "sampling rounds this second (10 at 10 Hz)"),
        Metric("idle", "thread-samples", "gauge", "(thread, tick) pairs idle outside a transaction"),
        Metric("waits.<state>", "thread-samples", "gauge",
               "per state (Lock:row, ClientRead, CPU, wait/... event, State:...): thread-samples this second"),
        Metric("summary.<event>.count", "events", "counter", "performance_schema waits of the event (COUNT_STAR)"),
        Metric("summary.<event>.sum_ps", "ps", "counter", "performance_schema wait time of the event "
               "(SUM_TIMER_WAIT, picoseconds)"),
    )

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.plan: _Plan | None = None
        self._reset(time.monotonic())
        self._last_summary: dict[str, tuple[int, int]] = {}
        self.records = 0
        self.source = "processlist"
        self.ticks_total = 0
        self.trx: dict[int, str] = {}
        # Lock waits that open the blocking sampler's gate (collectors/lockgate.py) are the ones seen twice in a
        # row: a thread in LOCK WAIT at two consecutive INNODB_TRX reads (0.3 s apart), or in another lock state
        # (metadata, table) at two consecutive ticks. Read-write's row-lock waits of a few ms, seen once, do not:
        # reading chains for them cost 0.6-0.8% of a core on a quiet machine (BENCHMARKS.md, Cost of looking).
        self._row_waits: frozenset[int] = frozenset()  # threads in LOCK WAIT at the last INNODB_TRX read
        self._row_waits_kept: frozenset[int] = frozenset()  # ... at that read and the one before it
        self._other_waits: frozenset[int] = frozenset()  # threads in another lock state at the last tick
        self.own: frozenset[int] = frozenset()  # thread ids of dbdiag's own connections
        self.own_id: int | None = None  # this session's thread id (the processlist read leaves it out)

    def _reset(self, now: float) -> None:
        self.window_start = now
        self.ticks = 0
        self.idle = 0
        self.waits: Counter[str] = Counter()
        self.cpu_states: Counter[str] = Counter()

    def check(self, s: Session, parts: Parts) -> Probe:
        _Plan(s, parts)
        return Probe(True, missing=parts.missing(), hint=parts.hint())

    def start(self) -> None:
        super().start()
        assert self.session is not None
        self.plan = _Plan(self.session, self.parts)
        self.own_id = connection_id(self.session)
        self.source = self.plan.source
        self._reset(time.monotonic())

    def _tick(self, s: Session) -> None:
        assert self.plan is not None
        source = self.plan.source
        if source == "performance_schema" and self.parts.is_on("waits_current"):
            rows = self.parts.call("waits_current", lambda: query_named(s, "waits_current"))
        else:
            source, rows = "processlist", None
        try:
            if rows is None:  # p_s off, or refused mid-run: the processlist still answers
                source, rows = "processlist", processlist(s, self.own_id)
        except DbError as e:
            if e.kind == "timeout":
                return  # a slow server: skip this tick, not the collector
            raise
        if self.ticks_total % TRX_EVERY_TICKS == 0:
            trx_rows = self.parts.call("innodb_trx", lambda: s.text_rows(session_sql(s, "innodb_trx"))) or []
            self.trx = {int(r[0]): (r[1] or "").upper() for r in trx_rows if r[0] is not None}  # id, state
            row_waits = frozenset(i for i, st in self.trx.items() if st == "LOCK WAIT")
            self._row_waits_kept, self._row_waits = row_waits & self._row_waits, row_waits
        if self.ticks_total % OWN_EVERY_TICKS == 0 and self.plan.ps_on and self.parts.is_on("own_sessions"):
            # Thread ids are not reused, so a set a second old drops no one (OWN_EVERY_TICKS).
            self.own = self.parts.call("own_sessions", lambda: own_threads(s)) or frozenset()
        self.ticks_total += 1
        locked: set[int] = set()
        counts, idle = classify(rows, self.trx, source, self.cpu_states, self.own, locked)
        if self.ctx.lock_gate is not None:  # the blocking sampler reads its chains only after a lock wait
            other = frozenset(locked - self._row_waits)
            opens = bool(locked & self._row_waits_kept) or bool(other & self._other_waits)
            self._other_waits = other
            self.ctx.lock_gate.tick(any(k.startswith("Lock:") for k in counts), opens=opens)
        self.waits.update(counts)
        self.idle += idle
        self.ticks += 1
        self.source = source

    def _summary(self, s: Session) -> tuple[dict[str, dict[str, int]], bool]:
        rows = self.parts.call("waits_summary", lambda: s.text_rows(session_sql(s, "waits_summary")))
        if rows is None:
            return {}, False
        full = self.records % SUMMARY_FULL_EVERY == 0
        out: dict[str, dict[str, int]] = {}
        now: dict[str, tuple[int, int]] = {}
        for r in rows:  # event, count, sum_ps: hundreds of rows a second with performance_schema's waits on
            ev, cnt, ps = r[0] or "", int(r[1] or 0), int(r[2] or 0)
            now[ev] = (cnt, ps)
            if full or self._last_summary.get(ev, (None,))[0] != cnt:
                out[ev] = {"count": cnt, "sum_ps": ps}
        self._last_summary = now
        return out, full

    def _record(self, s: Session | None) -> dict[str, Any]:
        rec: dict[str, Any] = {"samples": sum(self.waits.values()), "ticks": self.ticks, "idle": self.idle,
                               "waits": dict(self.waits), "source": self.source}
        if self.cpu_states:
            rec["cpu_states"] = dict(self.cpu_states)
        if s is not None and self.plan is not None and self.plan.ps_on:
            summary, full = self._summary(s)
            if summary or full:
                rec["summary"], rec["summary_full"] = summary, full
        self.note_parts_off(rec)
        self.records += 1
        return rec

    def sample(self) -> dict[str, Any] | None:
        s = self.session
        assert s is not None, "start() first"
        now = time.monotonic()
        rec = None
        if self.ticks and now - self.window_start >= WINDOW_S - TICK_S / 2:
            rec = self._record(s)  # the window [start, now) is complete; this tick opens the next one
            self._reset(now)
        self._tick(s)
        return rec

    def stop(self) -> list[dict[str, Any]] | None:
        out = [self._record(self.session)] if self.session is not None and self.ticks else None
        super().stop()
        return out
