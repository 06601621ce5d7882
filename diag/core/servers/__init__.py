"""Throwaway database servers (see :mod:`diag.core.servers.base`), and the registry that starts one per engine:
:data:`LAUNCHERS`, keyed by :attr:`Engine.name <diag.core.engines.base.Engine.name>`, one line per engine whose
launcher is its module here (:mod:`diag.core.servers.pg`, :mod:`diag.core.servers.mysql`).
"""

from __future__ import annotations

from collections.abc import Callable

from diag.core.engines import MYSQL, POSTGRES, Engine, engine_for
from diag.core.procs import Supervisor
from diag.core.servers.base import ThrowawayServer, free_port, run_user
from diag.core.servers.mysql import find_mysql_binaries, start_mysql
from diag.core.servers.pg import find_pg_bindir, start_postgres

Launcher = Callable[..., ThrowawayServer]  # (settings, port, supervisor=..., instrument=...)
# How each engine's throwaway server starts (settings, port): keyed by Engine.name. Not on the engine objects:
# the launchers connect through diag.core.db and diag.core.targets, which import the engines.
LAUNCHERS: dict[str, Launcher] = {POSTGRES.name: start_postgres, MYSQL.name: start_mysql}


def start_server(engine: str | Engine, settings: dict[str, str] | None = None,
                 port: int | None = None, supervisor: Supervisor | None = None,
                 instrument: bool = True) -> ThrowawayServer:
    """Start a throwaway server for ``engine`` (an Engine, or any name engine_for knows: "postgres",
    "mariadb"...); UsageError for an unknown name. ``supervisor`` cleans it up if we are killed (None: the
    process's default one);
    ``instrument`` False: without the engine's statement instrumentation (the overhead benchmark's OFF)."""
    dbms = engine if isinstance(engine, Engine) else engine_for(engine)
    return LAUNCHERS[dbms.name](settings, port, supervisor=supervisor, instrument=instrument)


__all__ = ["LAUNCHERS", "Launcher", "ThrowawayServer", "find_mysql_binaries", "find_pg_bindir", "free_port", "run_user",
           "start_mysql", "start_postgres", "start_server"]
