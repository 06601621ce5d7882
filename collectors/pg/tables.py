"""Per-table scan counters per step (pg_stat_user_tables), with or without statement digests.

An in-process source (see :mod:`collectors.base`) per PostgreSQL target: ``step_started`` and
``step_finished`` read the target database's pg_stat_user_tables (the ``table_stats`` SQL file, any role may
read it) and the step's results.json row gets ``table_scans``: ``t0`` and ``t1`` (Unix s) of the two snapshots
and ``tables``, those whose counters grew, as :class:`diag.core.schema.TableStat` dicts (sequential scans, the rows
they read, index scans, changes); and ``table_io``: per table (the ten that read most), the blocks read from
outside shared_buffers and found in it, heap and indexes (pg_statio_user_tables), and its size in bytes. The
snapshots span the warm-up and the clients' end too: a reader divides by
the transactions of that span (the step's rate x t1 - t0), as the statement source's readers do. The
statement source reads the same view, but only where pg_stat_statements is loaded; most servers do not
load it, and a full scan of a table without an index is then still visible here (issue 22). Two snapshots
per step, none while it runs: nothing on the server's hot path.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from collectors.base import Collector, Probe
from collectors.pg.common import open_session, plain, unsupported_reason
from collectors.sql import session_sql
from collectors.statements import Snapshot, table_delta
from diag.core.db import Session
from diag.core.errors import DbError, DiagError

SNAPSHOT_TIMEOUT_MS = 2000  # one row per user table of one database


class PgTableScans(Collector):
    """pg_stat_user_tables at each step's start and end; the increase goes into the step's row."""

    name = "pg_tables"
    row_fields = ("table_scans", "table_io")
    title = "table scan counters"
    sampled = False

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.session: Session | None = None
        self._lock = threading.Lock()
        self._start: tuple[float, Snapshot, Snapshot] | None = None

    def _snapshot(self, s: Session) -> Snapshot:
        return {str(r.pop("table")): {k: plain(v) for k, v in r.items()} for r in s.query(session_sql(s, "table_stats"))}

    def _io(self, s: Session) -> Snapshot:
        return {str(r.pop("table")): {k: plain(v) for k, v in r.items()} for r in s.query(session_sql(s, "table_io"))}

    def probe(self) -> Probe:
        try:
            with open_session(self.ctx.target, self.name, SNAPSHOT_TIMEOUT_MS) as s:
                too_old = unsupported_reason(s.version_num)
                if too_old:
                    return Probe(False, too_old, "use PostgreSQL 13 or newer")
                self._snapshot(s)
        except DiagError as e:
            return Probe(False, str(e), "check the target's DSN and the user's privileges")
        return Probe(True)

    def start(self) -> None:
        try:
            self.session = open_session(self.ctx.target, self.name, SNAPSHOT_TIMEOUT_MS)
        except DiagError as e:
            if self.ctx.bundle is not None:
                self.ctx.bundle.event("collector_off", f"{self.title} ({self.ctx.target.label}): {e}",
                                      collector=f"{self.name}--{self.ctx.target.label}")

    def stop(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None

    def sample(self) -> None:
        return None

    def _mine(self, info: Any) -> bool:
        return self.session is not None and info.target == self.ctx.target.label

    def step_started(self, info: Any) -> None:
        if not self._mine(info):
            return
        assert self.session is not None
        try:
            with self._lock:
                self._start = (time.time(), self._snapshot(self.session), self._io(self.session))
        except DbError:  # the step goes on without its table counters
            self._start = None

    def step_finished(self, info: Any) -> dict[str, Any] | None:
        if not self._mine(info) or self._start is None:
            return None
        assert self.session is not None
        try:
            with self._lock:
                end, io_end = self._snapshot(self.session), self._io(self.session)
        except DbError:
            return None
        (t0, start, io_start), self._start = self._start, None
        return {"table_scans": {"t0": t0, "t1": time.time(),
                                "tables": [t.to_dict() for t in table_delta(start, end)]},
                "table_io": io_delta(io_start, io_end)}


IO_COUNTERS = ("heap_blks_read", "heap_blks_hit", "idx_blks_read", "idx_blks_hit")
IO_TABLES = 10  # the tables that read most from outside the pool


def io_delta(start: Snapshot, end: Snapshot) -> list[dict[str, Any]]:
    """Per table, the blocks read from outside shared_buffers and found in it over the step (a counter that went
    down counts from zero), with its size in bytes at the end; the :data:`IO_TABLES` that read most, most first."""
    out = []
    for table, cur in end.items():
        prev = start.get(table, {})
        d: dict[str, Any] = {"table": table, "bytes": int(cur.get("bytes") or 0)}
        for c in IO_COUNTERS:
            a, b = prev.get(c) or 0, cur.get(c) or 0
            d[c] = int(b - a if b >= a else b)
        if any(d[c] for c in IO_COUNTERS):
            out.append(d)
    out.sort(key=lambda d: -(d["heap_blks_read"] + d["idx_blks_read"]))
    return out[:IO_TABLES]
