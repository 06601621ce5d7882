"""PostgreSQL's part of the workloads layer, registered in :mod:`workloads.engines`: its workload clients, its bulk
load (CREATE TABLE and COPY ... FREEZE in one transaction, then the indexes side by side and VACUUM ANALYZE), its
native-executor binding (libpq) and how a watched server's counters read (pg_stat_database).
"""

from __future__ import annotations

import ctypes.util
import functools
import importlib.metadata
import io
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from diag.core.db import OWN_PREFIX, DriverInfo, Session
from diag.core.engines import POSTGRES
from diag.core.errors import DbError
from diag.core.targets import Target
from workloads.clients.clientbase import APP_NAME, ISOLATION_SQL
from workloads.clients.pgclient import Pg2Client, PgPqClient, _PgFailure
from workloads.engines.parts import (NATIVE_CONNECT_TIMEOUT_S, NativeBinding, WatchReading, WorkloadParts,
                                     always_current, no_workload_driver)
from workloads.native.cext import _native
from workloads.tables import PG_BINARY_HEADER, Progress, RowFormat, Table, create_ddl, parallel, row_chunks
from workloads.watch.readings import Reading, WindowCounts, delta

if TYPE_CHECKING:
    from workloads.watch.watch_counters import CounterReader

# --------------------------------------------------------------------------- bulk load


def load_table(s: Session, t: Table, out: TextIO | None) -> None:
    """CREATE TABLE and COPY ... FREEZE (binary where the table gives it and the driver is psycopg 3) in one
    transaction, then the primary key's index and the others side by side, the key attached, VACUUM ANALYZE."""
    conn = s.conn
    prog = Progress(out, f"loading {t.qname}", t.count)
    cols = ", ".join(t.columns())
    with s.dbms.translate_errors(s.target.label):
        if s.driver.name == "psycopg":
            with conn.transaction():
                cur = conn.cursor()
                cur.execute(create_ddl(s.dbms, t, with_pk=False))
                if t.pg_binary is not None:
                    done = 0
                    with cur.copy(f"COPY {t.qname} ({cols}) FROM STDIN WITH (FORMAT binary, FREEZE)") as cp:
                        cp.write(PG_BINARY_HEADER)  # psycopg adds the trailer
                        for n, data in t.pg_binary():
                            cp.write(data)
                            done += n
                            prog.update(done)
                elif t.rows is not None or t.chunks is not None:
                    done = 0
                    with cur.copy(f"COPY {t.qname} ({cols}) FROM STDIN WITH (FREEZE)") as cp:
                        for n, text in row_chunks(t, RowFormat.COPY_TEXT):
                            cp.write(text)
                            done += n
                            prog.update(done)
        else:  # psycopg2: copy_expert per chunk, in one transaction
            conn.autocommit = False
            try:
                cur = conn.cursor()
                cur.execute(create_ddl(s.dbms, t, with_pk=False))
                done = 0
                if t.rows is not None or t.chunks is not None:
                    for n, text in row_chunks(t, RowFormat.COPY_TEXT):
                        cur.copy_expert(f"COPY {t.qname} ({cols}) FROM STDIN", io.StringIO(text))
                        done += n
                        prog.update(done)
                conn.commit()
            finally:
                conn.autocommit = True
    # Build the primary key and the other indexes side by side (SHARE locks do not conflict),
    # then attach the unique index as the primary key (instant).
    builds = []
    pk_name = f"{t.name}_pkey"
    if t.primary_key:
        builds.append(f"CREATE UNIQUE INDEX {pk_name} ON {t.qname} ({t.primary_key})")
    builds += [f"CREATE INDEX {name} ON {t.qname} ({cols_})" for name, cols_ in t.indexes]
    parallel(s, builds)
    if t.primary_key:
        s.execute(f"ALTER TABLE {t.qname} ADD CONSTRAINT {pk_name} PRIMARY KEY USING INDEX {pk_name}")
    s.execute(f"VACUUM ANALYZE {t.qname}")
    prog.done()


