"""Creating and bulk-loading a workload's tables, reused while version and scale match.

Everything lives in schema ``dbdiag`` (PostgreSQL) or database ``dbdiag`` (MySQL),
created if absent; nothing else is touched. A dataset is described once as
:class:`Table` definitions plus row generators; each engine gets its fast path:

- PostgreSQL: ``CREATE TABLE`` and ``COPY ... FREEZE`` in one transaction (as
  ``pgbench -i``); then the primary key's unique index and the other indexes
  built side by side on separate connections, the key attached to its index, and
  ``VACUUM ANALYZE``.
- MySQL/MariaDB: table with its primary key (rows arrive in key order), multi-row
  ``INSERT`` of about 1 MB each with unique/foreign-key checks off, then the
  secondary indexes and ``ANALYZE TABLE``.

Big tables (sbtest, pgbench_accounts) also give a ``chunks`` formatter that
builds the text with one f-string per row; the generic path formats value by
value. sbtest also gives ``pg_binary``, COPY BINARY tuples: its 180 characters of
text per row cost the server more to parse than the binary form (12-23% less load
time at scale 10, measured here). Generating in a separate process was measured and gave nothing here: the
server's COPY, not the Python formatting, is the long pole.

What differs per engine (the container's DDL, column types, table options, bulk
path, text format) is a :class:`Dialect` in :data:`DIALECTS`, keyed by
:attr:`Engine.name <diag.engines.base.Engine.name>`.

``dbdiag.dbdiag_meta`` records (dataset, version, scale) only after a load
finishes, so an interrupted load is never mistaken for a complete one.
"""

from __future__ import annotations

import contextlib
import enum
import io
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from diag.db import Session, own_app_name
from diag.engines import MYSQL, POSTGRES, Engine, engine_for
from diag.errors import DbError
from workloads.sql import my_literal

SCHEMA = "dbdiag"
META = f"{SCHEMA}.dbdiag_meta"


class RowFormat(enum.Enum):
    """The text a bulk load sends: what ``Table.chunks`` is asked to produce."""

    COPY_TEXT = "copy text"  # COPY ... FROM STDIN text lines: tab-separated, \N for NULL, newline-ended
    VALUES = "values"        # "(..),(..)" lists for a multi-row INSERT, SQL literals


CHUNK_ROWS = 20000  # rows per COPY write
PG_BINARY_HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # signature, flags 0, no header extension


@dataclass(frozen=True)
class Table:
    """One table of a dataset.

    ``ddl`` is the column list (no primary key) with ``{engine}``-free tokens
    ``{ts}`` and ``{autoinc}``; ``rows`` yields tuples of int/str/float/None in
    primary-key order; ``count`` is how many it yields (for progress and checks).
    """

    name: str
    ddl: str
    primary_key: str
    indexes: tuple[tuple[str, str], ...] = ()  # (index name, column list)
    rows: Callable[[], Iterable[tuple[Any, ...]]] | None = None
    count: int = 0
    # Optional fast path for big tables: chunks(fmt) yields (rows, text) with text ready to send in
    # that RowFormat, in primary-key order.
    chunks: Callable[[RowFormat], Iterable[tuple[int, str]]] | None = None
    # Optional: the same rows as PostgreSQL COPY BINARY tuples (no file header or trailer), in
    # primary-key order; used instead of text when the driver is psycopg 3.
    pg_binary: Callable[[], Iterable[tuple[int, bytes]]] | None = None

    @property
    def qname(self) -> str:
        return f"{SCHEMA}.{self.name}"

    def columns(self) -> list[str]:
        return [c.strip().split()[0] for c in _split_cols(self.ddl)]


def _split_cols(ddl: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in ddl:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur)
    return out


@dataclass
class Dataset:
    """The tables one or more workloads share (e.g. sbtest for point-select and read-only)."""

    name: str
    version: int
    scale: float
    tables: list[Table] = field(default_factory=list)


class Progress:
    """A one-line progress bar on a terminal, a line per quarter otherwise."""

    def __init__(self, out: TextIO | None, what: str, total: int) -> None:
        self.out, self.what, self.total = out, what, max(total, 1)
        self.tty = bool(out and hasattr(out, "isatty") and out.isatty())
        self.t0 = time.monotonic()
        self._last_q = -1
        self._last_t = 0.0

    def update(self, done: int) -> None:
        if not self.out:
            return
        frac = min(done / self.total, 1.0)
        if self.tty:
            now = time.monotonic()
            if now - self._last_t < 0.2 and done < self.total:
                return
            self._last_t = now
            bar = "#" * int(frac * 30)
            self.out.write(f"\r  {self.what:<40} [{bar:<30}] {frac * 100:5.1f}% {done}/{self.total}")
            self.out.flush()
        else:
            q = int(frac * 4)
            if q > self._last_q:
                self._last_q = q
                self.out.write(f"  {self.what}: {frac * 100:.0f}% ({done}/{self.total} rows)\n")
                self.out.flush()

    def done(self) -> None:
        if self.out and self.tty:
            self.out.write(f"\r  {self.what:<40} done in {time.monotonic() - self.t0:.1f} s{' ' * 40}\n")
            self.out.flush()


