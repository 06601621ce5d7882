"""reports.model.durability: each rule fires on planted numbers, stays quiet on clean ones, and at its boundary."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reports.model import durability as du
from reports.model.durability import plausibility_verdict, settings_verdict
from diag.core.engines import MYSQL, POSTGRES
from diag.core.errors import DiagError

PG_DEFAULTS = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on", "wal_sync_method": "fdatasync"}
MYSQL8_DEFAULTS = {"version": "8.0.36", "innodb_flush_log_at_trx_commit": "1", "log_bin": "ON",
                   "sync_binlog": "1", "innodb_doublewrite": "ON", "innodb_flush_method": "fsync"}
MARIADB_DEFAULTS = {"version": "10.11.6-MariaDB-0+deb12u1", "innodb_flush_log_at_trx_commit": "1",
                    "log_bin": "OFF", "sync_binlog": "0", "innodb_doublewrite": "ON",
                    "innodb_flush_method": "O_DIRECT"}


def relaxed_names(v: du.SettingsVerdict) -> list[str]:
    return [r.setting for r in v.relaxed]


# --------------------------------------------------------------------------- PostgreSQL settings


def test_pg_defaults_are_durable() -> None:
    v = settings_verdict("postgres", PG_DEFAULTS)
    assert v.durable and v.status == "durable"
    assert v.relaxed == [] and v.unknown == [] and v.notes == []
    assert v.commit_waits_for_flush is True
    assert v.engine == "postgres"


def test_pg_fsync_off_risks_corruption() -> None:
    v = settings_verdict("postgresql", {**PG_DEFAULTS, "fsync": "off"})
    assert not v.durable and v.status == "relaxed"
    assert relaxed_names(v) == ["fsync"]
    setting, value, risk = v.relaxed[0]
    assert (setting, value) == ("fsync", "off")
    assert "corrupt" in risk
    assert v.commit_waits_for_flush is False
    assert "fsync=off" in v.reason


def test_pg_synchronous_commit_off_loses_commits_but_not_consistency() -> None:
    v = settings_verdict("pg", {**PG_DEFAULTS, "synchronous_commit": "OFF"})
    assert relaxed_names(v) == ["synchronous_commit"]
    risk = v.relaxed[0].risk
    assert "lose the last commits" in risk and "no corruption" in risk and "wal_writer_delay" in risk
    assert v.commit_waits_for_flush is False


@pytest.mark.parametrize("value", ["local", "remote_write"])
def test_pg_synchronous_commit_local_is_durable_on_this_server(value: str) -> None:
    v = settings_verdict("postgres", {**PG_DEFAULTS, "synchronous_commit": value})
    assert v.durable and v.commit_waits_for_flush is True
    assert [n.setting for n in v.notes] == ["synchronous_commit"]
    assert "durable on this server" in v.notes[0].risk


@pytest.mark.parametrize("value", ["on", "remote_apply", "true", "1"])
def test_pg_synchronous_commit_waiting_values(value: str) -> None:
    v = settings_verdict("postgres", {**PG_DEFAULTS, "synchronous_commit": value})
    assert v.durable and v.notes == []


def test_pg_full_page_writes_off_risks_torn_pages_but_commits_still_wait() -> None:
    v = settings_verdict("postgres", {**PG_DEFAULTS, "full_page_writes": "off"})
    assert relaxed_names(v) == ["full_page_writes"]
    assert "torn page" in v.relaxed[0].risk
    assert v.commit_waits_for_flush is True


@pytest.mark.parametrize("method", list(POSTGRES.sync_methods))
def test_pg_every_documented_wal_sync_method_is_fine(method: str) -> None:
    v = settings_verdict("postgres", {**PG_DEFAULTS, "wal_sync_method": method})
    assert v.durable and v.notes == []


def test_pg_unknown_wal_sync_method_is_noted_only() -> None:
    v = settings_verdict("postgres", {**PG_DEFAULTS, "wal_sync_method": "bogus"})
    assert v.durable
    assert [n.setting for n in v.notes] == ["wal_sync_method"]


def test_pg_missing_setting_is_unknown_not_guessed() -> None:
    s = dict(PG_DEFAULTS)
    del s["synchronous_commit"]
    v = settings_verdict("postgres", s)
    assert v.status == "unknown" and not v.durable
    assert v.unknown == ["synchronous_commit"]
    assert v.commit_waits_for_flush is None
    assert "synchronous_commit" in v.reason


def test_pg_missing_torn_page_setting_leaves_commit_path_known() -> None:
    s = dict(PG_DEFAULTS)
    del s["full_page_writes"]
    v = settings_verdict("postgres", s)
    assert v.status == "unknown" and v.unknown == ["full_page_writes"]
    assert v.commit_waits_for_flush is True


def test_relaxed_wins_over_unknown_and_names_are_case_insensitive() -> None:
    v = settings_verdict("postgres", {"FSYNC": "Off"})
    assert v.status == "relaxed" and relaxed_names(v) == ["fsync"]
    assert set(v.unknown) == {"synchronous_commit", "full_page_writes", "wal_sync_method"}


def test_unknown_engine() -> None:
    with pytest.raises(DiagError, match="durability verdict: unknown engine"):
        settings_verdict("oracle", {})


@pytest.mark.parametrize("engine,settings,relaxed", [
    (POSTGRES, {**PG_DEFAULTS, "synchronous_commit": "off"}, ["synchronous_commit"]),
    (MYSQL, {**MARIADB_DEFAULTS, "innodb_doublewrite": "OFF"}, ["innodb_doublewrite"])])
def test_engine_object_judges_like_its_names(engine: object, settings: dict[str, str], relaxed: list[str]) -> None:
    by_object = settings_verdict(engine, settings)  # type: ignore[arg-type]
    assert relaxed_names(by_object) == relaxed and by_object.engine == engine.name  # type: ignore[attr-defined]
    for name in (engine.name, *engine.aliases):  # type: ignore[attr-defined]
        assert settings_verdict(name.upper(), settings) == by_object


def test_commit_path_settings_come_from_the_engine() -> None:
    # Missing a commit-path setting makes "commits wait" unknown; missing a torn-page one does not.
    for engine, defaults in ((POSTGRES, PG_DEFAULTS), (MYSQL, MYSQL8_DEFAULTS)):
        for name in defaults:
            if name == "version":
                continue
            v = settings_verdict(engine, {k: x for k, x in defaults.items() if k != name})
            assert v.status == "unknown" and v.unknown == [name]
            assert (v.commit_waits_for_flush is None) == (name in engine.commit_path_settings), name


# --------------------------------------------------------------------------- MySQL / MariaDB settings


@pytest.mark.parametrize("settings", [MYSQL8_DEFAULTS, MARIADB_DEFAULTS], ids=["mysql8", "mariadb"])
def test_mysql_defaults_are_durable(settings: dict[str, str]) -> None:
    v = settings_verdict("mysql", settings)
    assert v.durable and v.relaxed == [] and v.unknown == []
    assert v.commit_waits_for_flush is True


def test_innodb_flush_log_at_trx_commit_0_loses_a_second_on_mysqld_crash() -> None:
    v = settings_verdict("mysql", {**MYSQL8_DEFAULTS, "innodb_flush_log_at_trx_commit": "0"})
    assert relaxed_names(v) == ["innodb_flush_log_at_trx_commit"]
    risk = v.relaxed[0].risk
    assert "a mysqld crash" in risk and "once a second" in risk
    assert v.commit_waits_for_flush is False


def test_innodb_flush_log_at_trx_commit_2_loses_a_second_on_os_crash_only() -> None:
    v = settings_verdict("mariadb", {**MARIADB_DEFAULTS, "innodb_flush_log_at_trx_commit": "2"})
    assert relaxed_names(v) == ["innodb_flush_log_at_trx_commit"]
    risk = v.relaxed[0].risk
    assert "mysqld crash loses nothing" in risk and "OS crash or power loss" in risk
    assert v.commit_waits_for_flush is False


def test_flush_log_timeout_is_used_in_the_sentence() -> None:
    v = settings_verdict("mysql", {**MYSQL8_DEFAULTS, "innodb_flush_log_at_trx_commit": "2",
                                   "innodb_flush_log_at_timeout": "5"})
    assert "every 5 s" in v.relaxed[0].risk


def test_innodb_flush_log_at_trx_commit_3_durable_on_mariadb_only() -> None:
    assert settings_verdict("mysql", {**MARIADB_DEFAULTS, "innodb_flush_log_at_trx_commit": "3"}).durable
    v = settings_verdict("mysql", {**MYSQL8_DEFAULTS, "innodb_flush_log_at_trx_commit": "3"})
    assert [n.setting for n in v.notes] == ["innodb_flush_log_at_trx_commit"]
    assert v.commit_waits_for_flush is None


@pytest.mark.parametrize("value, words", [("0", "left to the OS"), ("100", "every 100 commit groups")])
def test_sync_binlog_not_1_with_binlog_on(value: str, words: str) -> None:
    v = settings_verdict("mysql", {**MYSQL8_DEFAULTS, "sync_binlog": value})
    assert relaxed_names(v) == ["sync_binlog"]
    assert words in v.relaxed[0].risk and "rolls back" in v.relaxed[0].risk
    # the redo log is still flushed at commit, so the flush-rate bounds still apply
    assert v.commit_waits_for_flush is True


def test_sync_binlog_irrelevant_with_binlog_off_and_unknown_without_log_bin() -> None:
    assert settings_verdict("mysql", {**MYSQL8_DEFAULTS, "log_bin": "OFF", "sync_binlog": "0"}).durable
    s = dict(MYSQL8_DEFAULTS)
    del s["log_bin"]
    v = settings_verdict("mysql", s)
    assert v.status == "unknown" and v.unknown == ["log_bin"]
    s = dict(MYSQL8_DEFAULTS)
    del s["sync_binlog"]
    assert settings_verdict("mysql", s).unknown == ["sync_binlog"]


@pytest.mark.parametrize("value", ["OFF", "0", "DETECT_ONLY"])
def test_doublewrite_off_risks_torn_pages(value: str) -> None:
    v = settings_verdict("mysql", {**MYSQL8_DEFAULTS, "innodb_doublewrite": value})
    assert relaxed_names(v) == ["innodb_doublewrite"]
    assert "torn" in v.relaxed[0].risk
    assert v.commit_waits_for_flush is True


def test_doublewrite_detect_and_recover_is_on() -> None:
    assert settings_verdict("mysql", {**MYSQL8_DEFAULTS, "innodb_doublewrite": "DETECT_AND_RECOVER"}).durable


def test_flush_method_nosync_is_relaxed_on_mysql() -> None:
    v = settings_verdict("mysql", {**MYSQL8_DEFAULTS, "innodb_flush_method": "nosync"})
    assert relaxed_names(v) == ["innodb_flush_method"]
    assert "testing" in v.relaxed[0].risk
    assert v.commit_waits_for_flush is None


def test_flush_method_nosync_is_ignored_by_mariadb_11() -> None:
    v = settings_verdict("mysql", {**MARIADB_DEFAULTS, "version": "11.4.2-MariaDB", "innodb_flush_method": "nosync"})
    assert v.durable and [n.setting for n in v.notes] == ["innodb_flush_method"]


def test_o_direct_no_fsync_is_a_caveat_not_a_relaxation() -> None:
    v = settings_verdict("mysql", {**MYSQL8_DEFAULTS, "innodb_flush_method": "O_DIRECT_NO_FSYNC"})
    assert v.durable
    assert "XFS" in v.notes[0].risk and "device" in v.notes[0].risk


def test_mysql_missing_everything_is_unknown() -> None:
    v = settings_verdict("mysql", {})
    assert v.status == "unknown" and v.commit_waits_for_flush is None
    assert set(v.unknown) == {"innodb_flush_log_at_trx_commit", "log_bin", "innodb_doublewrite",
                              "innodb_flush_method"}


@given(st.sampled_from(["postgres", "mysql"]),
       st.dictionaries(st.sampled_from(["fsync", "synchronous_commit", "full_page_writes", "wal_sync_method",
                                        "innodb_flush_log_at_trx_commit", "log_bin", "sync_binlog", "version",
                                        "innodb_doublewrite", "innodb_flush_method", "other"]),
                       st.text(max_size=12)))
def test_settings_verdict_never_crashes(engine: str, settings: dict[str, str]) -> None:
    v = settings_verdict(engine, settings)
    assert v.status in ("durable", "relaxed", "unknown")
    assert v.durable == (v.status == "durable")
    json.dumps(v.to_dict())


# --------------------------------------------------------------------------- plausibility


def check(v: du.PlausibilityVerdict, name: str) -> du.Check:
    return next(c for c in v.checks if c.name == name)


def test_flush_capacity_fires_on_planted_numbers() -> None:
    v = plausibility_verdict(C=1000, c=2, F=120, S=None, D=None, local_block_device=True, settings_durable=True)
    assert v.status == "implausible"
    assert check(v, "flush_capacity").status == "failed"
    assert v.numbers["F_c_margin"] == 360
    assert "1000 <= 120 x 2 x 1.5 = 360" in v.formula
    assert "cannot all have been flushed" in v.reason
    assert v.group_commit_factor is None


def test_flush_capacity_quiet_on_clean_numbers() -> None:
    v = plausibility_verdict(C=300, c=2, F=120, S=None, D=None, local_block_device=True, settings_durable=True)
    assert v.status == "plausible"
    assert v.not_checked == ["flush_calls_present", "flush_calls_cover_commits", "device_sees_flushes"]


def test_flush_capacity_boundary() -> None:
    at = plausibility_verdict(C=360, c=2, F=120, S=None, D=None, local_block_device=True, settings_durable=True)
    over = plausibility_verdict(C=360.01, c=2, F=120, S=None, D=None, local_block_device=True,
                                settings_durable=True)
    assert at.status == "plausible" and over.status == "implausible"


def test_flush_capacity_not_checked_when_settings_do_not_wait() -> None:
    for durable in (False, None):
        v = plausibility_verdict(C=1e5, c=2, F=120, S=None, D=None, local_block_device=True,
                                 settings_durable=durable)
        assert v.status == "cannot_tell"
        assert "flush_capacity" in v.not_checked
        assert v.formula == "nothing compared"


def test_nothing_measured_cannot_tell() -> None:
    v = plausibility_verdict(C=100, c=4, F=None, S=None, D=None, local_block_device=True, settings_durable=True)
    assert v.status == "cannot_tell"
    assert v.not_checked == ["flush_capacity", "flush_calls_present", "flush_calls_cover_commits",
                             "device_sees_flushes"]
    assert "F (flush capability) not measured" in v.reason


def test_no_flush_calls_fires() -> None:
    v = plausibility_verdict(C=500, c=400, F=None, S=0, D=None, local_block_device=True, settings_durable=True)
    assert v.status == "implausible"
    assert check(v, "flush_calls_present").status == "failed"
    assert "about no flush calls" in v.reason


def test_no_flush_calls_boundaries() -> None:
    def status(C: float, S: float) -> str:
        v = plausibility_verdict(C=C, c=400, F=None, S=S, D=None, local_block_device=True, settings_durable=True)
        return check(v, "flush_calls_present").status

    # high C: the 1/s floor decides
    assert status(500, 0.99) == "failed"
    assert status(500, 1.0) == "passed"
    # low C: 1% of C decides
    assert status(50, 0.49) == "failed"
    assert status(50, 0.5) == "passed"
    # no commits, no flushes: nothing wrong
    assert status(0, 0) == "passed"


def test_no_flush_calls_not_checked_when_settings_relaxed() -> None:
    v = plausibility_verdict(C=500, c=4, F=None, S=0, D=None, local_block_device=True, settings_durable=False)
    assert v.status == "cannot_tell" and "flush_calls_present" in v.not_checked


def test_flush_calls_cover_commits_and_boundary() -> None:
    over = plausibility_verdict(C=1000, c=4, F=None, S=100, D=None, local_block_device=True, settings_durable=True)
    assert over.status == "implausible"
    assert check(over, "flush_calls_cover_commits").status == "failed"
    at = plausibility_verdict(C=600, c=4, F=None, S=100, D=None, local_block_device=True, settings_durable=True)
    assert at.status == "plausible" and at.group_commit_factor == pytest.approx(6.0)


def test_device_sees_no_flushes_fires() -> None:
    v = plausibility_verdict(C=200, c=2, F=None, S=200, D=0, local_block_device=True, settings_durable=True)
    assert v.status == "implausible"
    assert check(v, "device_sees_flushes").status == "failed"
    assert "device completed about no flushes" in v.reason


def test_device_sees_no_flushes_fires_even_with_relaxed_settings() -> None:
    v = plausibility_verdict(C=5000, c=2, F=None, S=5, D=0, local_block_device=True, settings_durable=False)
    assert v.status == "implausible" and check(v, "device_sees_flushes").status == "failed"


def test_device_flushes_boundaries_and_clean() -> None:
    def status(S: float, D: float) -> str:
        v = plausibility_verdict(C=S, c=1, F=None, S=S, D=D, local_block_device=True, settings_durable=True)
        return check(v, "device_sees_flushes").status

    assert status(200, 150) == "passed"
    assert status(200, 1.0) == "passed"  # min(1% of 200, 1/s) = 1: not below it
    assert status(200, 0.99) == "failed"
    assert status(50, 0.49) == "failed"  # 1% of S decides
    assert status(50, 0.5) == "passed"
    assert status(0, 0) == "passed"  # no flush calls, nothing to reach the device


def test_device_check_skipped_off_block_device_write_through_or_unmeasured() -> None:
    args = dict(C=200, c=2, F=None, S=200, D=0.0, settings_durable=True)
    v = plausibility_verdict(local_block_device=False, **args)  # type: ignore[arg-type]
    assert "device_sees_flushes" in v.not_checked and v.status == "plausible"
    v = plausibility_verdict(local_block_device=True, write_cache="write through", **args)  # type: ignore[arg-type]
    assert "device_sees_flushes" in v.not_checked
    assert "no volatile write cache" in check(v, "device_sees_flushes").reason
    v = plausibility_verdict(C=200, c=2, F=None, S=200, D=None, local_block_device=True, settings_durable=True)
    assert check(v, "device_sees_flushes").reason == "D (device flushes) not measured"


def test_clean_numbers_everything_passes_with_group_commit_factor() -> None:
    v = plausibility_verdict(C=900, c=8, F=400, S=300, D=310, local_block_device=True, settings_durable=True,
                             write_cache="write back")
    assert v.status == "plausible" and v.not_checked == []
    assert all(c.status == "passed" for c in v.checks)
    assert v.group_commit_factor == pytest.approx(3.0)
    assert v.numbers["group_commit_factor"] == pytest.approx(3.0)
    assert "3 commits per flush call" in v.reason
    assert v.formula.count(";") == 3  # four comparisons shown
    json.dumps(v.to_dict())


def test_several_failures_are_all_named() -> None:
    v = plausibility_verdict(C=5000, c=2, F=120, S=0, D=0, local_block_device=True, settings_durable=True)
    assert v.status == "implausible"
    assert {c.name for c in v.checks if c.status == "failed"} == {
        "flush_capacity", "flush_calls_present", "flush_calls_cover_commits"}
    assert "Also failed: flush_calls_present, flush_calls_cover_commits" in v.reason


def test_bad_inputs() -> None:
    with pytest.raises(DiagError, match="client count"):
        plausibility_verdict(C=1, c=0, F=1, S=1, D=1, local_block_device=True, settings_durable=True)
    with pytest.raises(DiagError, match="commit rate"):
        plausibility_verdict(C=-1, c=1, F=1, S=1, D=1, local_block_device=True, settings_durable=True)


# --------------------------------------------------------------------------- seed 004 (2010 laptop benchmark)

# PostgreSQL 9.0, synchronous_commit = on, 7200 rpm laptop disk: at most ~120 flushes/s
# (R. Haas in the thread). "Avg Time for 20000 inserts with concurrency of 2 : 221.3 seconds"
# and "The average time is the time for 10000 inserts (inserts per instance)".
SEED_F = 120.0


def _seed_settings_waits() -> bool | None:
    return settings_verdict("postgres", {**PG_DEFAULTS, "synchronous_commit": "on"}).commit_waits_for_flush


def test_seed_004_published_postgres_numbers_are_within_the_disk() -> None:
    # 20,000 inserts by 2 clients in 221.3 s is 90 commits/s: under 120 even without
    # group commit. This is G. Smith's reading in the thread ("only 90 commits/second
    # ... completely possible that proper fsync is happening").
    C = 20_000 / 221.3
    v = plausibility_verdict(C=C, c=2, F=SEED_F, S=None, D=None, local_block_device=True,
                             settings_durable=_seed_settings_waits())
    assert v.status == "plausible"
    assert v.numbers["C"] == pytest.approx(90.4, abs=0.1)


def test_seed_004_harrison_reading_is_implausible() -> None:
    # Harrison's reading: ~1,000 writes/s, "with 2 threads it is still 500 per second" each.
    v = plausibility_verdict(C=1000, c=2, F=SEED_F, S=None, D=None, local_block_device=True,
                             settings_durable=_seed_settings_waits())
    assert v.status == "implausible" and "120 x 2 x 1.5 = 360" in v.formula


def test_seed_004_synchronous_commit_off_run() -> None:
    # "20000 inserts with concurrency of 2 (synchronous_commit = off) : 2.95 seconds" = 6,780/s.
    C = 20_000 / 2.95
    relaxed = settings_verdict("postgres", {**PG_DEFAULTS, "synchronous_commit": "off"})
    assert not relaxed.durable
    # Explained by the setting: the flush bound does not apply.
    v = plausibility_verdict(C=C, c=2, F=SEED_F, S=None, D=None, local_block_device=True,
                             settings_durable=relaxed.commit_waits_for_flush)
    assert v.status == "cannot_tell"
    # Had the settings claimed durability, 6,780/s from 2 clients on a 120 flush/s disk is impossible.
    v = plausibility_verdict(C=C, c=2, F=SEED_F, S=None, D=None, local_block_device=True, settings_durable=True)
    assert v.status == "implausible"
