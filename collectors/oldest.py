"""The oldest open transaction at each step's end, and the cleanup backlog over the step: both engines.

An in-process source (see :mod:`collectors.base`) per target. At the step's start and end it reads the
cleanup backlog (``dead_tuples`` SQL file: PostgreSQL's dead row versions over the database's tables,
InnoDB's history list length from INNODB_METRICS); at the end also the other session whose transaction is
oldest (``oldest_xact``: PostgreSQL's backend_xmin holders of the database, InnoDB's INNODB_TRX). The step's
results.json row gets ``old_transaction``: ``backlog_start``, ``backlog_end``, ``t0``/``t1`` (Unix s) and
``oldest`` (pid, user, client, state, application_name, xact_age_s, state_age_s, xmin_age, query), or
``oldest: null`` when no other session had a transaction open. The query text is another user's data: it is
stored without its literals unless the run keeps them (:meth:`collectors.base.CollectorContext.statement_text`).

Needs: PostgreSQL any role (another role's user and query need pg_read_all_stats); MySQL/MariaDB PROCESS
(INNODB_TRX, INNODB_METRICS). A part refused is said once in the row's ``notes``.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from collectors.base import Collector, Probe
from collectors.session import open_session
from collectors.sql import session_sql
from diag.core.db import Session
from diag.core.errors import DbError, DiagError

TIMEOUT_MS = 2000


def _plain(v: Any) -> Any:
    return float(v) if hasattr(v, "as_integer_ratio") and not isinstance(v, (int, float)) else v


class OldestTransaction(Collector):
    """Who holds the oldest transaction open at each step's end, and how the cleanup backlog moved."""

    name = "oldest_xact"
    row_fields = ("old_transaction",)
    title = "oldest transaction"
    sampled = False

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.session: Session | None = None
        self._lock = threading.Lock()
        self._start: tuple[float, float | None] | None = None
        self.notes: list[str] = []

    def _open(self) -> Session:
        return open_session(self.ctx.target, self.ctx.target.dbms, self.name, TIMEOUT_MS)

    def _backlog(self, s: Session) -> float | None:
        try:
            rows = s.query(session_sql(s, "dead_tuples"))
        except DbError as e:
            self._note(f"cleanup backlog not read: {e}")
            return None
        v = rows[0].get("dead") if rows else None
        return float(v) if v is not None else None

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def probe(self) -> Probe:
        try:
            with self._open() as s:
                s.query(session_sql(s, "oldest_xact"))
        except DiagError as e:
            return Probe(False, str(e), "grant PROCESS (MySQL/MariaDB); check the target's DSN")
        return Probe(True)

    def start(self) -> None:
        try:
            self.session = self._open()
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
        with self._lock:
            self._start = (time.time(), self._backlog(self.session))

    def step_finished(self, info: Any) -> dict[str, Any] | None:
        if not self._mine(info) or self._start is None:
            return None
        assert self.session is not None
        (t0, b0), self._start = self._start, None
        with self._lock:
            b1 = self._backlog(self.session)
            try:
                rows = self.session.query(session_sql(self.session, "oldest_xact"))
            except DbError as e:
                self._note(f"oldest transaction not read: {e}")
                rows = None
        oldest = {k: _plain(v) for k, v in rows[0].items()} if rows else None
        if oldest is not None and isinstance(oldest.get("query"), str):
            oldest["query"] = self.ctx.statement_text(oldest["query"])  # another session's: literals out
        return {"old_transaction": {"t0": t0, "t1": time.time(), "backlog_start": b0, "backlog_end": b1,
                                    "oldest": oldest, "notes": list(self.notes)}}
