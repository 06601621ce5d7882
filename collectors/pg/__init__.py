"""PostgreSQL collectors (13 to 18): cumulative statistics, wait-event sampling, settings snapshot.

An explicit registry: the orchestrator instantiates each class in ``PG_COLLECTORS``
for every PostgreSQL target. Version-specific SQL is in ``sql/`` and chosen by
:func:`collectors.sql.pick_sql`.
"""

from collectors.engine_parts import SourceParts
from collectors.oldest import OldestTransaction
from collectors.pg.blocking import PgBlockingCollector
from collectors.pg.settings import PgSettingsCollector
from collectors.pg.stats import PgStatsCollector
from collectors.pg.statements import PgStatementSource
from collectors.pg.tables import PgTableScans
from collectors.pg.waits import PgWaitsCollector
from collectors.pg.procs import process_kinds

PG_COLLECTORS = (PgStatsCollector, PgWaitsCollector, PgSettingsCollector, PgStatementSource, PgBlockingCollector,
                 PgTableScans, OldestTransaction)

# This engine's sources, as collectors.engines finds them.
PARTS = SourceParts(PG_COLLECTORS, process_kinds)

__all__ = ["PgBlockingCollector", "PgTableScans", "PgStatementSource", "PG_COLLECTORS", "PARTS", "PgSettingsCollector", "PgStatsCollector", "PgWaitsCollector"]
