"""The collectors' version-specific SQL: one folder per engine, picked by :func:`diag.core.sqlfiles.pick_in`.

Each engine's queries live in one folder (:data:`SQL_DIRS`, keyed by
:attr:`Engine.name <diag.core.engines.base.Engine.name>`), one statement per file, named
``<name>[.<product>].<oldest version>.sql`` (the rules are in :mod:`diag.core.sqlfiles`, the one picker,
which the TPC-C routines of :mod:`workloads.tpcc.tpcc_sp` use too).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from diag.core.db import Session
from diag.core.engines import ENGINES, Engine
from diag.core.sqlfiles import MARKER, SqlUnavailable, names_in, pick_in, statement_text

__all__ = ["MARKER", "SQL_DIRS", "SqlUnavailable", "pick_sql", "query_named", "session_sql", "sql_dir",
           "sql_names", "statement_text"]

_HERE = Path(__file__).resolve().parent
# Engine name -> folder of its collectors' SQL files.
SQL_DIRS: dict[str, Path] = {e.name: _HERE / e.sql_folder / "sql" for e in ENGINES}


def sql_dir(engine: Engine) -> Path:
    """The folder holding ``engine``'s collector SQL files."""
    return SQL_DIRS[engine.name]


def sql_names(engine: Engine, folder: Path | None = None) -> list[str]:
    """All query names of ``engine`` that have at least one file."""
    return names_in(Path(folder or sql_dir(engine)), engine)


def pick_sql(name: str, engine: Engine, version_num: int, product: str = "", folder: Path | None = None) -> str:
    """The statement of query ``name`` for a server of ``engine`` at ``version_num`` (see
    :func:`diag.core.sqlfiles.pick_in`); ``folder`` overrides the engine's SQL folder."""
    return pick_in(Path(folder or sql_dir(engine)), name, engine, version_num, product)


def session_sql(s: Session, name: str) -> str:
    """The statement of query ``name`` for the server ``s`` is connected to."""
    return _picked(name, s.dbms, s.version_num, s.product)


@functools.lru_cache(maxsize=256)
def _picked(name: str, engine: Engine, version_num: int, product: str) -> str:
    """:func:`pick_sql` once per query and server kind: the 10 Hz samplers ask at every read, and building the
    folder's paths cost as much as the read's own parsing there (~40 us)."""
    return pick_sql(name, engine, version_num, product)


def query_named(s: Session, name: str, params: Any = None) -> list[dict[str, Any]]:
    """Run query ``name`` as picked for ``s``'s server; rows as dicts."""
    return s.query(session_sql(s, name), params)
