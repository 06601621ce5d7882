"""A statement that does not return: what the server says it waits for, and ending it.

A step's client that is still inside a statement a few seconds after the step's
end (or longer than ``--statement-timeout`` during it) is stuck: the step asks
the server for its own view of that client's session (PostgreSQL
pg_stat_activity: state, wait event type and name, query; MySQL/MariaDB the
process list: command, state, info), names the wait in the result row and one
line, ends the session on the server (a commit waiting for a standby that never
answers would otherwise hold its backend forever) and the client process is
terminated. A load statement is watched the same way by :class:`LoadWatch`.

Every look is bounded: one connect (``LOOK_TIMEOUT_S``) and statements under a
statement timeout; a server that cannot be asked gives an empty view, said as
"the server did not answer".
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from diag.core.db import Session, own_app_name
from diag.core.errors import DiagError
from diag.core.targets import Target

LOOK_TIMEOUT_MS = 3000   # each statement of a look
AFTER_END_S = 5.0        # a client still in a statement this long after the step's end is stuck
LOAD_STUCK_S = 30.0      # a load statement in one endless wait this long is stuck (without --statement-timeout)
LOAD_POLL_S = 1.0        # how often the load's session is looked at
LOAD_SAY_S = 5.0         # an endless wait this long is said on the terminal before the load gives up on it


@dataclass(frozen=True)
class SessionView:
    """One session as the server shows it; ``seconds``: how long its current statement has run."""

    id: int
    state: str
    wait_type: str
    wait: str
    query: str
    seconds: float

    def wait_key(self) -> str:
        """"type/event" ("IPC/SyncRep"; MySQL: "/Waiting for ..."), "" when it waits for nothing."""
        return f"{self.wait_type}/{self.wait}" if self.wait else ""

    def wait_text(self) -> str:
        if not self.wait:
            return "no wait event (running on CPU or between waits)"
        return f"{self.wait_type}/{self.wait}" if self.wait_type else self.wait

    def text(self) -> str:
        """One clause for a line: the wait, the state and the start of the statement."""
        q = " ".join(self.query.split())[:120]
        w = self.wait_text()
        lead = w if w.lower().startswith("waiting") else f"waiting for {w}"  # MySQL states say it themselves
        return f"{lead} ({self.state or 'no state'}, {self.seconds:.0f} s) in: {q}"

    def to_row(self) -> dict[str, Any]:
        return {"session": self.id, "state": self.state, "wait_type": self.wait_type, "wait": self.wait,
                "query": " ".join(self.query.split())[:300], "seconds": round(self.seconds, 1)}


def session_id(client: Any, target: Target) -> int:
    """The server's id of ``client``'s connection (PostgreSQL backend PID, MySQL connection id); 0 if unknown."""
    sql = target.dbms.session_id_sql
    try:
        if hasattr(client, "session_id"):  # the native executor's connection: libpq / libmariadb say it
            return int(client.session_id())
        if not sql:
            return 0
        rows = client.execute(sql)
        return int(rows[0][0]) if rows else 0
    except Exception:  # an id is a help for naming a wait later, never a reason to fail a client
        return 0


def look(target: Target, ids: list[int], end: bool = False) -> dict[int, SessionView]:
    """The server's view of sessions ``ids`` (those it still has); with ``end``, those sessions are ended too.
    Empty when the server cannot be asked (bounded by the connect timeout and LOOK_TIMEOUT_MS)."""
    ids = [int(i) for i in ids if i]
    if not ids or not target.dbms.session_view_sql:
        return {}
    try:
        with Session(target, statement_timeout_ms=LOOK_TIMEOUT_MS, application_name=own_app_name("probe")) as s:
            return view(s, ids, end)
    except DiagError:
        return {}


def view(s: Session, ids: list[int], end: bool = False) -> dict[int, SessionView]:
    """:func:`look` on an open session ``s``; DiagError when it fails."""
    dbms = s.dbms
    rows = s.query(dbms.session_view_sql.format(ids=", ".join(str(int(i)) for i in ids)))
    out = {int(r["id"]): SessionView(int(r["id"]), str(r["state"] or ""), str(r["wait_type"] or ""),
                                     str(r["wait"] or ""), str(r["query"] or ""), float(r["seconds"] or 0))
           for r in rows}
    if end:
        for i in out:
            with contextlib.suppress(DiagError):
                s.execute(dbms.end_session_sql.format(id=i))
    return out


def own_session_id(s: Session) -> int:
    """The server's id of ``s``'s own connection; 0 when the engine has no way to say."""
    if not s.dbms.session_id_sql:
        return 0
    try:
        rows = s.query(s.dbms.session_id_sql)
        return int(rows[0]["p"]) if rows else 0
    except DiagError:
        return 0


def endless(target: Target, v: SessionView) -> bool:
    """Whether ``v`` waits for something only another session or server can end (the engine's list)."""
    key = v.wait_key()
    return bool(key) and any(key.startswith(p) for p in target.dbms.endless_waits)


class LoadWatch:
    """Watches the load's session from a thread: when its statement has run longer than ``bound_s``
    (``--statement-timeout``), or without one sits in one endless wait for ``LOAD_STUCK_S``, the session
    is ended on the server (the load's statement then fails) and :attr:`stuck` says what it waited for.
    Use as a context manager around the load."""

    def __init__(self, target: Target, session: int, bound_s: float | None,
                 say: Callable[[str], None] | None = None) -> None:
        self.target, self.session, self.bound_s, self.say = target, session, bound_s, say
        self.stuck: SessionView | None = None
        self._done = threading.Event()  # threads of this process only: no child can leave it held
        self._th = threading.Thread(target=self._watch, name="dbdiag-load-watch", daemon=True)

    def __enter__(self) -> LoadWatch:
        if self.session:
            self._th.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._th.is_alive():
            self._th.join(2.0)  # a daemon with its own session: a look still under way is left to end alone

    def _watch(self) -> None:
        try:
            with Session(self.target, statement_timeout_ms=LOOK_TIMEOUT_MS,
                         application_name=own_app_name("probe")) as s:
                self._poll(s)
        except DiagError:  # the server cannot be asked: the load's own errors speak for it
            return

    def _poll(self, s: Session) -> None:
        since: dict[str, float] = {}  # the endless wait seen at every look since (monotonic s)
        told = False                  # that wait was said on the terminal
        while not self._done.wait(LOAD_POLL_S):
            v = view(s, [self.session]).get(self.session)
            if v is None or v.state in ("idle", "Sleep"):
                since.clear()
                continue
            key = v.wait_key()
            now = time.monotonic()
            if endless(self.target, v):
                if key not in since:
                    told = False
                since = {key: since.get(key, now)}
                if not told and now - since[key] >= LOAD_SAY_S and self.say is not None and self.bound_s is None:
                    told = True
                    self.say(f"{self.target.label}: the load's statement is {v.text()}; ended if it still "
                             f"waits at {LOAD_STUCK_S:g} s (--statement-timeout sets the bound)")
            else:
                since = {}
            over = self.bound_s is not None and v.seconds > self.bound_s
            if over or (key in since and now - since[key] >= LOAD_STUCK_S):
                if not self._done.is_set():
                    self.stuck = v  # before the end: the load's statement fails at once, and asks for it
                    view(s, [self.session], end=True)
                return
