"""Blocking chains of MySQL / MariaDB: who blocks the threads that wait for a lock, at the wait rate.

Every tick (10 Hz, :data:`collectors.mysql.waits.TICK_S`) reads the processlist (query
``blocking_threads``). Threads whose state says they wait for a metadata or table lock ("Waiting for table
metadata lock": LOCK TABLES, DDL, a table an open transaction touched) get their holders from, in order:

* performance_schema.metadata_locks (``mdl_waits``; performance_schema ON with the
  wait/lock/metadata/sql/mdl instrument, which MySQL 8 enables and MariaDB does not by default);
* MariaDB's metadata_lock_info plugin (``mdl_info``), when installed: the threads holding a lock on a
  table the waiting statement names;
* else no holder is named, and the record says why.

InnoDB row (and InnoDB table) lock waits come from ``lock_waits`` every
:data:`collectors.mysql.waits.TRX_EVERY_TICKS` ticks: INNODB_LOCK_WAITS + INNODB_LOCKS + INNODB_TRX
(MariaDB, MySQL 5.7), performance_schema.data_lock_waits (MySQL 8). Those tables share InnoDB's cache
that is refreshed only after 100 ms without readers, so they are read no more often than the wait sampler
reads INNODB_TRX. An idle blocker's last statement comes from performance_schema.events_statements_current
(``last_statements``) when it is on. Records: :mod:`diag.core.schema.blocking`. Privileges: PROCESS (other
users' threads, InnoDB's tables), SELECT on performance_schema.

In a run these reads are made only while the wait sampler (:mod:`collectors.mysql.waits`) has counted a
``Lock:`` state in the last :data:`collectors.lockgate.HOLD_S` s, or whenever it is not ticking
(:mod:`collectors.lockgate`); the other ticks count as samples that saw nobody wait and cost no query. A wait
of a thread the wait sampler leaves out (dbdiag's own) is then seen only while a workload thread waits too. The
first read after skipped ticks counts each waiter's time by the server's clock (its state's or its lock wait's
age), at most back to the previous read (:func:`collectors.blocking.catch_up`).
"""

from __future__ import annotations

import re
import time
from typing import Any

from collectors.base import CollectorContext, Probe
from collectors.blocking import (Seen, Wait, WindowBuilder, blocking_metrics, catch_up, catch_up_gap, seconds,
                                text)
from collectors.lockgate import TickPace
from collectors.mysql.common import GRANT_PROCESS, GRANT_PS, MyCollector, Parts, query_named
from collectors.mysql.waits import TICK_S, TRX_EVERY_TICKS, connection_id
from collectors.sampling import TickSampler
from collectors.sql import MARKER, session_sql
from diag.core.db import Session

MDL_HINT = ("performance_schema=ON with performance-schema-instrument='wait/lock/metadata/sql/mdl=ON', or on "
            "MariaDB INSTALL SONAME 'metadata_lock_info'")
HINTS = {"lock_waits": GRANT_PROCESS, "processlist": GRANT_PROCESS, "metadata_locks": GRANT_PS,
         "last_statements": GRANT_PS, "metadata_lock_info": MDL_HINT}
NO_MDL_SOURCE = "metadata lock holders (LOCK TABLES, DDL) not visible"
THR_LOCK = "table-level lock (THR_LOCK) holders are not shown by the server"
_LOCK_WAIT = re.compile(r"^Waiting for (.*)lock$", re.IGNORECASE)
_BACKGROUND_USERS = frozenset({"system user", "event_scheduler"})
_WORD = r"(?<![\w$`]){}(?![\w$])"
# Metadata lock modes only LOCK TABLES takes (sql/mdl.h), said in the lock's words too.
_LOCK_TABLES_MODES = {"SHARED_NO_READ_WRITE": "LOCK TABLES ... WRITE", "SHARED_READ_ONLY": "LOCK TABLES ... READ"}


def _on(v: Any) -> bool:
    return text(v).upper() in ("1", "ON", "YES")


def lock_wait_state(row: dict[str, Any]) -> str:
    """"metadata", "table" (THR_LOCK or other named lock) when a processlist row waits for a lock, else ""."""
    m = _LOCK_WAIT.match(text(row.get("state")).strip())
    if not m:
        return ""
    return "metadata" if "metadata" in m.group(1).lower() else "table"


def held_text(mode: str) -> str:
    """A held metadata lock mode, with the statement that takes it where only one does."""
    words = _LOCK_TABLES_MODES.get(mode.upper().removeprefix("MDL_"))
    return f"{mode} = {words}" if words else mode


