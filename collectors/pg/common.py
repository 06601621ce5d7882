"""What the PostgreSQL collectors share: their sessions, privilege checks and switching parts off.

Following pg_activity: an optional part (pg_stat_statements, pg_stat_io...) that
fails for a reason that will not go away (missing privilege, missing object,
feature not supported) is switched off the first time, with one line saying why
and what would fix it, instead of failing every second. Other errors (lost
connection) reach the runner, which switches the whole collector off.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass
from typing import Any

from collectors.pg.queries import OLDEST_SUPPORTED, pick_sql, version_text
from diag.db import Session
from diag.errors import DbError
from diag.targets import Target

APP_PREFIX = "dbdiag-"
# application_name of each PostgreSQL collector's own session; the wait sampler leaves them out.
COLLECTOR_NAMES = ("pg_stats", "pg_waits", "pg_settings")
OWN_APPLICATION_NAMES = tuple(APP_PREFIX + n for n in COLLECTOR_NAMES)

# Errors after which retrying the same query is pointless: switch the part off.
OFF_KINDS = ("privilege", "undefined", "unsupported")
TIMEOUTS_BEFORE_OFF = 3
MONITOR_HINT = "GRANT pg_monitor TO the role dbdiag connects as"


def app_name(collector_name: str) -> str:
    """The application_name a collector's session uses (so samplers can skip it)."""
    return APP_PREFIX + collector_name


def open_session(target: Target, collector_name: str, statement_timeout_ms: int) -> Session:
    """A catalog session for ``collector_name``, bounded by ``statement_timeout_ms``."""
    return Session(target, statement_timeout_ms=statement_timeout_ms, application_name=app_name(collector_name))


def unsupported_reason(version_num: int) -> str:
    """Why a server is too old for these collectors ("" when it is fine)."""
    if version_num < OLDEST_SUPPORTED:
        return (f"PostgreSQL {version_text(version_num) if version_num >= 100000 else version_num} is older than "
                f"{version_text(OLDEST_SUPPORTED)}, the oldest the PostgreSQL collectors support")
    return ""


def plain(value: Any) -> Any:
    """JSON-friendly numbers: Decimal (numeric, sum()) to int when whole, else float."""
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def quote_ident(name: str) -> str:
    """A PostgreSQL identifier in double quotes (for the extension's schema name)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Privileges:
    """What the connected role may see (superuser counts as having every role's privileges)."""

    role: str
    database: str
    superuser: bool
    pg_monitor: bool
    pg_read_all_stats: bool
    pg_read_all_settings: bool


def privileges(session: Session) -> Privileges:
    """The connected role's monitoring privileges (pg_has_role: inherited membership counts)."""
    row = session.query(pick_sql("privileges", session.version_num))[0]
    return Privileges(role=str(row["role"]), database=str(row["database"]), superuser=bool(row["superuser"]),
                      pg_monitor=bool(row["pg_monitor"]), pg_read_all_stats=bool(row["pg_read_all_stats"]),
                      pg_read_all_settings=bool(row["pg_read_all_settings"]))


def describe(err: DbError) -> str:
    """One line for a switched-off part: the server's message and, for privileges, the fix."""
    text = str(err)
    if err.kind == "privilege" and "pg_monitor" not in text:
        text += f" ({MONITOR_HINT})"
    return text


def probe_hint(err: DbError) -> str:
    """What to do about an error that makes a probe fail."""
    if err.kind == "privilege":
        return MONITOR_HINT
    if err.kind in ("connect", "auth"):
        return "check the target's DSN and that the server accepts connections"
    return ""


class Parts:
    """Optional parts of a collector, each run through :meth:`query` and switched off once when it cannot work.

    ``off`` maps part -> reason for every part that is off; ``take_news()``
    returns the parts switched off since the last call, so the collector can
    write the reason into its next record (the run bundle then says why a
    series stops instead of showing a gap).
    """

    def __init__(self) -> None:
        self.off: dict[str, str] = {}
        self._news: dict[str, str] = {}
        self._timeouts: dict[str, int] = {}

    def switch_off(self, part: str, reason: str) -> None:
        if part not in self.off:
            self.off[part] = reason
            self._news[part] = reason

    def is_on(self, part: str) -> bool:
        return part not in self.off

    def take_news(self) -> dict[str, str]:
        news, self._news = self._news, {}
        return news

    def query(self, part: str, session: Session, sql: str, params: Any = None) -> list[dict[str, Any]] | None:
        """Rows of ``sql``, or None when the part is (or has just been switched) off.

        A statement timeout skips this sample; the part goes off after
        :data:`TIMEOUTS_BEFORE_OFF` timeouts in a row. Other errors propagate.
        """
        if part in self.off:
            return None
        try:
            rows = session.query(sql, params)
        except DbError as e:
            if e.kind in OFF_KINDS:
                self.switch_off(part, describe(e))
                return None
            if e.kind == "timeout":
                n = self._timeouts[part] = self._timeouts.get(part, 0) + 1
                if n >= TIMEOUTS_BEFORE_OFF:
                    self.switch_off(part, f"{n} statement timeouts in a row: {e}")
                return None
            raise
        self._timeouts.pop(part, None)
        return rows
