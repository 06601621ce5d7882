"""Target parsing: ``[LABEL=]DSN`` into a :class:`Target`.

Accepted forms::

    postgresql://user:pw@host:5432/db      postgres://...   (?host=/socket/dir for a unix socket)
    mysql://user:pw@host:3306/db           mariadb://...    (?unix_socket=/path/mysqld.sock)
    embedded:postgres                      embedded:mysql   (a throwaway server started for the run)
    fast=postgresql://...                  (a label that names the target everywhere)

Passwords are kept on the Target for connecting but are never part of its
``to_dict()``, its ``redacted()`` DSN or its repr.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qs, unquote, urlsplit

from diag.core.engines import ENGINES, Engine, engine_for, engine_for_scheme
from diag.core.errors import UsageError
from diag.core.redact import redact_text

_LABEL_RE = re.compile(r"^([A-Za-z0-9_.@-]+)=(.+)$")


@dataclass(frozen=True)
class Target:
    """One database server to run against.

    ``engine`` is the protocol family ("postgres" or "mysql"; MariaDB is "mysql"
    here and its product name is detected on connect). ``embedded`` targets have
    no host until their throwaway server is started (see ``diag.core.servers``).
    """

    label: str
    engine: str
    host: str | None = None
    port: int | None = None
    socket: str | None = None
    user: str = ""
    password: str | None = field(default=None, repr=False)
    passfile: str | None = None  # a password file the driver reads (PostgreSQL's ?passfile=); its path only
    database: str = ""
    embedded: bool = False
    label_given: bool = False

    @property
    def dbms(self) -> Engine:
        """The engine object for ``engine``: what to ask instead of comparing names."""
        return engine_for(self.engine)

    def redacted(self) -> str:
        """The DSN with the password replaced by ``***`` (safe to print and store)."""
        if self.embedded:
            return f"embedded:{self.engine}"
        scheme = self.dbms.schemes[0]
        auth = self.user + (":***" if self.password else "")
        where = self.host or ""
        if self.port:
            where += f":{self.port}"
        dsn = f"{scheme}://{auth}@{where}/{self.database}"
        if self.socket:
            dsn += f"?{self.dbms.socket_param}={self.socket}"
        return dsn

    def to_dict(self) -> dict[str, object]:
        """JSON-safe description without the password."""
        return {
            "label": self.label,
            "engine": self.engine,
            "dsn": self.redacted(),
            "host": self.host,
            "port": self.port,
            "socket": self.socket,
            "user": self.user,
            "database": self.database,
            "embedded": self.embedded,
            "credentials": self.dbms.credentials_text(self),
        }

    def is_local(self) -> bool:
        """True when the server runs on this machine (host metrics and perf apply)."""
        return self.embedded or bool(self.socket) or self.host in (None, "", "localhost", "127.0.0.1", "::1")

    def with_endpoint(self, host: str, port: int, socket: str | None, user: str, database: str) -> "Target":
        """A copy pointing at a started throwaway server (keeps a user-given label)."""
        t = replace(self, host=host, port=port, socket=socket, user=user, database=database)
        if not self.label_given:
            t = replace(t, label=default_label(t))
        return t


def default_label(t: Target) -> str:
    """engine@host:port (or engine@socket, or engine@embedded before start)."""
    if t.embedded and not t.port:
        return f"{t.engine}@embedded"
    where = t.host or t.socket or "localhost"
    return f"{t.engine}@{where}:{t.port}" if t.port else f"{t.engine}@{where}"


def parse_target(text: str) -> Target:
    """Parse ``[LABEL=]DSN``; raises UsageError with one clear line on bad input."""
    text = text.strip()
    label = ""
    m = _LABEL_RE.match(text)
    if m and "://" not in m.group(1) and ":" not in m.group(1):
        label, text = m.group(1), m.group(2)
    if text.startswith("embedded:"):
        name = text.split(":", 1)[1].strip().lower()
        eng = next((e for e in ENGINES if e.knows(name)), None)
        if eng is None:
            raise UsageError(f"unknown embedded engine {name!r}: use "
                             + " or ".join(f"embedded:{e.name}" for e in ENGINES))
        t = Target(label=label, engine=eng.name, embedded=True, label_given=bool(label),
                   user=eng.default_user, database=eng.default_database)
        return replace(t, label=label or default_label(t))
    if "://" not in text:
        raise UsageError(
            f"cannot read target {redact_text(text)!r}: expected postgresql://, mysql://, mariadb:// or "
            "embedded:ENGINE")
    scheme = text.split("://", 1)[0].lower()
    eng = engine_for_scheme(scheme)
    if eng is None:
        raise UsageError(f"unknown scheme {scheme!r} in target: use postgresql://, postgres://, mysql://, "
                         "mariadb:// or embedded:postgres|mysql")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as e:
        raise UsageError(f"bad target {redact_text(text)!r}: {e}") from None
    # libpq decodes %XX in a URI and leaves "+" as it is ("a+b" is a password of three characters): so here.
    query = {k: v[-1] for k, v in parse_qs(parts.query.replace("+", "%2B")).items()}
    host = unquote(parts.hostname or "") or None
    socket = None
    if query.get(eng.socket_param, "").startswith("/"):
        socket = query[eng.socket_param]
    elif host and host.startswith("/"):
        socket, host = host, None
    database = unquote(parts.path.lstrip("/")) or query.get("dbname", "") or eng.default_database
    user = unquote(parts.username or "") or query.get("user", "") or eng.default_user
    password = unquote(parts.password) if parts.password is not None else query.get("password")
    passfile = query.get(eng.passfile_param) if eng.passfile_param else None
    if not host and not socket:
        host = "127.0.0.1"
    t = Target(label=label, engine=eng.name, host=host, port=port or eng.default_port, socket=socket,
               user=user, password=password, passfile=passfile, database=database, label_given=bool(label))
    return replace(t, label=label or default_label(t))

