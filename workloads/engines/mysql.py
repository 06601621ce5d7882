"""MySQL / MariaDB's part of the workloads layer, registered in :mod:`workloads.engines`: its workload clients
(libmariadb through ctypes first), its bulk load (table with its primary key, multi-row INSERTs of about 1 MB with
unique and foreign-key checks off, then the secondary indexes and ANALYZE TABLE), its native-executor binding
(libmariadb) and how a watched server's counters read (SHOW GLOBAL STATUS, SHOW PROCESSLIST).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TextIO

from diag.core.db import Session
from diag.core.engines import MYSQL
from diag.core.errors import DbError
from diag.core.sqlfiles import MARKER
from diag.core.targets import Target
from workloads.clients import mylib
from workloads.clients.myclient import MyClient, MyLibClient
from workloads.engines.parts import NATIVE_CONNECT_TIMEOUT_S, NativeBinding, WatchReading, WorkloadParts
from workloads.native.cext import _native
from workloads.tables import SCHEMA, Dataset, Progress, RowFormat, Table, create_ddl, row_chunks
from workloads.watch.readings import Reading, WindowCounts, delta

if TYPE_CHECKING:
    from workloads.watch.watch_counters import CounterReader

# Explicit transactions, and the data statements an autocommit load's transactions are counted by (SHOW GLOBAL
# STATUS; see workloads.watch.watch_counters).
MY_EXPLICIT = ("Com_commit", "Com_rollback")
MY_DATA = ("Com_select", "Com_insert", "Com_update", "Com_delete", "Com_replace", "Com_insert_select",
           "Com_replace_select", "Com_update_multi", "Com_delete_multi", "Com_call_procedure", "Com_load")

# --------------------------------------------------------------------------- bulk load


def load_table(s: Session, t: Table, out: TextIO | None) -> None:
    """CREATE TABLE with its primary key, multi-row INSERTs of about 1 MB with unique and foreign-key checks
    off, then the secondary indexes and ANALYZE TABLE."""
    prog = Progress(out, f"loading {t.qname}", t.count)
    s.execute(create_ddl(s.dbms, t, with_pk=True))
    if t.rows is not None or t.chunks is not None:
        head = f"INSERT INTO {t.qname} ({', '.join(t.columns())}) VALUES "
        s.execute("SET SESSION unique_checks = 0, foreign_key_checks = 0")
        try:
            with s.dbms.translate_errors(s.target.label):
                cur = s.conn.cursor()
                done = 0
                for n, text in row_chunks(t, RowFormat.VALUES):
                    cur.execute(head + text)
                    done += n
                    prog.update(done)
                cur.close()
        finally:
            s.execute("SET SESSION unique_checks = 1, foreign_key_checks = 1")
    if t.indexes:
        adds = ", ".join(f"ADD INDEX {name} ({cols})" for name, cols in t.indexes)
        s.execute(f"ALTER TABLE {t.qname} {adds}")
    s.execute(f"ANALYZE TABLE {t.qname}")
    prog.done()


def loaded_current(s: Session, ds: Dataset) -> bool:
    """Whether ``ds``'s tables have the collation of database ``dbdiag`` (the server's default when it was
    created), as tables created now would. Tables of an older dbdiag were made utf8mb4 whatever the
    default: those are reloaded, so the same workload does not sort utf8mb4 on one server and latin1 on
    another."""
    names = [t.name for t in ds.tables]
    marks = ", ".join(["%s"] * len(names))
    rows = s.query("SELECT COUNT(*) AS n FROM information_schema.TABLES t JOIN information_schema.SCHEMATA d "
                   "ON d.SCHEMA_NAME = t.TABLE_SCHEMA WHERE t.TABLE_SCHEMA = %s AND t.TABLE_NAME IN (" + marks +
                   ") AND t.TABLE_COLLATION <> d.DEFAULT_COLLATION_NAME", (SCHEMA, *names))
    return int(rows[0]["n"]) == 0


# --------------------------------------------------------------------------- native executor


def native_library() -> str | None:
    """libmariadb, as :mod:`workloads.clients.mylib` loads it."""
    return "libmariadb.so.3" if mylib.library() is not None else None


def native_open(target: Target, isolation: str, nonblock: bool = False) -> Any:
    """A libmariadb connection of the C side (the isolation is set after it); None without libmariadb."""
    path = native_library()
    if path is None:
        return None
    host = None if target.socket else (target.host or "127.0.0.1")
    port = 0 if target.socket else (target.port or 3306)
    cap, why, detail = _native.my_open(path.encode(), host, target.user.encode(), (target.password or "").encode(),
                                       target.database or None, port, target.socket or None, NATIVE_CONNECT_TIMEOUT_S,
                                       nonblock)
    if cap is None and why == "connect":
        raise MYSQL.map_error(mylib._MyFailure(int(detail[0]), detail[1].decode(errors="replace")), target.label)
    return cap


def native_error(label: str, code: bytes, msg: bytes, lost: bool) -> DbError:
    """The C side's errno and message as our error."""
    return MYSQL.map_error(mylib._MyFailure(int(code or b"0"), msg.decode(errors="replace")), label)


# --------------------------------------------------------------------------- watch


_MY_SERVER_USERS = frozenset({"system user", "event_scheduler"})


def my_sessions(rows: list[tuple[str | None, ...]], own_id: int | None) -> tuple[int, int]:
    """(sessions, busy) from SHOW PROCESSLIST rows (Id, User, Host, db, Command, Time, State, Info...): every
    client thread but ``own_id``; busy: running a statement that is not one of dbdiag's (its marker)."""
    sessions = busy = 0
    for row in rows:
        if row[0] is None or int(row[0]) == own_id or row[1] in _MY_SERVER_USERS or row[4] == "Daemon":
            continue
        sessions += 1
        busy += row[4] != "Sleep" and MARKER not in (row[7] or "")
    return sessions, busy


def watch_read(r: CounterReader) -> Reading:
    """SHOW GLOBAL STATUS and the processlist's sessions."""
    # Two SHOWs: neither is counted among the data statements (Com_select), so neither is one of ``reads``.
    counters = {str(x[0]): float(x[1] or 0) for x in r.s.text_rows(r.sql["counters"])}
    sessions, busy = _sessions(r)
    # dbdiag's own idle sessions are among the connected ones: not a count of the workload's (see clients)
    return Reading(time.time(), counters, -1, busy, 0, sessions)


def watch_counts(a: Reading, b: Reading, own_reads: float) -> WindowCounts:
    """Explicit transactions between two readings, else autocommit data statements less dbdiag's own SELECTs."""
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


def _sessions(r: CounterReader) -> tuple[int, int]:
    if r.own_id is None:
        r.own_id = int(r.s.query("SELECT CONNECTION_ID() AS id")[0]["id"])
        r.reads += 1
    return my_sessions(r.s.text_rows(r.sql["sessions"]), r.own_id)


def watch_look(r: CounterReader) -> Reading:
    """The sessions only: the status counters are read at the window's edges (one SHOW GLOBAL STATUS fewer twice
    a second)."""
    sessions, busy = _sessions(r)
    return Reading(time.time(), {}, -1, busy, 0, sessions)


PARTS = WorkloadParts(
    clients={"libmariadb": MyLibClient, "mysqlclient": MyClient, "PyMySQL": MyClient},
    workload_driver=mylib.driver_info,
    load_table=load_table,
    loaded_current=loaded_current,
    native=NativeBinding(native_open, native_error, native_library),
    watch=WatchReading(watch_read, watch_look, watch_counts, by_port=False),
)
