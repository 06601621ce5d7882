"""The engines dbdiag knows, and the one function that finds an engine by name.

``engine_for("mariadb")`` is the MySQL engine; ``engine_for("pg")`` PostgreSQL.
Code asks the engine object (``engine_for(row["engine"]).log_name``) instead of
comparing engine names.
"""

from __future__ import annotations

from diag.core.engines.base import WAIT_CLASSES, DriverInfo, Engine, Identity
from diag.core.engines.mysql import MYSQL
from diag.core.engines.postgres import POSTGRES
from diag.core.errors import UsageError

ENGINES: tuple[Engine, ...] = (POSTGRES, MYSQL)


def engine_for(name: str) -> Engine:
    """The engine an engine name, alias or product name means; UsageError when none."""
    for e in ENGINES:
        if e.knows(name):
            return e
    raise UsageError(f"unknown engine {name!r}: use " + " or ".join(e.name for e in ENGINES))


def engine_for_scheme(scheme: str) -> Engine | None:
    """The engine a DSN scheme (``postgresql``, ``mariadb``...) names, or None."""
    s = scheme.lower()
    return next((e for e in ENGINES if s in e.schemes), None)


__all__ = ["ENGINES", "MYSQL", "POSTGRES", "WAIT_CLASSES", "DriverInfo", "Engine", "Identity", "engine_for", "engine_for_scheme"]
