"""reports.model.durability_view: window rates and per-step verdicts from planted bundles (no servers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors.diskstats import DeviceInfo
from collectors.fsync_test import GROUP_ONE, FsyncMethodResult, FsyncTestResult
from diag.core.bundle import Bundle, safe_name
from diag.core.schema import FlushDevice, ResultRow
from reports.model import durability_view as dv

T0 = 1_700_000_000.0
PG_SETTINGS = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on", "wal_sync_method": "fdatasync"}
MARIADB_SETTINGS = {"innodb_flush_log_at_trx_commit": "1", "log_bin": "OFF", "sync_binlog": "0",
                    "innodb_doublewrite": "ON", "innodb_flush_method": "O_DIRECT"}
STORAGE = {"name": "vda", "fs_type": "ext4", "write_cache": "write back"}


def linear(keys_rates: dict[str, float], start: float = T0, n: int = 12, step: float = 1.0,
           base: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Records every ``step`` s whose counters grow at the given rates (per second)."""
    base = base or {}
    return [{"t": start + i * step, **{k: base.get(k, 0.0) + r * i * step for k, r in keys_rates.items()}}
            for i in range(n)]


def fsync_result(ops_per_s: float) -> FsyncTestResult:
    dev = DeviceInfo(path="/data", name="vda", fs_type="ext4", stat_devices=("vda",), write_cache="write back")
    t = FsyncMethodResult(GROUP_ONE, "fdatasync", "fdatasync", True, ops=int(ops_per_s), seconds=1.0,
                          ops_per_s=ops_per_s, us_per_op=1e6 / ops_per_s)
    return FsyncTestResult(directory="/data", seconds_per_test=1.0, device=dev, tests=(t,), flush_counters=True)


def bundle(*, engine: str = "postgres", label: str = "pg", settings: dict[str, str] | None = None,
           tps: float = 1000.0, clients: int = 1, workload: str = "insert", flush: list[dict[str, Any]] | None = None,
           extra_series: dict[str, list[dict[str, Any]]] | None = None, F: float | None = 5000.0,
           user_F: float | None = None, version: str = "PostgreSQL 18.1", local: bool = True) -> Bundle:
    run: dict[str, Any] = {
        "options": {"flush_capability": user_F},
        "targets": [{"label": label, "engine": engine, "version": version, "local": local,
                     "settings": PG_SETTINGS if settings is None else settings, "storage": STORAGE}],
    }
    if F is not None:
        run["flush_capability"] = {"devices": {"vda": FlushDevice.from_fsync_test(fsync_result(F).to_dict()).to_dict()},
                                   "targets": {label: {"device": "vda", "directory": "/data", "error": ""}}}
    row = {"target": label, "engine": "postgresql" if engine == "postgres" else "mariadb", "workload": workload,
           "clients": clients, "tps": tps, "transactions": int(tps * 8), "t_start": T0 + 2.0, "t_end": T0 + 10.0}
    series: dict[str, list[dict[str, Any]]] = {}
    if flush is not None:
        series[safe_name(f"flush--{label}")] = flush
    for k, v in (extra_series or {}).items():
        series[safe_name(k)] = v
    return Bundle(path=Path("/nonexistent"), run=run, results=[row], findings=[], events=[], series=series)


def flush_series(S: float, D: float, fs: bool = True, syscalls: bool = True) -> list[dict[str, Any]]:
    rates: dict[str, float] = {"device.vda.flushes": D}
    if syscalls:
        rates.update({"syscalls.fdatasync": S, "syscalls.fsync": 0.0, "syscalls.sync_file_range": 0.0})
    if fs:
        rates[dv.FS_KEY] = S
    return linear(rates, base={"device.vda.flushes": 123_456.0})


# --------------------------------------------------------------------------- window rates


def test_window_rate_of_a_steady_counter() -> None:
    recs = linear({"x": 100.0})
    assert dv.window_rate(recs, ["x"], T0 + 2.5, T0 + 7.25) == pytest.approx(100.0)


def test_window_rate_sums_keys_and_skips_records_missing_one() -> None:
    recs = linear({"a": 10.0, "b": 5.0})
    del recs[3]["b"]
    assert dv.window_rate(recs, ["a", "b"], T0 + 1, T0 + 9) == pytest.approx(15.0)


def test_window_rate_survives_a_counter_reset() -> None:
    recs = linear({"x": 100.0})
    for r in recs[6:]:
        r["x"] -= 600.0  # restarted from 0 at the 6th record
    recs[6]["x"] = 0.0
    # the interval of the reset counts cur (0) as its increase: a 100-count undercount over 8 s
    assert dv.window_rate(recs, ["x"], T0 + 1, T0 + 9) == pytest.approx(700 / 8)