def ensure_schema(s: Session) -> None:
    """Create schema/database ``dbdiag`` and the meta table if absent."""
    d = dialect(s.dbms)
    s.execute(f"CREATE {d.container} IF NOT EXISTS {SCHEMA}")
    s.execute(f"CREATE TABLE IF NOT EXISTS {META} (dataset varchar(64) NOT NULL PRIMARY KEY, "
              f"version integer NOT NULL, scale varchar(32) NOT NULL){d.table_options}")


def is_loaded(s: Session, ds: Dataset) -> bool:
    """True when the meta row matches and every table is there."""
    rows = s.query(f"SELECT version, scale FROM {META} WHERE dataset = %s", (ds.name,))
    if not rows or int(rows[0]["version"]) != ds.version or rows[0]["scale"] != scale_text(ds.scale):
        return False
    for t in ds.tables:
        try:
            s.query(f"SELECT 1 FROM {t.qname} WHERE 1 = 0")
        except DbError:
            return False
    return dialect(s.dbms).current(s, ds)


def scale_text(scale: float) -> str:
    return f"{scale:g}"


def load(s: Session, ds: Dataset, out: TextIO | None = sys.stderr) -> float:
    """Drop, create and fill every table of ``ds``; returns the seconds it took."""
    t0 = time.monotonic()
    s.execute(f"DELETE FROM {META} WHERE dataset = %s", (ds.name,))
    for t in ds.tables:
        s.execute(f"DROP TABLE IF EXISTS {t.qname}")
    load_table = dialect(s.dbms).load_table
    for t in ds.tables:
        load_table(s, t, out)
    s.execute(f"INSERT INTO {META} (dataset, version, scale) VALUES (%s, %s, %s)",
              (ds.name, ds.version, scale_text(ds.scale)))
    return time.monotonic() - t0


def drop(s: Session, ds: Dataset) -> None:
    s.execute(f"DELETE FROM {META} WHERE dataset = %s", (ds.name,))
    for t in ds.tables:
        s.execute(f"DROP TABLE IF EXISTS {t.qname}")


def create_ddl(engine: str | Engine, t: Table, with_pk: bool) -> str:
    """``CREATE TABLE`` of ``t`` in ``engine``'s dialect, with its primary key or without (added later)."""
    d = dialect(engine)
    cols = t.ddl.format(ts=d.ts_type, autoinc=d.autoinc_type)
    pk = f", PRIMARY KEY ({t.primary_key})" if with_pk and t.primary_key else ""
    return f"CREATE TABLE {t.qname} ({cols}{pk}){d.table_options}"


def _tsv(rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[int, str]]:
    """Rows as COPY text, in chunks (None -> \\N; our data has no tabs or backslashes)."""
    chunk: list[str] = []
    for r in rows:
        chunk.append("\t".join(["\\N" if v is None else str(v) for v in r]))
        if len(chunk) >= CHUNK_ROWS:
            yield len(chunk), "\n".join(chunk) + "\n"
            chunk = []
    if chunk:
        yield len(chunk), "\n".join(chunk) + "\n"


def _values(rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[int, str]]:
    """Rows as multi-row INSERT value lists of about 1 MB."""
    lit = my_literal
    buf: list[str] = []
    size = 0
    for r in rows:
        v = "(" + ",".join([lit(x) for x in r]) + ")"
        buf.append(v)
        size += len(v)
        if size > 1_000_000:
            yield len(buf), ",".join(buf)
            buf, size = [], 0
    if buf:
        yield len(buf), ",".join(buf)


_GENERIC: dict[RowFormat, Callable[[Iterable[tuple[Any, ...]]], Iterator[tuple[int, str]]]] = {
    RowFormat.COPY_TEXT: _tsv, RowFormat.VALUES: _values}


def _chunks(t: Table, fmt: RowFormat) -> Iterable[tuple[int, str]]:
    if t.chunks is not None:
        return t.chunks(fmt)
    assert t.rows is not None
    return _GENERIC[fmt](t.rows())


