"""What the MySQL / MariaDB collectors share: a base class, sessions, GRANT hints, number parsing.

A *part* is one source inside a collector (INNODB STATUS, INNODB_TRX,
performance_schema...), switched off through :class:`collectors.parts.Parts`
with the GRANT that would fix it; the collector goes on with the rest and
carries the reason in its next record (``parts_off``) so the report can say
"not collected: needs PROCESS" instead of an empty chart.
"""

from __future__ import annotations

import abc
import re
from typing import Any, ClassVar

from collectors.base import Collector, CollectorContext, Probe
from collectors.parts import Parts
from collectors.session import open_session as _open_session
from collectors.sql import query_named
from diag.core.db import Session
from diag.core.engines import MYSQL
from diag.core.errors import DbError
from diag.core.targets import Target

__all__ = ["CONNECT_HINT", "GRANT_PROCESS", "GRANT_PS", "MyCollector", "Parts", "current_user", "open_session",
           "query_named", "redact_sql_secrets", "to_number"]

GRANT_PROCESS = "GRANT PROCESS ON *.* TO {user}"
GRANT_PS = "GRANT SELECT ON performance_schema.* TO {user}"
CONNECT_HINT = "check the DSN, that the server runs, and the user's password"

_INT_RE = re.compile(r"^-?\d+$")
_FLOAT_RE = re.compile(r"^-?\d+\.\d+(?:[eE][-+]?\d+)?$")


def to_number(value: Any) -> int | float | None:
    """A status value as a number (``"123"`` -> 123, ``"0.5"`` -> 0.5); None for text like ON/OFF."""
    if type(value) is str and value.isascii() and value.isdigit():
        return int(value)  # most of SHOW GLOBAL STATUS's ~560 values a second: one test, no regex
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


def open_session(target: Target, collector_name: str, statement_timeout_ms: int = 2000) -> Session:
    """A catalog session of ``collector_name`` to a MySQL / MariaDB target; DbError (one clear line) on failure."""
    return _open_session(target, MYSQL, collector_name, statement_timeout_ms)


def current_user(s: Session) -> str:
    """``'user'@'host'`` as the server knows the session's account (for GRANT hints)."""
    try:
        u = str(s.query("SELECT CURRENT_USER() AS u")[0]["u"])
    except DbError:
        return "the user"
    name, _, host = u.rpartition("@")
    return f"'{name}'@'{host}'" if name else u


class MyCollector(Collector):
    """Base of the MySQL / MariaDB collectors: one catalog session and the switchable parts in ``hints``.

    ``probe`` opens a throwaway session and hands it, with fresh parts that
    know the account for GRANT hints, to :meth:`check`; ``start`` opens the
    collector's own session (bounded by ``statement_timeout_ms``) and ``stop``
    closes it.
    """

    hints: ClassVar[dict[str, str]] = {}
    statement_timeout_ms: ClassVar[int] = 2000

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.session: Session | None = None
        self.parts = Parts(self.hints)

    def probe(self) -> Probe:
        try:
            s = open_session(self.ctx.target, self.name)
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
        self.session = open_session(self.ctx.target, self.name, self.statement_timeout_ms)
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
