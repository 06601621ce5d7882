"""What the MySQL / MariaDB collectors share: a base class, sessions, switchable parts, number parsing.

A *part* is one source inside a collector (INNODB STATUS, INNODB_TRX,
performance_schema...). When the server refuses it for a reason that will not
go away during the run (missing privilege, table absent on this version), the
part is switched off once with a one-line reason and hint; the collector goes
on with the rest and carries the reason in its next record (``parts_off``) so
the report can say "not collected: needs PROCESS" instead of an empty chart.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from collectors.base import Collector, CollectorContext, Probe
from collectors.mysql.queries import SqlUnavailable, pick_sql
from diag.db import Session
from diag.errors import DbError
from diag.targets import Target

T = TypeVar("T")

# Errors that will not go away by retrying: switch the part off.
PERMANENT_KINDS = ("privilege", "undefined", "unsupported")
GRANT_PROCESS = "GRANT PROCESS ON *.* TO {user}"
GRANT_PS = "GRANT SELECT ON performance_schema.* TO {user}"
CONNECT_HINT = "check the DSN, that the server runs, and the user's password"

_INT_RE = re.compile(r"^-?\d+$")
_FLOAT_RE = re.compile(r"^-?\d+\.\d+(?:[eE][-+]?\d+)?$")


def to_number(value: Any) -> int | float | None:
    """A status value as a number (``"123"`` -> 123, ``"0.5"`` -> 0.5); None for text like ON/OFF."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        try:
            return float(value)  # Decimal from aggregate columns
        except (TypeError, ValueError):
            return None
    v = value.strip()
    if _INT_RE.match(v):
        return int(v)
    if _FLOAT_RE.match(v):
        return float(v)
    return None


def open_session(target: Target, statement_timeout_ms: int = 2000) -> Session:
    """A catalog session to a MySQL / MariaDB target; DbError with one clear line when it fails."""
    if target.engine != "mysql":
        raise DbError(f"{target.label}: not a MySQL/MariaDB target", kind="unsupported")
    return Session(target, statement_timeout_ms=statement_timeout_ms, application_name="dbdiag")


def current_user(s: Session) -> str:
    """``'user'@'host'`` as the server knows the session's account (for GRANT hints)."""
    try:
        u = str(s.query("SELECT CURRENT_USER() AS u")[0]["u"])
    except DbError:
        return "the user"
    name, _, host = u.rpartition("@")
    return f"'{name}'@'{host}'" if name else u


class Parts:
    """Parts of one collector that a permanent error switches off, each said once.

    ``hints`` maps a part name to the fix (``{user}`` is filled in).
    """

    def __init__(self, hints: dict[str, str] | None = None, user: str = "the user") -> None:
        self.hints = dict(hints or {})
        self.user = user
        self.off: dict[str, str] = {}
        self._fixes: dict[str, str] = {}
        self._unsaid: dict[str, str] = {}

    def is_on(self, part: str) -> bool:
        return part not in self.off

    def switch_off(self, part: str, reason: str, hint: str | None = None) -> None:
        """Switch ``part`` off with ``reason``; the first reason sticks."""
        if part in self.off:
            return
        hint = (self.hints.get(part, "") if hint is None else hint).format(user=self.user)
        text = f"{part}: {reason}" + (f" (fix: {hint})" if hint else "")
        self.off[part] = text
        self._fixes[part] = hint
        self._unsaid[part] = text

    def call(self, part: str, fn: Callable[[], T]) -> T | None:
        """``fn()``; None when the part is off, is switched off now, or timed out this once."""
        if part in self.off:
            return None
        try:
            return fn()
        except SqlUnavailable as e:
            self.switch_off(part, str(e), hint="")
        except DbError as e:
            if e.kind in PERMANENT_KINDS:
                self.switch_off(part, str(e))
            elif e.kind != "timeout":  # a slow catalog query skips one sample; anything else ends the collector
                raise
        return None

    def unsaid(self) -> dict[str, str]:
        """Parts switched off since the last call (for the next record's ``parts_off``)."""
        out, self._unsaid = self._unsaid, {}
        return out

    def missing(self) -> tuple[str, ...]:
        return tuple(self.off.values())

    def hint(self) -> str:
        """The fixes of all parts that are off, joined (for Probe.hint)."""
        seen: list[str] = []
        for h in self._fixes.values():
            if h and h not in seen:
                seen.append(h)
        return "; ".join(seen)


class MyCollector(Collector):
    """Base of the MySQL / MariaDB collectors: one catalog session and the switchable parts in ``hints``.

    ``probe`` opens a throwaway session and hands it, with fresh parts that
    know the account for GRANT hints, to :meth:`check`; ``start`` opens the
    collector's own session (bounded by ``statement_timeout_ms``) and ``stop``
    closes it.
    """

    engines = ("mysql",)
    hints: ClassVar[dict[str, str]] = {}
    statement_timeout_ms: ClassVar[int] = 2000

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.session: Session | None = None
        self.parts = Parts(self.hints)

    def probe(self) -> Probe:
        try:
            s = open_session(self.ctx.target)
        except DbError as e:
            return Probe(False, str(e), CONNECT_HINT)
        try:
            return self.check(s, Parts(self.hints, current_user(s)))
        finally:
            s.close()

    @abc.abstractmethod
    def check(self, s: Session, parts: Parts) -> Probe:
        """The probe's answer, from what ``s`` allows; ``parts`` is this probe's own (not ``self.parts``)."""

    def start(self) -> None:
        self.session = open_session(self.ctx.target, statement_timeout_ms=self.statement_timeout_ms)
        self.parts.user = current_user(self.session)

    def note_parts_off(self, rec: dict[str, Any]) -> None:
        """Put the parts switched off since the last record into ``rec["parts_off"]`` (none: no key)."""
        off = self.parts.unsaid()
        if off:
            rec["parts_off"] = off

    def stop(self) -> list[dict[str, Any]] | None:
        if self.session is not None:
            self.session.close()
            self.session = None
        return None


def query_named(s: Session, name: str) -> list[dict[str, Any]]:
    """Run the SQL file ``name`` picked for this server's product and version."""
    return s.query(pick_sql(name, s.product, s.version_num))


_SECRET_RES = (
    re.compile(r"(IDENTIFIED\s+(?:WITH\s+\S+\s+)?(?:BY|AS)\s+(?:PASSWORD\s+)?)('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")",
               re.IGNORECASE),
    re.compile(r"(PASSWORD\s*\(\s*)('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", re.IGNORECASE),
    re.compile(r"((?:MASTER|SOURCE)_PASSWORD\s*=\s*)('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", re.IGNORECASE),
)


def redact_sql_secrets(text: str) -> str:
    """Hide passwords quoted in SQL text (INNODB STATUS quotes running statements)."""
    for rx in _SECRET_RES:
        text = rx.sub(r"\1'***'", text)
    return text