def test_window_rate_clips_and_refuses_a_thin_window() -> None:
    recs = linear({"x": 50.0}, n=4)  # T0 .. T0+3
    assert dv.window_rate(recs, ["x"], T0 + 1, T0 + 5) == pytest.approx(50.0)  # 2 of 4 s covered: enough
    assert dv.window_rate(recs, ["x"], T0 + 2, T0 + 10) is None  # 1 of 8 s
    assert dv.window_rate(recs, ["x"], T0 + 5, T0 + 4) is None
    assert dv.window_rate([], ["x"], T0, T0 + 1) is None
    assert dv.window_rate(recs, ["missing"], T0, T0 + 3) is None


def test_window_rate_interpolates_between_records() -> None:
    recs = [{"t": T0, "x": 0}, {"t": T0 + 1, "x": 100}, {"t": T0 + 2, "x": 100}]
    # 100 in the first second, none in the second: half of each second is in the window
    assert dv.window_rate(recs, ["x"], T0 + 0.5, T0 + 1.5) == pytest.approx(50.0)


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=2, max_size=30), st.floats(0.1, 1e4))
def test_window_rate_is_never_negative(values: list[float], rate_scale: float) -> None:
    recs = [{"t": T0 + i, "x": v * rate_scale} for i, v in enumerate(values)]
    r = dv.window_rate(recs, ["x"], T0, T0 + len(values) - 1)
    assert r is None or r >= 0


# --------------------------------------------------------------------------- C and F


def test_commit_rate_by_workload() -> None:
    assert dv.commit_rate(ResultRow(workload="insert", tps=500.0))[0] == 500.0
    assert dv.commit_rate(ResultRow(workload="read-write", tps=500.0))[0] == 500.0
    c, why = dv.commit_rate(ResultRow(workload="tpcc", tps=100.0))
    assert c == pytest.approx(90.0) and "0.9" in why
    assert dv.commit_rate(ResultRow(workload="point-select", tps=9e4))[0] is None
    assert dv.commit_rate(ResultRow.from_dict({"workload": "custom", "tps": 10.0, "write_tps": 4.0}))[0] == 4.0
    assert dv.commit_rate(ResultRow(workload="insert"))[0] is None


def test_user_flush_capability_wins_over_the_test() -> None:
    b = bundle(F=9000.0, user_F=120.0)
    fc = dv.flush_capability(b.run, "pg")
    assert fc.ops_per_s == 120.0 and "--flush-capability 120" in fc.source


def test_flush_capability_from_the_stored_test() -> None:
    fc = dv.flush_capability(bundle(F=8000.0).run, "pg")
    assert fc.ops_per_s == pytest.approx(8000.0) and "vda" in fc.source
    assert fc.fsync_test is not None and fc.fsync_test.directory == "/data"


def test_flush_capability_missing_or_failed() -> None:
    assert dv.flush_capability(bundle(F=None).run, "pg").ops_per_s is None
    run = {"flush_capability": {"devices": {}, "targets": {"pg": {"device": None, "error": "not writable"}}}}
    fc = dv.flush_capability(run, "pg")
    assert fc.ops_per_s is None and "not writable" in fc.source


# --------------------------------------------------------------------------- steps


def test_durable_server_flushing_each_commit_is_plausible() -> None:
    b = bundle(flush=flush_series(S=1000.0, D=1010.0))
    (s,) = dv.durability_rows(b)
    assert s.C == 1000.0 and s.S == pytest.approx(1000.0) and s.D == pytest.approx(1010.0)
    assert s.S_per_commit == pytest.approx(1.0) and s.D_per_commit == pytest.approx(1.01)
    assert s.F == pytest.approx(5000.0)
    assert s.settings.status == "durable"
    assert s.plausibility is not None and s.plausibility.status == "plausible"
    assert s.syscalls["fdatasync"] == pytest.approx(1000.0)
    assert dv.overall([s]) == (0, "durable and plausible")
    d = s.to_dict()
    assert d["plausibility"]["status"] == "plausible" and d["S_per_commit"] == pytest.approx(1.0)


