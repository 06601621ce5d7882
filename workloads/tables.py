"""A workload's tables described once, and what every engine's bulk load shares: the rows as text chunks,
the ``CREATE TABLE`` in the engine's words, a progress bar, index builds side by side.

Each engine's own bulk path is its module's in :mod:`workloads.engines` (``WorkloadParts.load_table``); the
loading itself (reuse while version and scale match) is :mod:`workloads.load`.
"""

from __future__ import annotations

import contextlib
import enum
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from diag.core.db import Session, own_app_name
from diag.core.engines import Engine, engine_for
from workloads.clients.sql import my_literal

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


def create_ddl(engine: str | Engine, t: Table, with_pk: bool) -> str:
    """``CREATE TABLE`` of ``t`` in ``engine``'s words (Engine.timestamp_type, autoinc_type, table_options), with its
    primary key or without (added later)."""
    e = engine if isinstance(engine, Engine) else engine_for(engine)
    cols = t.ddl.format(ts=e.timestamp_type, autoinc=e.autoinc_type)
    pk = f", PRIMARY KEY ({t.primary_key})" if with_pk and t.primary_key else ""
    return f"CREATE TABLE {t.qname} ({cols}{pk}){e.table_options}"


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


def row_chunks(t: Table, fmt: RowFormat) -> Iterable[tuple[int, str]]:
    """The rows of ``t`` as text chunks of ``fmt``: its own fast path where it has one."""
    if t.chunks is not None:
        return t.chunks(fmt)
    assert t.rows is not None
    return _GENERIC[fmt](t.rows())


def parallel(s: Session, statements: list[str]) -> None:
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
