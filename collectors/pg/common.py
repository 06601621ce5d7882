"""What the PostgreSQL collectors share: their sessions, privilege checks and the hint for missing privileges.

Optional parts (pg_stat_statements, pg_stat_io...) are switched off through
:class:`collectors.parts.Parts`, with :data:`MONITOR_HINT` as the fix for a
missing privilege.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from collectors.base import Probe
from collectors.parts import Parts
from collectors.session import open_session as _open_session
from collectors.sql import session_sql
from diag.core.db import Session
from diag.core.engines import POSTGRES
from diag.core.errors import DbError
from diag.core.targets import Target

OLDEST_SUPPORTED = 130000  # server_version_num: the oldest server the SQL files cover
MONITOR_HINT = "GRANT pg_monitor TO the role dbdiag connects as"
DEFAULT_HZ = 10.0  # the wait and blocking samplers' least rate (ticks a second)
SAMPLER_TIMEOUT_MS = 500  # per catalog read of those samplers: a slow read costs a tick, not the cadence


def open_session(target: Target, collector_name: str, statement_timeout_ms: int) -> Session:
    """A catalog session for ``collector_name``, bounded by ``statement_timeout_ms``."""
    return _open_session(target, POSTGRES, collector_name, statement_timeout_ms)


def new_parts() -> Parts:
    """Fresh switchable parts of a PostgreSQL collector (a missing privilege: grant pg_monitor)."""
    return Parts(privilege_hint=MONITOR_HINT)


def unsupported_reason(version_num: int) -> str:
    """Why a server is too old for these collectors ("" when it is fine)."""
    if version_num < OLDEST_SUPPORTED:
        shown = POSTGRES.version_text(version_num) if version_num >= 100000 else str(version_num)
        return (f"PostgreSQL {shown} is older than {POSTGRES.version_text(OLDEST_SUPPORTED)}, "
                "the oldest the PostgreSQL collectors support")
    return ""


def sampling_options(ctx: Any) -> tuple[float, bool]:
    """(seconds between ticks, whether to sample every database) of the 10 Hz samplers, from the run's
    options ``pg_waits_hz`` (never below :data:`DEFAULT_HZ`) and ``pg_waits_all_databases``."""
    hz = float(ctx.options.get("pg_waits_hz", DEFAULT_HZ))
    return 1.0 / max(hz, DEFAULT_HZ), bool(ctx.options.get("pg_waits_all_databases", False))


def probe_sampler(target: Target, collector_name: str, reads: Callable[[Session], Any], hidden_note: str) -> Probe:
    """The probe of a 10 Hz sampler: ``reads`` (its catalog queries, once) run on a server the SQL files
    cover; without pg_read_all_stats it runs, with ``hidden_note`` as what it misses."""
    try:
        with open_session(target, collector_name, SAMPLER_TIMEOUT_MS) as s:
            too_old = unsupported_reason(s.version_num)
            if too_old:
                return Probe(False, too_old, "use PostgreSQL 13 or newer")
            reads(s)
            priv = privileges(s)
    except DbError as e:
        return Probe(False, str(e), probe_hint(e))
    if not priv.pg_read_all_stats:
        return Probe(True, hint=MONITOR_HINT, missing=(hidden_note,))
    return Probe(True)


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
    row = session.query(session_sql(session, "privileges"))[0]
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