def test_datasheet_capability_with_two_clients_is_implausible() -> None:
    # seed 004: several hundred commits/s from 2 clients against a 120 flushes/s disk
    b = bundle(tps=600.0, clients=2, user_F=120.0, flush=flush_series(S=300.0, D=300.0))
    (s,) = dv.durability_rows(b)
    assert s.plausibility is not None and s.plausibility.status == "implausible"
    failed = [c.name for c in s.plausibility.checks if c.status == "failed"]
    assert failed == ["flush_capacity"]
    assert "600 <= 120 x 2 x 1.5 = 360" in s.plausibility.formula
    code, line = dv.overall([s])
    assert code == 1 and "implausible at 2 client" in line


def test_no_flush_calls_under_durable_settings_is_implausible() -> None:
    b = bundle(flush=flush_series(S=0.0, D=0.0))
    (s,) = dv.durability_rows(b)
    assert s.plausibility is not None and s.plausibility.status == "implausible"
    assert any(c.name == "flush_calls_present" and c.status == "failed" for c in s.plausibility.checks)


def test_relaxed_settings_name_the_setting() -> None:
    b = bundle(settings={**PG_SETTINGS, "synchronous_commit": "off"}, flush=flush_series(S=5.0, D=90.0))
    (s,) = dv.durability_rows(b)
    assert s.settings.status == "relaxed" and [r.setting for r in s.settings.relaxed] == ["synchronous_commit"]
    code, line = dv.overall([s])
    assert code == 1 and "synchronous_commit=off" in line


def test_mariadb_rows_carry_the_product_name() -> None:
    b = bundle(engine="mysql", label="my", settings={**MARIADB_SETTINGS, "innodb_flush_log_at_trx_commit": "2"},
               version="10.11.6-MariaDB", flush=flush_series(S=40.0, D=100.0))
    (s,) = dv.durability_rows(b)
    assert s.engine == "mysql"
    assert [r.setting for r in s.settings.relaxed] == ["innodb_flush_log_at_trx_commit"]


def test_odsync_writes_without_a_filesystem_count_leave_S_unknown() -> None:
    b = bundle(settings={**PG_SETTINGS, "wal_sync_method": "open_datasync"},
               flush=flush_series(S=0.0, D=1000.0, fs=False))
    (s,) = dv.durability_rows(b)
    assert s.S is None and "O_SYNC/O_DSYNC" in s.S_source
    assert any("open_datasync" in n for n in s.notes)
    assert s.plausibility is not None and s.plausibility.status != "implausible"


def test_odsync_writes_seen_by_the_filesystem_count() -> None:
    recs = flush_series(S=1000.0, D=1000.0)
    for r in recs:
        r["syscalls.fdatasync"] = 0  # open_datasync: no fdatasync calls, one file sync per commit
    b = bundle(settings={**PG_SETTINGS, "wal_sync_method": "open_datasync"}, flush=recs)
    (s,) = dv.durability_rows(b)
    assert s.S == pytest.approx(1000.0) and "filesystem" in s.S_source
    assert s.plausibility is not None and s.plausibility.status == "plausible"


def test_larger_of_syscalls_and_filesystem_syncs_is_S() -> None:
    recs = flush_series(S=1000.0, D=1000.0)
    for r in recs:
        r[dv.FS_KEY] = r[dv.FS_KEY] / 2  # say half the syncs went to another filesystem
    (s,) = dv.durability_rows(bundle(flush=recs))
    assert s.S == pytest.approx(1000.0) and "system calls" in s.S_source


def test_engine_counter_stands_in_without_flush_tracing() -> None:
    pg = linear({"wal.wal_sync": 990.0})
    (s,) = dv.durability_rows(bundle(extra_series={"pg_stats--pg": pg}))
    assert s.S == pytest.approx(990.0) and "wal_sync" in s.S_source and s.D is None
    assert s.engine_flushes == pytest.approx(990.0)
    my = linear({"status.Innodb_data_fsyncs": 700.0})
    (m,) = dv.durability_rows(bundle(engine="mysql", label="my", settings=MARIADB_SETTINGS, version="10.11.6-MariaDB",
                                     extra_series={"my_status--my": my}))
    assert m.S == pytest.approx(700.0) and "Innodb_data_fsyncs" in m.engine_source


def test_redo_only_counter_wins_over_data_fsyncs() -> None:
    my = linear({"status.Innodb_os_log_fsyncs": 300.0, "status.Innodb_data_fsyncs": 700.0})
    (m,) = dv.durability_rows(bundle(engine="mysql", label="my", settings=MARIADB_SETTINGS, version="10.6.16-MariaDB",
                                     extra_series={"my_status--my": my}))
    assert m.S == pytest.approx(300.0) and m.engine_source == "Innodb_os_log_fsyncs"
    # A PostgreSQL target does not read a MySQL stats series, nor the other way round.
    (p,) = dv.durability_rows(bundle(extra_series={"my_status--pg": my}))
    assert p.S is None and p.engine_flushes is None and p.engine_source == ""


