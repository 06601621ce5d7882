"""Creating and bulk-loading a workload's tables, reused while version and scale match.

Everything lives in schema ``dbdiag`` (PostgreSQL) or database ``dbdiag`` (MySQL),
created if absent; nothing else is touched. A dataset is described once as
:class:`Table` definitions plus row generators; each engine gets its fast path:

- PostgreSQL: ``CREATE TABLE`` and ``COPY ... FREEZE`` in one transaction (as
  ``pgbench -i``); then the primary key's unique index and the other indexes
  built side by side on separate connections, the key attached to its index, and
  ``VACUUM ANALYZE``.
- MySQL/MariaDB: table with its primary key (rows arrive in key order), multi-row
  ``INSERT`` of about 1 MB each with unique/foreign-key checks off, then the
  secondary indexes and ``ANALYZE TABLE``.

Big tables (sbtest, pgbench_accounts) also give a ``chunks`` formatter that
builds the text with one f-string per row; the generic path formats value by
value. sbtest also gives ``pg_binary``, COPY BINARY tuples: its 180 characters of
text per row cost the server more to parse than the binary form (12-23% less load
time at scale 10, measured here). Generating in a separate process was measured and gave nothing here: the
server's COPY, not the Python formatting, is the long pole.

What differs per engine: the container's DDL, column types and table options are the
engine's words (``Engine.load_container``, ``timestamp_type``, ``autoinc_type``, ``table_options``); its bulk
path and whether tables loaded earlier are as it would create them now are its module's in
:mod:`workloads.engines` (``WorkloadParts.load_table``, ``loaded_current``). The tables themselves are
:mod:`workloads.tables`.

``dbdiag.dbdiag_meta`` records (dataset, version, scale) only after a load
finishes, so an interrupted load is never mistaken for a complete one.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from diag.core.db import Session
from diag.core.errors import DbError
from workloads.engines import workload_parts
from workloads.tables import META, SCHEMA, Dataset, RowFormat, Table


def ensure_schema(s: Session) -> None:
    """Create schema/database ``dbdiag`` and the meta table if absent."""
    s.execute(f"CREATE {s.dbms.load_container} IF NOT EXISTS {SCHEMA}")
    s.execute(f"CREATE TABLE IF NOT EXISTS {META} (dataset varchar(64) NOT NULL PRIMARY KEY, "
              f"version integer NOT NULL, scale varchar(32) NOT NULL){s.dbms.table_options}")


def is_loaded(s: Session, ds: Dataset) -> bool:
    """True when the meta row matches and every table is there."""
    rows = s.query(f"SELECT version, scale FROM {META} WHERE dataset = %s", (ds.name,))
    if not rows or int(rows[0]["version"]) != ds.version or rows[0]["scale"] != scale_text(ds.scale):
        return False
    for t in ds.tables:
        try:
            s.query(f"SELECT 1 FROM {t.qname} WHERE 1 = 0")
        except DbError:
            return False
    return workload_parts(s.dbms).loaded_current(s, ds)


def scale_text(scale: float) -> str:
    return f"{scale:g}"


def load(s: Session, ds: Dataset, out: TextIO | None = sys.stderr) -> float:
    """Drop, create and fill every table of ``ds``; returns the seconds it took."""
    t0 = time.monotonic()
    s.execute(f"DELETE FROM {META} WHERE dataset = %s", (ds.name,))
    for t in ds.tables:
        s.execute(f"DROP TABLE IF EXISTS {t.qname}")
    load_table = workload_parts(s.dbms).load_table
    for t in ds.tables:
        load_table(s, t, out)
    s.execute(f"INSERT INTO {META} (dataset, version, scale) VALUES (%s, %s, %s)",
              (ds.name, ds.version, scale_text(ds.scale)))
    return time.monotonic() - t0


def drop(s: Session, ds: Dataset) -> None:
    s.execute(f"DELETE FROM {META} WHERE dataset = %s", (ds.name,))
    for t in ds.tables:
        s.execute(f"DROP TABLE IF EXISTS {t.qname}")


def row_counts(s: Session, ds: Dataset) -> dict[str, int]:
    """Actual row count of each table (for checks and tests)."""
    return {t.name: int(s.query(f"SELECT COUNT(*) AS n FROM {t.qname}")[0]["n"]) for t in ds.tables}


# The tables are workloads.tables'; workloads import them from here too.
__all__ = ["META", "SCHEMA", "Dataset", "RowFormat", "Table", "drop", "ensure_schema", "is_loaded", "load", "row_counts",
           "scale_text"]