def _load_pg(s: Session, t: Table, out: TextIO | None) -> None:
    conn = s.conn
    prog = Progress(out, f"loading {t.qname}", t.count)
    cols = ", ".join(t.columns())
    with s.dbms.translate_errors(s.target.label):
        if s.driver.name == "psycopg":
            with conn.transaction():
                cur = conn.cursor()
                cur.execute(create_ddl(POSTGRES, t, with_pk=False))
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
                        for n, text in _chunks(t, RowFormat.COPY_TEXT):
                            cp.write(text)
                            done += n
                            prog.update(done)
        else:  # psycopg2: copy_expert per chunk, in one transaction
            conn.autocommit = False
            try:
                cur = conn.cursor()
                cur.execute(create_ddl(POSTGRES, t, with_pk=False))
                done = 0
                if t.rows is not None or t.chunks is not None:
                    for n, text in _chunks(t, RowFormat.COPY_TEXT):
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
    _parallel(s, builds)
    if t.primary_key:
        s.execute(f"ALTER TABLE {t.qname} ADD CONSTRAINT {pk_name} PRIMARY KEY USING INDEX {pk_name}")
    s.execute(f"VACUUM ANALYZE {t.qname}")
    prog.done()


def _parallel(s: Session, statements: list[str]) -> None:
    """Run statements at once on separate connections (index builds); the first error is raised."""
    if len(statements) <= 1:
        for sql in statements:
            s.execute(sql)
        return
    errors: list[BaseException] = []
    sessions: list[Session] = []

    def one(sql: str) -> None:
        try:
            with Session(s.target, statement_timeout_ms=0, application_name=own_app_name("load")) as s2:
                sessions.append(s2)
                s2.execute(sql)
        except BaseException as e:  # handed to the caller below
            errors.append(e)

    threads = [threading.Thread(target=one, args=(sql,), daemon=True) for sql in statements[1:]]
    for th in threads:
        th.start()
    try:
        s.execute(statements[0])
    except BaseException:
        # Ctrl-C, SIGTERM or an error: the other builds are cancelled, not waited for (an index build on a
        # large table takes minutes; its backend would not notice our exit until it ends).
        for s2 in list(sessions):
            with contextlib.suppress(Exception):
                s2.conn.cancel()
        for th in threads:
            th.join(2.0)
        raise
    for th in threads:
        th.join()
    if errors:
        raise errors[0]


def _load_my(s: Session, t: Table, out: TextIO | None) -> None:
    prog = Progress(out, f"loading {t.qname}", t.count)
    s.execute(create_ddl(MYSQL, t, with_pk=True))
    if t.rows is not None or t.chunks is not None:
        head = f"INSERT INTO {t.qname} ({', '.join(t.columns())}) VALUES "
        s.execute("SET SESSION unique_checks = 0, foreign_key_checks = 0")
        try:
            with s.dbms.translate_errors(s.target.label):
                cur = s.conn.cursor()
                done = 0
                for n, text in _chunks(t, RowFormat.VALUES):
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


def _my_current(s: Session, ds: Dataset) -> bool:
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


@dataclass(frozen=True)
class Dialect:
    """How the loader speaks to one engine."""

    container: str      # what holds the tables, created as ``CREATE <container> IF NOT EXISTS dbdiag``
    ts_type: str        # column type of the ``{ts}`` token
    autoinc_type: str   # column type of the ``{autoinc}`` token
    table_options: str  # appended to each CREATE TABLE
    load_table: Callable[[Session, Table, TextIO | None], None]
    # whether loaded tables (meta row and tables present) are as this dbdiag would create them
    current: Callable[[Session, Dataset], bool] = lambda s, ds: True


DIALECTS: dict[str, Dialect] = {
    POSTGRES.name: Dialect("SCHEMA", "timestamp", "integer GENERATED BY DEFAULT AS IDENTITY", "", _load_pg),
    # No CHARSET: the tables take the server's default (latin1 on a server without a config file, utf8mb4
    # on Debian's), as sysbench's sbtest does, so the same statements sort and compare the same bytes
    # (BENCHMARKS.md, issue 15: with utf8mb4 char(120) sort keys our read-only cost the server 1,013 µs per
    # transaction against sysbench's 761 on its latin1 table; 851 against 835 on a latin1 one). Our
    # generated strings are ASCII, and string parameters (utf8mb4 on our connections) still use the
    # column's index: the server converts the parameter (EXPLAIN: ref on the index; a value with a
    # character latin1 lacks is error 1267 there, which no built-in workload sends).
    MYSQL.name: Dialect("DATABASE", "datetime", "integer NOT NULL AUTO_INCREMENT", " ENGINE=InnoDB", _load_my,
                        _my_current),
}


def dialect(engine: str | Engine) -> Dialect:
    """The loader's :class:`Dialect` for an engine (object or name)."""
    return DIALECTS[(engine if isinstance(engine, Engine) else engine_for(engine)).name]


def row_counts(s: Session, ds: Dataset) -> dict[str, int]:
    """Actual row count of each table (for checks and tests)."""
    return {t.name: int(s.query(f"SELECT COUNT(*) AS n FROM {t.qname}")[0]["n"]) for t in ds.tables}
