"""buffer_pool_misses: a PostgreSQL whose shared_buffers (128 kB, the minimum of 16 blocks) cannot hold the
point-select table (100,000 rows, about 25 MB) reads from outside it in every transaction; the OS page cache
serves those reads (the table was just loaded on a machine with GBs free), so no read wait shows and
io_read_bound stays silent: the rule names it from the pool's own counters. The same workload on the session's
servers with their default pools (128 MB shared_buffers, 128 MB InnoDB pool) is not named: the point-select runs
test_compare and test_findings_planted read as well."""

from __future__ import annotations

import json
from pathlib import Path

from diag.core import servers
from tests.integration.test_findings_planted import run, summary


def test_small_shared_buffers_are_named_from_the_pool_counters(tmp_path: Path) -> None:
    with servers.start_postgres({"shared_buffers": "128kB"}) as pg:
        by = run(tmp_path / "bundle", [f"pg={pg.dsn()}"], ["point-select"], clients=(2,))
    found = [f for f in by["pg"] if f["category"] == "buffer_pool_misses"]
    assert len(found) == 1, summary(by["pg"])
    ev = found[0]["evidence"]
    assert ev["blocks_read_per_txn"] >= 1.0 and ev["shared_buffers_hit_pct"] < 90, ev  # every lookup misses
    assert ev["shared_buffers"].startswith("16 "), ev  # the planted setting, as the server reported it (blocks)
    assert ev["served_from"].startswith("the OS page cache"), ev
    assert 0 < found[0]["impact"] <= 1 and "shared_buffers" in found[0]["advice"]
    # Per table: sbtest1 read through a 16-block pool, so well under its hit ratio with a pool that holds it;
    # the size it would need is at least sbtest1's own (100,000 rows of 120+60 characters: over 18 MB).
    assert ev["hit_ratio_per_table"].startswith("dbdiag.sbtest1: "), ev
    assert ev["would_need_bytes"] > 18 * 2**20 and "MB" in found[0]["advice"], ev


def test_default_pools_are_not_named(point_select_bundles: dict[str, Path]) -> None:
    for label, path in point_select_bundles.items():
        found = json.loads((path / "findings.json").read_text())["findings"]
        assert not [f for f in found if f["category"] == "buffer_pool_misses"], (label, summary(found))


def test_small_innodb_pool_is_named_without_performance_schema(tmp_path: Path) -> None:
    """MariaDB as Debian ships it (performance_schema off: no wait events), a 6 MB pool under 200,000 rows."""
    with servers.start_mysql({"innodb_buffer_pool_size": "6M", "performance_schema": "OFF"}) as my:
        by = run(tmp_path / "bundle", [f"my={my.dsn()}"], ["point-select"], clients=(2,), scale=2)
    found = [f for f in by["my"] if f["category"] == "buffer_pool_misses"]
    assert len(found) == 1, summary(by["my"])
    ev = found[0]["evidence"]
    assert ev["pages_read_from_disk_per_txn"] >= 0.2 and ev["buffer_pool_hit_pct"] < 99, ev
    assert int(ev["innodb_buffer_pool_size"]) == 6 * 1024 * 1024, ev  # the planted setting, in bytes
    assert ev["served_from"].startswith("not known"), ev  # InnoDB does not time its reads in its counters
    assert ev["hit_ratio_per_table"].startswith("not read: "), ev  # and says why it has no per-table ratio