def seen_thread(row: dict[str, Any], trx_s: float | None = None, statement: str = "") -> Seen:
    """A processlist row as a :class:`Seen` (``statement``: when INFO is empty, the last one known)."""
    command, state = text(row.get("command")), text(row.get("state")).strip()
    ms = seconds(row.get("time_ms"))
    said = f"{command}: {state}" if state else command
    if command == "Sleep" and trx_s is not None:
        said += " (idle in transaction)"  # the server waits for this client to finish its transaction
    return Seen(pid=int(row["id"]), user=text(row.get("user")), client=text(row.get("host")),
                state=said, statement=text(row.get("info")) or statement,
                xact_s=trx_s, state_s=ms / 1000 if ms is not None else None)


def mdl_holders_from_info(waiter: dict[str, Any], info: list[dict[str, Any]]) -> list[tuple[int, str, str]]:
    """(holder, its lock mode, table) of the metadata_lock_info rows on a table the waiter's statement names."""
    stmt = text(waiter.get("info"))
    out = []
    for r in info:
        pid, name = int(r["pid"]), text(r.get("name"))
        if pid == int(waiter["id"]) or not name:
            continue
        if re.search(_WORD.format(re.escape(name)), stmt, re.IGNORECASE):
            out.append((pid, text(r.get("mode")), f"{text(r.get('db'))}.{name}"))
    return out


def no_mdl_reason(parts: Parts) -> str:
    """Why neither metadata lock source works: "... not visible: performance_schema is OFF, and the
    metadata_lock_info plugin is not installed"."""
    why = parts.off.get("metadata_locks", "").split(": ", 1)[-1].split(" (fix:")[0]
    return f"{NO_MDL_SOURCE}: {why}, and the metadata_lock_info plugin is not installed"


