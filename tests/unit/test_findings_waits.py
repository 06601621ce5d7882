"""reports.rules.waits on saved real bundles: each rule fires on its planted case and stays quiet on clean ones.

Bundles (tests/data/bundles/SOURCES.md): hot-row updates (PostgreSQL 18, MariaDB 10.11), single-row inserts,
point selects. Where a real planted run is too slow or impossible here (latch waits, cache misses), a real
bundle's wait samples are renamed in place: the same counts, another wait event.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from diag.core.bundle import Bundle, load_bundle
from diag.core.engines import ENGINES, WAIT_CLASSES, engine_for
from reports.model import wait_profiles as wp
from reports.model.steps import steps
from reports.rules import pool
from reports.rules import waits as w
from reports.rules.engines import RULE_PARTS

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"


def load(name: str) -> Bundle:
    return load_bundle(DATA / name)


def rename_waits(b: Bundle, prefix: str, old: str, new: str) -> Bundle:
    """A copy of ``b`` whose ``prefix*`` wait samples of ``old`` are counted under ``new`` instead."""
    b = copy.deepcopy(b)
    for name, recs in b.series.items():
        if name.startswith(prefix):
            for r in recs:
                waits = r.get("waits") or {}
                if old in waits:
                    waits[new] = waits.get(new, 0) + waits.pop(old)
    return b


def by_step(findings: list, category: str | None = None) -> dict[tuple[str, int], object]:
    return {(f.target, f.clients): f for f in findings if category is None or f.category == category}


# --------------------------------------------------------------------------- classes


@pytest.mark.parametrize("engine,key,cls", [
    ("postgres", "CPU", "cpu"),
    ("postgres", "Lock:transactionid", "lock"),
    ("postgres", "Lock:tuple", "lock"),
    ("postgres", "LWLock:BufferContent", "latch"),
    ("postgres", "Timeout:SpinDelay", "latch"),
    ("postgres", "LWLock:WALWrite", "commit_flush"),
    ("postgres", "IO:WalSync", "commit_flush"),
    ("postgres", "IO:WALSync", "commit_flush"),  # PostgreSQL 13-16 spelling
    ("postgres", "IO:DataFileRead", "data_io"),
    ("postgres", "IO:AioIoCompletion", "data_io"),
    ("postgres", "Client:ClientRead", "client"),
    ("postgres", "Client:ClientWrite", "client"),
    ("postgres", "Timeout:PgSleep", "other"),
    ("mysql", "Lock:row", "lock"),
    ("mysql", "Lock:metadata", "lock"),
    ("mysql", "wait/synch/mutex/innodb/trx_sys_mutex", "latch"),
    ("mysql", "wait/synch/sxlock/innodb/index_tree_rw_lock", "latch"),
    ("mysql", "wait/io/file/innodb/innodb_log_file", "commit_flush"),
    ("mysql", "State:Commit", "commit_flush"),
    ("mysql", "wait/io/file/innodb/innodb_data_file", "data_io"),
    ("mysql", "ClientRead", "client"),
    ("mysql", "State:Writing to net", "cpu"),  # the send itself, not a wait for the client
    ("mysql", "State:Updating", "cpu"),  # a statement at work
    ("mysql", "State:User sleep", "other"),
    ("postgres", "LWLock:WALBufMapping", "buffer_log_space"),
    ("mysql", "wait/io/socket/sql/client_connection", "client"),
])
def test_wait_classes(engine: str, key: str, cls: str) -> None:
    assert wp.wait_class(engine_for(engine), key) == cls


def test_every_engine_has_a_wait_vocabulary() -> None:
    """A new engine without its wait classes, sampler and counters fails here, not on its first report."""
    assert set(RULE_PARTS) == {e.name for e in ENGINES}
    for e in ENGINES:
        assert e.waits_series and e.stats_series and e.wait_samplers.get("")
        assert wp.wait_class(e, "CPU") == "cpu" and wp.wait_class(e, "Lock:anything") == "lock"
        assert wp.wait_class(e, "no such wait") == "other"
        assert all(e.wait_label(c) for c in WAIT_CLASSES)


def test_mariadb_commit_state_under_cpu_counts_as_flush() -> None:
    """performance_schema on MariaDB 10.8+ shows a commit waiting for its fsync as CPU; cpu_states tells."""
    b = copy.deepcopy(load("hot_row_mariadb_c4"))
    recs = next(v for k, v in b.series.items() if k.startswith("my_waits--"))
    for r in recs:
        r["source"] = "performance_schema"
        n = r.get("waits", {}).pop("Lock:row", 0)
        r["waits"]["CPU"] = r["waits"].get("CPU", 0) + n
        r["cpu_states"] = {"Commit": n}
    f = by_step(w.commit_flush_bound(b))
    assert list(f) == [("hot-mysql", 4)]
    assert f[("hot-mysql", 4)].evidence["flush_waits"].startswith("State:Commit")
    assert w.lock_contention(b) == []


# --------------------------------------------------------------------------- lock_contention


def test_lock_contention_fires_on_hot_row_postgres() -> None:
    (f,) = w.lock_contention(load("hot_row_pg_c4"))
    assert (f.category, f.severity, f.target, f.workload, f.clients) == (
        "lock_contention", "warning", "hot-postgres", "custom", 4)
    assert f.impact == pytest.approx(0.704, abs=0.001)  # 81 of 115 samples
    assert f.evidence["lock_waits_pct"] == pytest.approx(70.4)
    assert f.evidence["lock_waits"].startswith("Lock:transactionid 80 (69.6%)")
    assert f.evidence["backend_samples"] == 115
    assert f.evidence["waiting_lock_requests_avg"] > 1  # pg_locks saw the queue too
    assert "custom, 4 clients" in f.evidence["window"] and "3.0 s measured" in f.evidence["window"]
    assert "Lock:transactionid" in f.title and "SKIP LOCKED" in f.advice


def test_lock_contention_fires_on_hot_row_mariadb() -> None:
    (f,) = w.lock_contention(load("hot_row_mariadb_c4"))
    assert (f.target, f.clients) == ("hot-mysql", 4)
    assert f.evidence["lock_waits"].startswith("Lock:row")
    assert f.evidence["lock_waits_pct"] > 50
    assert f.evidence["row_lock_waits_per_s"] > 100  # Innodb_row_lock_waits agrees with the samples
    assert f.evidence["row_lock_time_ms_per_txn"] > 1
    assert "INNODB_TRX" in f.evidence["source"]


@pytest.mark.parametrize("name", ["point_select", "insert_flush_cap_120", "insert_pg_fsync_off",
                                  "wal_heavy_pg_max_wal_32mb", "big_result_pg"])
def test_lock_contention_quiet_without_lock_waits(name: str) -> None:
    assert w.lock_contention(load(name)) == []


def test_lock_contention_needs_enough_samples() -> None:
    b = copy.deepcopy(load("hot_row_pg_c4"))
    step = b.results[0]
    inside = [r for r in b.series["pg_waits--hot-postgres"] if step["t_start"] < r["t"] <= step["t_end"] + 0.5]
    for i, r in enumerate(inside):
        r["waits"] = {"Lock:transactionid": 3} if i == 0 else {}
        r["samples"] = sum(r["waits"].values())
    p = wp.wait_profile(b, next(iter(steps(b))))
    assert p is not None and p.samples == 3 and p.share("lock") == 1.0
    assert w.lock_contention(b) == []  # all lock, but 3 samples are too few to say so


# --------------------------------------------------------------------------- latch_contention


@pytest.mark.parametrize("name", ["hot_row_pg_c4", "hot_row_pg_c32", "hot_row_mariadb_c4", "point_select",
                                  "insert_flush_cap_120", "wal_heavy_pg_max_wal_32mb"])
def test_latch_contention_quiet_on_real_runs(name: str) -> None:
    # hot_row_pg_c4 has LWLock:LockManager in 3 of 115 samples (2.6%): below the 10% threshold
    assert w.latch_contention(load(name)) == []


def test_latch_contention_fires_on_lwlock_waits() -> None:
    b = rename_waits(load("hot_row_pg_c4"), "pg_waits--", "Lock:transactionid", "LWLock:BufferContent")
    (f,) = w.latch_contention(b)
    assert f.evidence["latch_waits"].startswith("LWLock:BufferContent 80")
    assert f.evidence["latch_waits_pct"] == pytest.approx(72.2)  # with LockManager's 3 samples
    assert "BufferContent" in f.advice
    assert w.lock_contention(b) == []  # the same samples are no longer lock waits


def test_latch_contention_fires_on_innodb_mutex_waits() -> None:
    b = rename_waits(load("hot_row_mariadb_c4"), "my_waits--", "Lock:row", "wait/synch/mutex/innodb/lock_mutex")
    (f,) = w.latch_contention(b)
    assert f.target == "hot-mysql" and f.evidence["latch_waits"].startswith("wait/synch/mutex/innodb/lock_mutex")


# --------------------------------------------------------------------------- commit_flush_bound


def test_commit_flush_bound_fires_on_durable_inserts() -> None:
    found = by_step(w.commit_flush_bound(load("insert_flush_cap_120")))
    assert set(found) == {("postgres@127.0.0.1:45603", 1), ("postgres@127.0.0.1:45603", 2),
                          ("mysql@127.0.0.1:43453", 1), ("mysql@127.0.0.1:43453", 2)}
    pg2 = found[("postgres@127.0.0.1:45603", 2)]
    assert pg2.evidence["flush_waits_pct"] == pytest.approx(90.2)
    assert "LWLock:WALWrite" in pg2.evidence["flush_waits"] and "IO:WalSync" in pg2.evidence["flush_waits"]
    assert pg2.evidence["commits_per_s"] == pytest.approx(2074, abs=1)
    assert 0.5 < pg2.evidence["flush_calls_per_commit"] <= 1.0  # group commit at 2 clients
    my1 = found[("mysql@127.0.0.1:43453", 1)]
    assert my1.evidence["flush_waits"].startswith("State:Commit")
    assert "without performance_schema" in my1.evidence["note"]
    assert "redo log" in my1.title


@pytest.mark.parametrize("name", ["insert_pg_fsync_off", "point_select", "hot_row_pg_c4", "hot_row_mariadb_c4"])
def test_commit_flush_bound_quiet_without_flush_waits(name: str) -> None:
    # fsync=off: the inserts never wait for a flush (7 ClientRead and 4 CPU of 11 samples)
    assert w.commit_flush_bound(load(name)) == []


# --------------------------------------------------------------------------- io_read_bound


@pytest.mark.parametrize("name", ["point_select", "point_select_pg_simple", "insert_flush_cap_120",
                                  "hot_row_pg_c4", "hot_row_mariadb_c4", "wal_heavy_pg_max_wal_32mb"])
def test_io_read_bound_quiet_when_data_is_cached(name: str) -> None:
    assert w.io_read_bound(load(name)) == []


def test_io_read_bound_fires_on_a_buffer_pool_too_small() -> None:
    """MariaDB with a 6 MB buffer pool, 1M rows and O_DIRECT: point selects read from the disk (real run)."""
    (f,) = w.io_read_bound(load("point_select_mariadb_small_pool"))
    assert (f.target, f.clients, f.severity) == ("mysql@127.0.0.1:35933", 2, "warning")
    assert f.evidence["read_waits"] == "wait/io/file/innodb/innodb_data_file 30 (49.2%)"
    assert "performance_schema" in f.evidence["source"]
    assert f.evidence["buffer_pool_hit_pct"] == pytest.approx(64.61)
    assert f.evidence["pages_read_from_disk_per_txn"] == pytest.approx(1.04)
    assert f.impact == pytest.approx(0.4918, abs=1e-4)
    assert "innodb_buffer_pool_size" in f.advice


def test_reads_the_page_cache_served_are_the_pool_rules_not_reads_from_disk() -> None:
    """PostgreSQL with 16 blocks of shared_buffers (real run): 1.98 blocks read from outside the pool per
    select, timed at 3 µs each; 3 of its 19 samples in data I/O here. A CI run on a busy host saw them over
    IO_READ_SHARE, and "Reads from disk" took the step from the rule that names the pool. Counted at nearly all
    samples, they still are the pool's finding."""
    from reports.rules.cache import buffer_pool_misses
    b = rename_waits(load("point_select_pg_small_pool"), "pg_waits--", "CPU", "IO:DataFileRead")
    (step,) = steps(b)
    p = wp.wait_profile(b, step)
    assert p is not None and p.share("data_io") > wp.IO_READ_SHARE  # the plant: read waits over the threshold
    assert w.io_read_bound(b) == []
    (f,) = buffer_pool_misses(b)
    assert f.evidence["served_from"].startswith("the OS page cache"), f.evidence
    assert f.evidence["ms_per_block_read"] == pytest.approx(0.003, abs=0.0005)  # 3 µs a block (SOURCES.md)