def test_innodb_o_dsync_without_a_filesystem_count_leaves_S_unknown() -> None:
    recs = flush_series(S=0.0, D=1000.0, fs=False)
    b = bundle(engine="mysql", label="my", settings={**MARIADB_SETTINGS, "innodb_flush_method": "O_DSYNC"},
               version="10.11.6-MariaDB", flush=recs)
    (s,) = dv.durability_rows(b)
    assert s.S is None and "O_SYNC/O_DSYNC" in s.S_source
    assert any(n.startswith("innodb_flush_method=o_dsync") for n in s.notes)
    # The same series with a flush method that calls fsync: S is the (zero) call count.
    (f,) = dv.durability_rows(bundle(engine="mysql", label="my", settings=MARIADB_SETTINGS,
                                     version="10.11.6-MariaDB", flush=recs))
    assert f.S == 0.0 and not any("O_DSYNC" in n for n in f.notes)


def test_target_without_engine_is_read_as_postgres() -> None:
    b = bundle(flush=flush_series(S=500.0, D=500.0))
    del b.run["targets"][0]["engine"]
    del b.results[0]["engine"]
    (s,) = dv.durability_rows(b)
    assert s.engine == "postgres" and s.settings.engine == "postgres" and s.settings.durable


def test_nothing_measured_cannot_tell() -> None:
    (s,) = dv.durability_rows(bundle(F=None))
    assert s.S is None and s.D is None and s.F is None
    assert s.plausibility is not None and s.plausibility.status == "cannot_tell"
    assert dv.overall([s])[0] == 2


def test_labels_with_odd_characters_find_their_series() -> None:
    b = bundle(label="pg 18/main", flush=flush_series(S=500.0, D=500.0))
    (s,) = dv.durability_rows(b)
    assert s.S == pytest.approx(500.0)


def test_read_only_steps_and_broken_rows_are_skipped() -> None:
    assert dv.durability_rows(bundle(workload="point-select", flush=flush_series(S=1.0, D=1.0))) == []
    b = bundle(flush=flush_series(S=1.0, D=1.0))
    b.results[0]["t_end"] = b.results[0]["t_start"]
    assert dv.durability_rows(b) == []


def test_overall_edge_cases() -> None:
    assert dv.overall([])[0] == 2
    unknown = bundle(settings={"fsync": "on"}, flush=flush_series(S=1000.0, D=1000.0))
    (s,) = dv.durability_rows(unknown)
    assert s.settings.status == "unknown"
    assert dv.overall([s])[0] == 2


def two_steps(F: float | None, user_F: float | None = None) -> Bundle:
    """1 and 4 clients of one target: 1,000 commits and flushes/s at 1 client, 3,000 commits / 1,600 flushes at 4."""
    b = bundle(F=F, user_F=user_F, tps=1000.0, clients=1)
    flush = linear({"syscalls.fdatasync": 1000.0, dv.FS_KEY: 1000.0, "device.vda.flushes": 1000.0}, n=12)
    flush += linear({"syscalls.fdatasync": 1600.0, dv.FS_KEY: 1600.0, "device.vda.flushes": 1600.0},
                    start=T0 + 12, n=12, base={k: flush[-1][k] for k in flush[-1] if k != "t"})
    b.series[safe_name("flush--pg")] = flush
    four = {**b.results[0], "clients": 4, "tps": 3000.0, "t_start": T0 + 14.0, "t_end": T0 + 22.0}
    b.results.append(four)
    return b


def test_a_slow_fsync_test_is_raised_to_what_the_server_flushed_at_one_client() -> None:
    one, four = dv.durability_rows(two_steps(F=325.0))
    assert one.F_test == pytest.approx(325.0) and one.F == pytest.approx(1000.0)
    assert four.F == pytest.approx(1000.0) and "at 1 client" in four.F_source and "325" in four.F_source
    assert four.plausibility is not None and four.plausibility.status == "plausible"
    assert dv.overall([one, four])[0] == 0


def test_a_faster_fsync_test_and_a_user_capability_are_kept() -> None:
    one, _ = dv.durability_rows(two_steps(F=9000.0))
    assert one.F == pytest.approx(9000.0) and one.F_test == pytest.approx(9000.0)
    one, four = dv.durability_rows(two_steps(F=9000.0, user_F=120.0))
    assert one.F == 120.0 and one.F_test is None
    assert four.plausibility is not None and four.plausibility.status == "implausible"