class MyBlockingCollector(TickSampler[WindowBuilder], MyCollector):
    """Who blocks whom (processlist, metadata locks, InnoDB lock waits) at the wait-sampling rate."""

    name = "my_blocking"
    title = "blocking sessions"
    interval_s = TICK_S
    hints = HINTS
    statement_timeout_ms = 1000
    metrics = blocking_metrics("processlist samples this window", "threads", "the previous one of its kind",
                               "each blocking thread: pid (thread id), user, client (host), state, statement, xact_s, "
                               "state_s (s), first_t/last_t (Unix s), ticks, blocked_s (s), blocked thread ids, lock, "
                               "waits_for, longest_wait_s (s)")

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.mdl_source = ""  # "metadata_locks", "metadata_lock_info" or "" (none)
        self.mdl_why = ""  # why there is none, for the records
        self._trx_due = 0.0  # monotonic s when INNODB_TRX is read next
        self._skipped: set[str] = set()  # kinds of read ("mdl", "row") skipped on the lock gate's word lately
        self._read_at: dict[str, float] = {}  # kind -> monotonic s of its last read of the server
        self._own_id: int | None = None  # this session's thread id (SHOW FULL PROCESSLIST lists it)
        self._pace = TickPace()

    def _plan(self, s: Session, parts: Parts) -> str:
        """Switch off what this server and user do not allow; the metadata lock source to use."""
        parts.call("processlist", lambda: query_named(s, "blocking_threads"))
        parts.call("lock_waits", lambda: query_named(s, "lock_waits"))
        rows = s.query("SELECT @@performance_schema AS ps")
        ps_on = bool(rows and _on(rows[0]["ps"]))
        if ps_on:
            inst = parts.call("metadata_locks", lambda: query_named(s, "mdl_instrument"))
            if inst is not None and (not inst or not _on(inst[0]["enabled"])):
                parts.switch_off("metadata_locks", "instrument wait/lock/metadata/sql/mdl is off",
                                 hint="UPDATE performance_schema.setup_instruments SET ENABLED='YES' WHERE "
                                      "NAME='wait/lock/metadata/sql/mdl'")
            parts.call("metadata_locks", lambda: query_named(s, "mdl_waits"))
            parts.call("last_statements", lambda: query_named(s, "last_statements", {"pids": "0"}))
        else:
            parts.switch_off("metadata_locks", "performance_schema is OFF", hint=MDL_HINT)
            parts.switch_off("last_statements", "performance_schema is OFF: an idle blocker's last statement "
                             "is not known", hint="performance_schema=ON in my.cnf, restart")
        if parts.is_on("metadata_locks"):
            return "metadata_locks"
        parts.call("metadata_lock_info", lambda: query_named(s, "mdl_info"))
        return "metadata_lock_info" if parts.is_on("metadata_lock_info") else ""

    def check(self, s: Session, parts: Parts) -> Probe:
        source = self._plan(s, parts)
        if not parts.is_on("processlist"):
            return Probe(False, parts.off["processlist"], parts.hint())
        mdl = ("metadata_locks", "metadata_lock_info")
        missing = [m for k, m in parts.off.items() if k not in mdl]
        hints = [h for h in parts.hint().split("; ") if h and h != MDL_HINT]
        if not source:  # one line for both ways of seeing metadata lock holders
            missing.insert(0, f"{no_mdl_reason(parts)} (fix: {MDL_HINT})")
            hints.insert(0, MDL_HINT)
        return Probe(True, missing=tuple(missing), hint="; ".join(dict.fromkeys(hints)))

    def start(self) -> None:
        super().start()
        assert self.session is not None
        self.mdl_source = self._plan(self.session, self.parts)
        self.mdl_why = "" if self.mdl_source else no_mdl_reason(self.parts)
        self._own_id = connection_id(self.session)
        self.parts.unsaid()  # the probe said these already
        self._window = self._new_window()

    def _new_window(self) -> WindowBuilder:
        return WindowBuilder(self.ctx.statement_text)

    def _mdl_waits(self, s: Session, waiters: list[dict[str, Any]], period: float) -> list[Wait]:
        """The metadata / table lock waits of one tick, with their holders where a source shows them."""
        rows: list[dict[str, Any]] = []
        info: list[dict[str, Any]] = []
        if self.mdl_source == "metadata_locks" and any(lock_wait_state(w) == "metadata" for w in waiters):
            rows = self.parts.call("metadata_locks", lambda: query_named(s, "mdl_waits")) or []
        elif self.mdl_source == "metadata_lock_info" and any(lock_wait_state(w) == "metadata" for w in waiters):
            info = self.parts.call("metadata_lock_info", lambda: query_named(s, "mdl_info")) or []
        out = []
        for w in waiters:
            pid, kind = int(w["id"]), lock_wait_state(w)
            ms = seconds(w.get("time_ms"))
            wait_s = ms / 1000 if ms is not None else None
            if kind == "table":
                out.append(Wait(pid, (), text(w.get("state")), period, wait_s, THR_LOCK))
                continue
            mine = [r for r in rows if r.get("pid") is not None and int(r["pid"]) == pid and r.get("blocker")]
            if mine:
                r = mine[0]
                lock = f"{text(r['wanted'])} on {text(r['object'])} (held: {held_text(text(r['held']))})"
                out.append(Wait(pid, tuple(sorted({int(r["blocker"]) for r in mine})), lock, period, wait_s))
                continue
            held = mdl_holders_from_info(w, info) if info else []
            if held:
                lock = f"metadata lock on {held[0][2]} (held: {held_text(held[0][1])}; from metadata_lock_info)"
                out.append(Wait(pid, tuple(sorted({h[0] for h in held})), lock, period, wait_s))
                continue
            out.append(Wait(pid, (), "metadata lock", period, wait_s, self.mdl_why))
        return out

    def _row_waits(self, s: Session, period: float) -> tuple[list[Wait], dict[int, dict[str, Any]]]:
        """InnoDB lock waits (one Wait per waiter) and the blockers' transaction rows by thread id."""
        rows = self.parts.call("lock_waits", lambda: query_named(s, "lock_waits")) or []
        by_waiter: dict[int, list[dict[str, Any]]] = {}
        for r in rows:
            if r.get("pid") is not None and r.get("blocker") is not None:
                by_waiter.setdefault(int(r["pid"]), []).append(r)
        waits, trx = [], {}
        for pid, rs in by_waiter.items():
            r = rs[0]
            lock = f"{text(r.get('wanted'))} {text(r.get('lock_type')).lower()} lock on {text(r.get('lock_table'))}"
            if r.get("lock_index"):
                lock += f" index {text(r['lock_index'])}"
            if r.get("held"):
                lock += f" (held: {text(r['held'])})"
            waits.append(Wait(pid, tuple(sorted({int(x["blocker"]) for x in rs})), lock, period,
                              seconds(r.get("wait_s"))))
            for x in rs:
                trx[int(x["blocker"])] = x
        return waits, trx

    def _seen(self, s: Session, threads: dict[int, dict[str, Any]], waits: list[Wait],
              trx: dict[int, dict[str, Any]]) -> dict[int, Seen]:
        """The blockers of this tick as the processlist (and their transactions) show them."""
        pids = sorted({b for w in waits for b in w.blockers})
        idle = [p for p in pids if p in threads and not text(threads[p].get("info"))]
        last: dict[int, str] = {}
        if idle and self.parts.is_on("last_statements"):
            got = self.parts.call("last_statements", lambda: query_named(
                s, "last_statements", {"pids": ",".join(str(p) for p in idle)})) or []
            last = {int(r["pid"]): text(r.get("statement")) for r in got if r.get("pid") is not None}
        seen = {}
        for p in pids:
            t = trx.get(p, {})
            stmt = last.get(p) or text(t.get("b_query"))
            if p in threads:
                seen[p] = seen_thread(threads[p], seconds(t.get("b_xact_s")), stmt)
            else:
                seen[p] = Seen(p, statement=stmt, xact_s=seconds(t.get("b_xact_s")))
        return seen

    def _tick(self) -> None:
        s = self.session
        assert s is not None, "start() first"
        now = time.monotonic()
        # INNODB_TRX every TRX_EVERY_TICKS ticks' time, not count: a slowed tick (lockgate.TickPace) reads it each
        # time, so no period exceeds the window cap of _since
        trx_tick = now - self._trx_due >= -TICK_S / 2
        if trx_tick:
            self._trx_due = now + TICK_S * TRX_EVERY_TICKS
        gate = self.ctx.lock_gate
        quiet = gate is not None and gate.quiet(TICK_S, now)
        self.interval_s = (self._pace.tick_s(TICK_S, quiet, now, gate.ticking(TICK_S, now))
                           if gate is not None else TICK_S)
        if quiet:  # the wait sampler saw no lock wait
            self._since("mdl", now, TICK_S)
            self._skipped.add("mdl")
            if trx_tick:
                self._since("row", now, TICK_S * TRX_EVERY_TICKS)
                self._skipped.add("row")
            self._window.add(time.time(), [], {})
            return
        rows = self.parts.call("processlist", lambda: self._show_threads(s))
        if rows is None:
            return
        if any(lock_wait_state(r) for r in rows):  # a metadata / table lock wait: date it to the millisecond
            rows = self.parts.call("processlist", lambda: query_named(s, "blocking_threads"))
            if rows is None:
                return
        threads = {int(r["id"]): r for r in rows if r.get("id") is not None
                   and not text(r.get("info")).startswith(MARKER) and text(r.get("user")) not in _BACKGROUND_USERS}
        waiters = [r for r in threads.values() if lock_wait_state(r)]
        period = self._since("mdl", now, TICK_S)  # every tick, so a first waiter counts one tick
        waits = self._caught_up("mdl", now, self._mdl_waits(s, waiters, period) if waiters else [])
        trx: dict[int, dict[str, Any]] = {}
        if trx_tick and self.parts.is_on("lock_waits"):
            row_waits, trx = self._row_waits(s, self._since("row", now, TICK_S * TRX_EVERY_TICKS))
            # InnoDB's lock tables are a cache up to 100 ms old (the module docstring): a wait whose waiter or
            # blocker has left the processlist read just before has ended; with PROCESS (which those tables
            # need) every live thread is in it.
            waits += self._caught_up("row", now, [w for w in row_waits
                                                  if w.pid in threads and all(b in threads for b in w.blockers)])
        self._window.add(time.time(), waits, self._seen(s, threads, waits, trx) if waits else {})

    def _show_threads(self, s: Session) -> list[dict[str, Any]]:
        """Every thread but this session's, as blocking_threads' rows (id, user, host, command, time_ms, state,
        info: 200 characters), from SHOW FULL PROCESSLIST read as text by position (Id, User, Host, db, Command,
        Time, State, Info on both products); ``time_ms`` in whole seconds."""
        out = []
        for r in s.text_rows(session_sql(s, "blocking_show")):
            if r[0] is None or int(r[0]) == self._own_id:
                continue
            out.append({"id": int(r[0]), "user": r[1], "host": r[2], "command": r[4],
                        "time_ms": int(r[5]) * 1000 if r[5] not in (None, "") else None,
                        "state": r[6], "info": (r[7] or "")[:200] if r[7] is not None else None})
        return out

    def _caught_up(self, kind: str, now: float, waits: list[Wait]) -> list[Wait]:
        """``waits`` of a read of ``kind`` ("mdl", "row") at ``now`` (monotonic s); after reads of that kind were
        skipped on the lock gate's word, each counts its time by the server's clock (:func:`catch_up`)."""
        last = self._read_at.get(kind)
        self._read_at[kind] = now
        if kind not in self._skipped:
            return waits
        self._skipped.discard(kind)
        return catch_up(waits, catch_up_gap(self.ctx.lock_gate, now, last))

    def _record(self, window: WindowBuilder) -> dict[str, Any]:
        return window.record(time.time(), self.parts.unsaid())
