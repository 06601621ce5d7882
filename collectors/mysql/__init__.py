"""MySQL / MariaDB collectors (MySQL 5.7, 8.0, 8.4; MariaDB 10.5 to 11.x).

Version-specific SQL lives in ``sql/`` and is chosen by
:func:`collectors.sql.pick_sql`.
"""

from collectors.mysql.blocking import MyBlockingCollector
from collectors.mysql.settings import MySettingsCollector
from collectors.mysql.status import MyStatusCollector
from collectors.mysql.statements import MyStatementSource
from collectors.mysql.waits import MyWaitsCollector
from collectors.mysql.procs import mysql_thread_kinds
from collectors.engine_parts import SourceParts
from collectors.oldest import OldestTransaction

MYSQL_COLLECTORS = (MyStatusCollector, MyWaitsCollector, MySettingsCollector, MyStatementSource, MyBlockingCollector,
                    OldestTransaction)

# This engine's sources, as collectors.engines finds them.
PARTS = SourceParts(MYSQL_COLLECTORS, mysql_thread_kinds)

__all__ = ["MyBlockingCollector", "MyStatementSource", "MYSQL_COLLECTORS", "PARTS", "MySettingsCollector", "MyStatusCollector", "MyWaitsCollector"]