def test_read_waits_stay_io_read_bound_unless_the_pool_rule_names_them_at_memory_speed() -> None:
    misses = {"blocks_read_per_txn": 2.0, "shared_buffers_hit_pct": 34.0}
    assert pool.page_cache_misses({**misses, "ms_per_block_read": 0.003})
    assert not pool.page_cache_misses({**misses, "ms_per_block_read": 0.2})  # 200 µs a block: a device
    assert not pool.page_cache_misses(misses)  # not timed (track_io_timing off)
    assert not pool.page_cache_misses({"pages_read_from_disk_per_txn": 1.0, "buffer_pool_hit_pct": 60.0})  # InnoDB
    # fast reads the pool rule would not name (too few, or the pool serves 99%): io_read_bound keeps them
    assert not pool.page_cache_misses({"blocks_read_per_txn": 0.1, "shared_buffers_hit_pct": 34.0,
                                       "ms_per_block_read": 0.003})
    assert not pool.page_cache_misses({"blocks_read_per_txn": 2.0, "shared_buffers_hit_pct": 99.5,
                                       "ms_per_block_read": 0.003})


def test_io_read_bound_fires_on_data_file_reads() -> None:
    b = rename_waits(load("insert_flush_cap_120"), "pg_waits--", "IO:WalSync", "IO:DataFileRead")
    found = by_step(w.io_read_bound(b))
    assert set(found) == {("postgres@127.0.0.1:45603", 1), ("postgres@127.0.0.1:45603", 2)}
    f = found[("postgres@127.0.0.1:45603", 1)]
    assert f.evidence["read_waits"] == "IO:DataFileRead 17 (85.0%)"
    assert f.evidence["shared_buffers_hit_pct"] > 90  # the counters say what really happened: cached
    assert "shared_buffers" in f.advice
