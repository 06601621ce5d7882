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

from diag.core.db import OWN_PREFIX, Session
from diag.core.engines import ENGINES, engine_for
from diag.core.sqlfiles import pick_in
from workloads.engines import workload_parts
from workloads.watch.readings import Reading, WindowCounts, delta

SQL_DIRS = {e.name: Path(__file__).with_name("watch_sql") / e.sql_folder for e in ENGINES}

# Reads per second each sampled source issues in the watched database: one autocommit transaction each
# (MySQL: one SELECT each). The 10 Hz samplers read once a tick (blocking: a second read only while a
# session is blocked), pg_stats five views a second, MySQL's status two SELECTs beside its SHOWs.
# PostgreSQL 15+ defers a backend's counter flush while it is busy more often than once a second (a 10 Hz
# SELECT 1 here: 12 of 49 transactions counted within 5 s, all 49 once it disconnected), so over a short
# watch of an idle database fewer are counted than issued (7.8/s of ~27/s in 16 s here) and the estimate
# errs high: an idle server stays at 0 (the clamp), never shows phantom load. Under a load the deferred
# flushes come in (an application at 150 tps: 24/s counted beside it); over a long watch all do.
# MySQL/MariaDB count only SELECTs among the data statements (Com_select; a SHOW is Com_show_*: measured on
# 10.11, 100 SHOW GLOBAL STATUS and 100 SHOW PROCESSLIST added 0 to Com_select). Its samplers' SELECTs:
# my_waits INNODB_TRX every 3rd tick, and with performance_schema ON dbdiag's own threads as often and the wait
# summaries once a second (counted: with it OFF the estimate errs high by 4.3/s, as intended above);
# my_status INNODB_METRICS once a second; my_settings SYSTEM_VARIABLES every 5 s; my_blocking none while no
# lock wait is seen (its 10 Hz reads then: under a lock wait, not an idle server).
OWN_READS_PER_S: Mapping[str, float] = {
    "pg_waits": 10.0, "pg_blocking": 10.0, "pg_stats": 5.1, "pg_settings": 0.0,
    "my_waits": 10 / 3 + 10 / 3 + 1.0, "my_blocking": 0.0, "my_status": 1.0, "my_settings": 0.2,
}
# Reads the in-process statement sources make at each window's edges (snapshots, table counters, texts, plans).
OWN_READS_PER_WINDOW: Mapping[str, float] = {"statements": 8.0, "pg_tables": 2.0, "oldest_xact": 2.0}


def own_reads_per_s(sources: list[str]) -> float:
    """Catalog reads per second of these sources (names as in run.json ``collectors``, ``name--label``)."""
    return sum(OWN_READS_PER_S.get(s.split("--", 1)[0], 0.0) for s in sources)


def own_reads_per_window(sources: list[str]) -> float:
    return sum(OWN_READS_PER_WINDOW.get(s.split("--", 1)[0], 0.0) for s in sources)


class CounterReader:
    """Reads a target's counters in its own session (``dbdiag:watch``); counts its own reads."""

    def __init__(self, session: Session) -> None:
        self.s = session
        self.engine = session.dbms
        folder = SQL_DIRS[self.engine.name]
        self.sql = {n: pick_in(folder, n, self.engine, session.version_num, session.product)
                    for n in self.engine.watch_reads}
        # statements this reader ran that the server counts as the load's (PostgreSQL: transactions in the watched
        # database; MySQL/MariaDB: SELECTs, Com_select)
        self.reads = 0
        self.own_id: int | None = None  # this session's thread id (MySQL/MariaDB: left out of the sessions)

    def read(self) -> Reading:
        """The counters and the sessions (the engine's ``WatchReading.read``)."""
        return workload_parts(self.engine).watch.read(self)

    def look(self) -> Reading:
        """A reading for its sessions only (the watch's looks inside a window): MySQL/MariaDB leave the status
        counters out (one SHOW GLOBAL STATUS fewer twice a second; its counters are read at the window's
        edges), PostgreSQL reads both in its one statement (the engine's ``WatchReading.look``)."""
        return workload_parts(self.engine).watch.look(self)

    def client_ports(self) -> SessionPorts | None:
        """The server's client sessions by port (:class:`SessionPorts`), or None where the server's
        transactions are counted server-wide (MySQL/MariaDB: every client of the server is the watched
        load's, and its sessions are threads of one process)."""
        if not workload_parts(self.engine).watch.by_port:
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


def window_counts(engine_name: str, a: Reading, b: Reading, own_reads: float) -> WindowCounts:
    """The window's counts from its two readings; ``own_reads``: dbdiag's reads in it (estimated)."""
    return workload_parts(engine_for(engine_name)).watch.counts(a, b, own_reads)


# The records are workloads.watch.readings'; the watch imports them from here too.
__all__ = ["OWN_READS_PER_S", "OWN_READS_PER_WINDOW", "SQL_DIRS", "CounterReader", "Reading", "SessionPorts",
           "WindowCounts", "delta", "own_reads_per_s", "own_reads_per_window", "window_counts"]
