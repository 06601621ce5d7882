"""A watched server's own counters, read at the edges of each window of ``dbdiag watch``.

When dbdiag does not drive the load, a window's result row is made from what the
server counts (../shared/ARCHITECTURE.md, "A step is a window that a load fills").
What is counted, per engine:

* PostgreSQL: transactions = ``xact_commit + xact_rollback`` of the watched database
  (the DSN's) in pg_stat_database, readable by any role. dbdiag's own sessions run
  their catalog reads in that database too, one autocommit transaction each: the
  watch subtracts its own counter reads exactly and its sources' reads as estimated
  from their cadence (:func:`own_reads_per_s`), and says so in the row. ``busy_ms``
  (14+): the time the database's sessions spent running statements or idle inside a
  transaction (active_time + idle_in_transaction_time), so busy_ms / transactions is
  the server-side transaction latency (round trips inside a transaction included,
  those between transactions not). Statements/s come from pg_stat_statements when it
  is loaded (the step's statement digests), else they are not known.
* MySQL/MariaDB: global counters (SHOW GLOBAL STATUS; every database and session).
  Transactions = ``Com_commit + Com_rollback`` (explicit COMMIT / ROLLBACK, which
  dbdiag's own sessions never send) when the window has any; a window without any is
  an autocommit load, and each data statement (``Com_select``, ``Com_insert``,
  ``Com_update``, ``Com_delete``, ``Com_replace``, their multi-table and
  ``..._select`` forms, ``Com_load``, ``Com_call_procedure``) is one transaction, less
  dbdiag's own SELECTs (estimated as above). A load that mixes explicit transactions
  with autocommit statements is counted by its explicit transactions only (the row
  says which rule counted). Statements = those data statements, less dbdiag's own.

``sessions``: the workload's client sessions connected now (dbdiag's left out);
``busy``: of them, running a statement (PostgreSQL: any state but idle). On MySQL/MariaDB
the sessions count includes dbdiag's own idle ones (no way to tell them without
performance_schema), so only ``busy`` is used for the client count there.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from diag.db import OWN_PREFIX, Session
from diag.engines import MYSQL, POSTGRES
from diag.sqlfiles import pick_in

SQL_DIRS = {POSTGRES.name: Path(__file__).with_name("watch_sql") / "pg",
            MYSQL.name: Path(__file__).with_name("watch_sql") / "mysql"}

MY_EXPLICIT = ("Com_commit", "Com_rollback")
MY_DATA = ("Com_select", "Com_insert", "Com_update", "Com_delete", "Com_replace", "Com_insert_select",
           "Com_replace_select", "Com_update_multi", "Com_delete_multi", "Com_call_procedure", "Com_load")

# Reads per second each sampled source issues in the watched database: one autocommit transaction each
# (MySQL: one SELECT each). The 10 Hz samplers read once a tick (blocking: a second read only while a
# session is blocked), pg_stats five views a second, MySQL's status two SELECTs beside its SHOWs.
# PostgreSQL 15+ defers a backend's counter flush while it is busy more often than once a second (a 10 Hz
# SELECT 1 here: 12 of 49 transactions counted within 5 s, all 49 once it disconnected), so over a short
# watch of an idle database fewer are counted than issued (7.8/s of ~27/s in 16 s here) and the estimate
# errs high: an idle server stays at 0 (the clamp), never shows phantom load. Under a load the deferred
# flushes come in (an application at 150 tps: 24/s counted beside it); over a long watch all do.
OWN_READS_PER_S: Mapping[str, float] = {
    "pg_waits": 10.0, "pg_blocking": 10.0, "pg_stats": 5.1, "pg_settings": 0.0,
    "mysql_waits": 10.0, "mysql_blocking": 10.0, "mysql_status": 2.0, "mysql_settings": 0.2,
}
# Reads the in-process statement sources make at each window's edges (snapshots, table counters, texts, plans).
OWN_READS_PER_WINDOW: Mapping[str, float] = {"statements": 8.0, "pg_tables": 2.0, "oldest_xact": 2.0}


def own_reads_per_s(sources: list[str]) -> float:
    """Catalog reads per second of these sources (names as in run.json ``collectors``, ``name--label``)."""
    return sum(OWN_READS_PER_S.get(s.split("--", 1)[0], 0.0) for s in sources)


def own_reads_per_window(sources: list[str]) -> float:
    return sum(OWN_READS_PER_WINDOW.get(s.split("--", 1)[0], 0.0) for s in sources)


@dataclass(frozen=True)
class Reading:
    """One read of a server's counters: cumulative counts, and the sessions connected now.

    ``t``: Unix s. ``counters``: name -> cumulative value (engine-specific, see the module docstring).
    """

    t: float
    counters: Mapping[str, float]
    sessions: int
    busy: int
    hidden: int = 0  # sessions of other roles whose state this role may not see (PostgreSQL)
    connected: int = 0  # every client session connected, dbdiag's own included (MySQL/MariaDB)

    def clients(self, baseline: int | None = None) -> int:
        """The workload's clients as this engine can count them: connected sessions where dbdiag's own are
        known apart (PostgreSQL), else (MySQL/MariaDB: ``sessions`` = -1) the sessions connected beyond
        ``baseline`` (those before a load command started: dbdiag's own and idle ones), at least those
        running a statement."""
        if self.sessions >= 0:
            return self.sessions
        return max(self.busy, self.connected - baseline) if baseline is not None else self.busy


class CounterReader:
    """Reads a target's counters in its own session (``dbdiag:watch``); counts its own reads."""

    def __init__(self, session: Session) -> None:
        self.s = session
        self.engine = session.dbms
        folder = SQL_DIRS[self.engine.name]
        self.sql = {n: pick_in(folder, n, self.engine, session.version_num, session.product)
                    for n in _READS[self.engine.name]}
        self.reads = 0  # statements this reader ran (PostgreSQL: transactions in the watched database)

    def read(self) -> Reading:
        return _READERS[self.engine.name](self)

    def client_ports(self) -> SessionPorts | None:
        """The server's client sessions by port (:class:`SessionPorts`), or None where the server's
        transactions are counted server-wide (MySQL/MariaDB: every client of the server is the watched
        load's, and its sessions are threads of one process)."""
        if self.engine.name != POSTGRES.name:
            return None
        if "client_ports" not in self.sql:
            self.sql["client_ports"] = pick_in(SQL_DIRS[self.engine.name], "client_ports", self.engine,
                                               self.s.version_num, self.s.product)
        self.reads += 1
        rows = self.s.query(self.sql["client_ports"], {"own": OWN_PREFIX + "%"})
        ports = [(r, int(r["port"])) for r in rows if isinstance(r.get("port"), int) and r["port"] > 0]
        return SessionPorts(frozenset(p for r, p in ports if r.get("here")),
                            frozenset(p for r, p in ports if not r.get("here")),
                            tuple(sorted(int(r["pid"]) for r in rows if r.get("own"))))


@dataclass(frozen=True)
class SessionPorts:
    """What the server shows of its client sessions: the client ports of the watched database's workload
    sessions (``here``), of every other TCP session (``elsewhere``: other databases', dbdiag's own), and the
    backend PIDs of dbdiag's own sessions (``own_pids``)."""

    here: frozenset[int]
    elsewhere: frozenset[int]
    own_pids: tuple[int, ...]


def _pg_read(r: CounterReader) -> Reading:
    r.reads += 1
    row = (r.s.query(r.sql["counters"], {"own": OWN_PREFIX + "%"}) or [{}])[0]
    counters = {"transactions": float(row.get("transactions") or 0)}
    if row.get("busy_ms") is not None:
        counters["busy_ms"] = float(row["busy_ms"])
    return Reading(time.time(), counters, int(row.get("sessions") or 0), int(row.get("busy") or 0),
                   int(row.get("hidden") or 0))


def _my_read(r: CounterReader) -> Reading:
    r.reads += 2
    counters = {str(x["Variable_name"]): float(x["Value"]) for x in r.s.query(r.sql["counters"])}
    row = (r.s.query(r.sql["sessions"]) or [{}])[0]
    # dbdiag's own idle sessions are among the connected ones: not a count of the workload's (see clients)
    return Reading(time.time(), counters, -1, int(row.get("busy") or 0), 0, int(row.get("sessions") or 0))


_READS = {POSTGRES.name: ("counters",), MYSQL.name: ("counters", "sessions")}
_READERS = {POSTGRES.name: _pg_read, MYSQL.name: _my_read}


def delta(a: Reading, b: Reading, key: str) -> float | None:
    """Increase of counter ``key`` from ``a`` to ``b``; a decrease (reset, restart) counts from 0."""
    x, y = a.counters.get(key), b.counters.get(key)
    if x is None or y is None:
        return None
    return y - x if y >= x else y


@dataclass(frozen=True)
class WindowCounts:
    """What the server counted in one window, dbdiag's own reads taken out.

    ``rule``: how transactions were counted, in words. ``own_transactions``: what was subtracted.
    """

    transactions: float
    statements: float | None
    busy_ms: float | None
    own_transactions: float
    rule: str
    raw: float = 0.0  # what the server counted, dbdiag's own reads included
    own_estimate: float = 0.0  # dbdiag's reads in the window as estimated (own_transactions is at most raw)


def window_counts(engine_name: str, a: Reading, b: Reading, own_reads: float) -> WindowCounts:
    """The window's counts from its two readings; ``own_reads``: dbdiag's reads in it (estimated)."""
    return _COUNTS[engine_name](a, b, own_reads)


def _pg_counts(a: Reading, b: Reading, own_reads: float) -> WindowCounts:
    raw = delta(a, b, "transactions") or 0.0
    own = min(raw, own_reads)
    return WindowCounts(raw - own, None, delta(a, b, "busy_ms"), own,
                        "xact_commit + xact_rollback of the watched database (pg_stat_database), "
                        "less dbdiag's own catalog reads", raw, own_reads)


def _my_counts(a: Reading, b: Reading, own_reads: float) -> WindowCounts:
    explicit = sum(delta(a, b, k) or 0.0 for k in MY_EXPLICIT)
    data = sum(delta(a, b, k) or 0.0 for k in MY_DATA)
    own = min(data, own_reads)
    if explicit > 0:
        return WindowCounts(explicit, data - own, None, 0.0,
                            "Com_commit + Com_rollback (explicit transactions; autocommit statements beside "
                            "them are not counted)", explicit, own_reads)
    return WindowCounts(data - own, data - own, None, own,
                        "autocommit data statements (Com_select, Com_insert, Com_update, Com_delete, ...), "
                        "less dbdiag's own SELECTs", data, own_reads)


_COUNTS = {POSTGRES.name: _pg_counts, MYSQL.name: _my_counts}
