"""The catalog session every engine collector opens: named after the collector, bounded per statement."""

from __future__ import annotations

from diag.core.db import Session, own_app_name
from diag.core.engines import Engine
from diag.core.errors import DbError
from diag.core.targets import Target



def app_name(collector_name: str) -> str:
    """The application_name a collector's session uses: one of dbdiag's own (:data:`diag.core.db.OWN_PREFIX`),
    which the wait samplers leave out."""
    return own_app_name(collector_name)


def open_session(target: Target, engine: Engine, collector_name: str, statement_timeout_ms: int) -> Session:
    """A catalog session of ``collector_name`` to ``target``, each statement bounded by ``statement_timeout_ms``.

    Raises DbError (one clear line) when the target is not of ``engine`` or the
    connection fails.
    """
    if target.dbms is not engine:
        raise DbError(f"{target.label}: not a {engine.title} target", kind="unsupported")
    return Session(target, statement_timeout_ms=statement_timeout_ms, application_name=app_name(collector_name))