# --------------------------------------------------------------------------- native executor


@functools.lru_cache(maxsize=1)  # asked at every native connect (each transaction under -C): found once
def native_library() -> str | None:
    """The libpq of psycopg's binary wheel (psycopg_binary.libs/), else the system's libpq.so.5."""
    try:
        files = importlib.metadata.files("psycopg-binary") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if Path(str(f)).name.startswith("libpq") and ".so" in str(f):
            return str(f.locate())
    return "libpq.so.5" if ctypes.util.find_library("pq") else None


def _conninfo(target: Target, isolation: str = "") -> bytes:
    """A libpq conninfo string from the engine's connection settings (values quoted); with ``isolation``
    (a key of ISOLATION_SQL) the session's isolation level rides in the start-up packet, which saves the
    round trip of a SET on each connection (it counts under --connect-per-transaction)."""
    kw = POSTGRES.connect_kwargs(target, DriverInfo("libpq", "", None), True, NATIVE_CONNECT_TIMEOUT_S, APP_NAME)
    if isolation:
        level = ISOLATION_SQL[isolation].lower().replace(" ", "\\ ")  # a space in options is escaped
        kw["options"] = f"-c default_transaction_isolation={level}"
    parts = []
    for k, v in kw.items():
        if v is None or v == "":
            continue
        s = str(v).replace("\\", "\\\\").replace("'", "\\'")
        parts.append(f"{k}='{s}'")
    return " ".join(parts).encode()


def native_open(target: Target, isolation: str, nonblock: bool = False) -> Any:
    """A libpq connection of the C side, the isolation level in its start-up packet; None without libpq."""
    path = native_library()
    if path is None:
        return None
    cap, why, detail = _native.pg_open(path.encode(), _conninfo(target, isolation))
    if cap is None and why == "connect":
        msg = detail.decode(errors="replace").strip() or "connection failed"
        raise POSTGRES.map_error(_PgFailure(msg, ""), target.label)
    return cap


def native_error(label: str, code: bytes, msg: bytes, lost: bool) -> DbError:
    """The C side's SQLSTATE and message as our error (kind "lost" when the connection is gone)."""
    text = msg.decode(errors="replace").strip() or "query failed"
    err = POSTGRES.map_error(_PgFailure(text, code.decode(errors="replace")), label)
    return DbError(str(err), code=err.code, kind="lost") if lost and err.kind not in ("lost", "connect") else err


# --------------------------------------------------------------------------- watch


def watch_read(r: CounterReader) -> Reading:
    """The watched database's transactions, busy time and sessions, in one statement (one transaction)."""
    r.reads += 1
    row = (r.s.query(r.sql["counters"], {"own": OWN_PREFIX + "%"}) or [{}])[0]
    counters = {"transactions": float(row.get("transactions") or 0)}
    if row.get("busy_ms") is not None:
        counters["busy_ms"] = float(row["busy_ms"])
    return Reading(time.time(), counters, int(row.get("sessions") or 0), int(row.get("busy") or 0),
                   int(row.get("hidden") or 0))


def watch_counts(a: Reading, b: Reading, own_reads: float) -> WindowCounts:
    """Transactions of the watched database between two readings, dbdiag's own catalog reads taken out."""
    raw = delta(a, b, "transactions") or 0.0
    own = min(raw, own_reads)
    return WindowCounts(raw - own, None, delta(a, b, "busy_ms"), own,
                        "xact_commit + xact_rollback of the watched database (pg_stat_database), "
                        "less dbdiag's own catalog reads", raw, own_reads)


PARTS = WorkloadParts(
    clients={"psycopg": PgPqClient, "psycopg2": Pg2Client},
    workload_driver=no_workload_driver,
    load_table=load_table,
    loaded_current=always_current,
    native=NativeBinding(native_open, native_error, native_library),
    watch=WatchReading(watch_read, watch_read, watch_counts, by_port=True),
)
