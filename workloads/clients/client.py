"""The connection a workload client drives: as thin as each driver allows.

One class per driver (:mod:`workloads.clients.pgclient`, :mod:`workloads.clients.myclient`, on the
contract of :mod:`workloads.clients.clientbase`); this module picks one. A statement is
prepared once per connection and returned as a :class:`Query` whose ``rows`` and
``run`` are plain closures taking a parameter tuple, so the query loop pays for the
driver call and nothing else:

- psycopg 3: libpq through ``psycopg.pq`` (``PQexecPrepared`` / ``PQexec``);
  measured faster than ``cursor.execute(prepare=True)`` (see BENCHMARKS.md).
- psycopg2 (fallback, the ``psycopg2`` extra): ``PREPARE`` / ``EXECUTE`` in SQL;
  used only when psycopg 3 is not installed, and then psycopg 3 is not imported
  (nor psycopg2 beside psycopg 3: two libpq copies in one client process).
- mysqlclient: ``query`` / ``store_result`` / ``fetch_row`` on the C connection.
- PyMySQL (fallback, pure Python).
- libmariadb through ctypes (:mod:`workloads.clients.mylib`), preferred for MySQL/MariaDB
  when the library is present: the binary protocol's prepared statements.

``--protocol prepared`` means a server-side prepared statement on both engines:
the extended protocol's named statement on PostgreSQL; ``COM_STMT_EXECUTE`` through
libmariadb on MySQL/MariaDB, or, with the Python drivers, ``PREPARE`` + ``EXECUTE
... USING`` (MariaDB accepts literals in USING since 10.2; MySQL gets ``SET @p`` +
``EXECUTE ... USING @p``). The ``mariadb`` PyPI connector also speaks the binary
protocol but was measured at over 50 µs of client CPU per point select. Driver
exceptions become :class:`DbError` through the engine's ``map_error``, the project's
one mapping per engine.

Which class drives which driver, and the drivers only workload clients use (libmariadb), are each
engine's own (``WorkloadParts.clients``, ``workload_driver``: its module in :mod:`workloads.engines`).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence

from diag.core.db import DriverInfo
from diag.core.engines import Engine, engine_for
from diag.core.errors import DbError
from diag.core.targets import Target
from workloads.native import nativelib
from workloads.clients.clientbase import APP_NAME, ISOLATION_SQL, PROTOCOLS, Client, Query, Rows, text
from workloads.clients.myclient import MyClient, MyLibClient
from workloads.clients.pgclient import Pg2Client, PgPqClient
from workloads.engines import workload_parts

__all__ = ["APP_NAME", "ISOLATION_SQL", "NATIVE_WORKLOADS", "PROTOCOLS",
           "Client", "MyClient", "MyLibClient", "Pg2Client", "PgPqClient", "Query", "Rows", "client_class",
           "client_driver_text", "driver_label", "fastest_driver", "open_client", "text"]


def driver_label(drv: DriverInfo) -> str:
    """``name version`` from the installed distribution (module attributes differ per driver)."""
    if drv.name == "libmariadb":
        return f"libmariadb {drv.version} (ctypes, binary protocol)"
    dist = {"psycopg": "psycopg", "psycopg2": "psycopg2-binary", "mysqlclient": "mysqlclient",
            "PyMySQL": "PyMySQL"}.get(drv.name, drv.name)
    for name in (dist, drv.name):
        try:
            return f"{drv.name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return f"{drv.name} {drv.version}"


def _engine(engine: str | Engine) -> Engine:
    return engine if isinstance(engine, Engine) else engine_for(engine)


def fastest_driver(engine: str | Engine) -> DriverInfo:
    """The driver workload clients of ``engine`` use: libmariadb (ctypes) for MySQL/MariaDB when
    present, else the engine's pick (psycopg 3, else psycopg2; mysqlclient, else PyMySQL)."""
    dbms = _engine(engine)
    info = workload_parts(dbms).workload_driver()
    return info if info is not None else dbms.pick_driver()


def client_class(engine: str | Engine, driver: DriverInfo) -> type[Client]:
    """The Client subclass that drives ``driver`` on ``engine``; DbError for a driver it does not know."""
    dbms = _engine(engine)
    cls = workload_parts(dbms).clients.get(driver.name)
    if cls is None:
        raise DbError(f"no workload client for the {driver.name} driver on {dbms.title}", kind="connect")
    return cls


# Workloads with a program for the native executor (Workload.program; tests/unit/test_native_program.py
# keeps this list honest).
NATIVE_WORKLOADS = frozenset({"point-select", "read-only", "read-write", "insert", "custom", "tpcc"})


def client_driver_text(engine: str | Engine, protocol: str, workloads: Sequence[str] = (),
                       paced: bool = False) -> str:
    """What the workload clients of ``engine`` will run on, for the start-up line of a run, e.g.
    ``libmariadb 3.3.10 (ctypes, binary protocol) + native executor for point-select, read-only``.

    The native executor runs only the closed loop with the prepared protocol: a ``paced`` run (``--rate``,
    ``--think``) names none (the Python loop paces and runs each transaction). It is named for
    :data:`NATIVE_WORKLOADS` (custom: the scripts it can run) when its module is compiled, its library is
    there and DBDIAG_PY_LOOP is unset. DbError when the engine has no driver installed.
    """
    dbms = _engine(engine)
    drv = fastest_driver(dbms)
    label = driver_label(drv)
    if paced or protocol != "prepared":
        return label
    loops = []
    native = sorted(NATIVE_WORKLOADS.intersection(workloads))
    if native and nativelib.available(dbms):
        loops.append(f"{nativelib.LABEL} for {', '.join(native)}")
    elif native and nativelib.STALE:
        loops.append(f"Python loop ({nativelib.STALE})")
    return " + ".join([label, *loops])


def open_client(target: Target, protocol: str, isolation: str, product: str = "",
                driver: DriverInfo | None = None) -> Client:
    """Connect one workload client with ``driver``, by default the fastest installed one."""
    drv = driver or fastest_driver(target.dbms)
    return client_class(target.dbms, drv)(target, drv, protocol, isolation, product)
