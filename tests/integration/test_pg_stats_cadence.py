"""pg_stats reads pg_stat_io in every IO_EVERY-th record, the first and the last, and every other part each time."""

from __future__ import annotations

from pathlib import Path

from collectors.base import CollectorContext
from collectors.pg.stats import IO_EVERY, PgStatsCollector
from diag.core import servers


def test_pg_stat_io_at_its_own_cadence(pg_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    c = PgStatsCollector(CollectorContext(target=pg_server.target(), artifacts=tmp_path))
    assert c.probe().ok
    c.start()
    recs = [c.sample() for _ in range(IO_EVERY + 3)]
    recs.extend(r for r in c.stop() or [] if r.get("kind") is None)
    with_io = [i for i, r in enumerate(recs) if any(k.startswith("io.") for k in r)]
    assert with_io == [0, IO_EVERY, len(recs) - 1]   # PostgreSQL 18: pg_stat_io is there to read
    # the other parts are in every record, and the io keys of the records that have them are the same set
    assert all("db.xact_commit" in r and "wal.lsn_bytes" in r and "locks.waiting" in r for r in recs)
    keys = [{k for k in recs[i] if k.startswith("io.")} for i in with_io]
    assert keys[0] == keys[1] == keys[2] and len(keys[0]) > 50
    sizes = [len(str(r)) for r in recs]
    assert max(sizes[1:IO_EVERY]) < sizes[0] / 2   # what the cadence saves: most of a record is pg_stat_io
