"""Optional parts of a collector, switched off once, with one line saying why and what would fix it.

A *part* is one source inside a collector (pg_stat_statements, pg_stat_io,
INNODB STATUS, performance_schema...). Following pg_activity, a part that
fails for a reason that will not go away during the run is switched off the
first time instead of failing every second, and the reason goes into the
collector's next record so the report can say "not collected: needs PROCESS"
instead of showing an empty chart.

The one switch-off rule, for every engine:

* a missing privilege, a missing object or an unsupported feature
  (:data:`PERMANENT_KINDS`), or no SQL for this server version
  (:class:`~collectors.sql.SqlUnavailable`): off at once;
* a statement timeout: this sample is skipped; :data:`TIMEOUTS_BEFORE_OFF`
  timeouts in a row switch the part off, because a catalog query that keeps
  running into its timeout costs the measured server that much every sample;
* anything else (a lost connection, a bug) propagates: the runner switches
  the whole collector off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from collectors.sql import SqlUnavailable
from diag.core.db import Session
from diag.core.errors import DbError

T = TypeVar("T")

PERMANENT_KINDS = ("privilege", "undefined", "unsupported")
TIMEOUTS_BEFORE_OFF = 3


class Parts:
    """The parts of one collector that are off, and why.

    ``hints`` maps a part to the fix for it (``{user}`` is filled in with
    ``user``, the account as the server knows it); ``privilege_hint`` is the
    fix for a privilege error of a part without its own hint. ``off`` maps each
    part that is off to ``"<part>: <reason> (fix: <hint>)"``.
    """

    def __init__(self, hints: Mapping[str, str] | None = None, user: str = "the user",
                 privilege_hint: str = "") -> None:
        self.hints = dict(hints or {})
        self.user = user
        self.privilege_hint = privilege_hint
        self.off: dict[str, str] = {}
        self._fixes: dict[str, str] = {}
        self._unsaid: dict[str, str] = {}
        self._timeouts: dict[str, int] = {}

    def is_on(self, part: str) -> bool:
        return part not in self.off

    def switch_off(self, part: str, reason: str, hint: str | None = None) -> None:
        """Switch ``part`` off with ``reason``; the first reason sticks. ``hint`` None: the part's own."""
        if part in self.off:
            return
        hint = (self.hints.get(part, "") if hint is None else hint).format(user=self.user)
        text = f"{part}: {reason}" + (f" (fix: {hint})" if hint and hint not in reason else "")
        self.off[part] = text
        self._fixes[part] = hint
        self._unsaid[part] = text

    def call(self, part: str, fn: Callable[[], T]) -> T | None:
        """``fn()``; None when the part is off, is switched off now, or timed out (see the module's rule)."""
        if part in self.off:
            return None
        try:
            out = fn()
        except SqlUnavailable as e:
            self.switch_off(part, str(e), hint="")  # no GRANT helps: it needs another server
            return None
        except DbError as e:
            if e.kind in PERMANENT_KINDS:
                self.switch_off(part, str(e), hint=self._hint_for(part, e))
            elif e.kind == "timeout":
                n = self._timeouts[part] = self._timeouts.get(part, 0) + 1
                if n >= TIMEOUTS_BEFORE_OFF:
                    self.switch_off(part, f"{n} statement timeouts in a row: {e}")
            else:
                raise
            return None
        self._timeouts.pop(part, None)
        return out

    def query(self, part: str, session: Session, sql: str, params: Any = None) -> list[dict[str, Any]] | None:
        """Rows of ``sql`` on ``session`` through :meth:`call`."""
        return self.call(part, lambda: session.query(sql, params))

    def _hint_for(self, part: str, err: DbError) -> str | None:
        if part in self.hints or err.kind != "privilege":
            return None  # the part's own hint (or none)
        return self.privilege_hint

    def unsaid(self) -> dict[str, str]:
        """Parts switched off since the last call, part -> text (for the collector's next record)."""
        out, self._unsaid = self._unsaid, {}
        return out

    def missing(self) -> tuple[str, ...]:
        """The texts of all parts that are off (for Probe.missing)."""
        return tuple(self.off.values())

    def hint(self) -> str:
        """The fixes of all parts that are off, each once, joined (for Probe.hint)."""
        return "; ".join(dict.fromkeys(h for h in self._fixes.values() if h))
