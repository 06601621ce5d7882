"""The one SQL picker: every query resolves for every supported MySQL / MariaDB version, or says why not."""

from pathlib import Path

import pytest

from collectors.sql import MARKER, SqlUnavailable, sql_dir, statement_text
from collectors.sql import pick_sql as _pick_sql
from collectors.sql import sql_names as _sql_names
from diag.core.engines import ENGINES, MYSQL
from diag.core.errors import DiagError

SQL_DIR = sql_dir(MYSQL)


def pick_sql(name: str, product: str, version: int, sql_dir: Path | None = None) -> str:
    return _pick_sql(name, MYSQL, version, product, folder=sql_dir)


def sql_names() -> list[str]:
    return _sql_names(MYSQL)

SUPPORTED = [
    ("mysql", 50700), ("mysql", 50744), ("mysql", 80000), ("mysql", 80029), ("mysql", 80030), ("mysql", 80040),
    ("mysql", 80400), ("mysql", 80406),
    ("mariadb", 100500), ("mariadb", 100611), ("mariadb", 100801), ("mariadb", 101119), ("mariadb", 110402),
    ("mariadb", 110800),
]
# Queries a supported version legitimately lacks, and the words its error must carry.
KNOWN_GAPS = {("settings_changed", "mysql", 50700): "8.0.0", ("settings_changed", "mysql", 50744): "8.0.0",
              # MariaDB's metadata_lock_info plugin: MySQL has performance_schema.metadata_locks instead
              **{("mdl_info", p, v): "not available on mysql" for p, v in SUPPORTED if p == "mysql"},
              # MariaDB's digests leave out binary-protocol executions; MySQL's digest them (statements source)
              **{("prepared_statements", p, v): "not available on mysql" for p, v in SUPPORTED if p == "mysql"}}


def test_files_are_named_and_marked():
    files = sorted(SQL_DIR.glob("*.sql"))
    assert files, "no SQL files found"
    for p in files:
        text = p.read_text()
        assert text.startswith(MARKER), f"{p.name} must start with {MARKER} (the wait sampler skips our statements)"
        assert ";" not in text.strip().rstrip(";"), f"{p.name}: one statement per file"


@pytest.mark.parametrize("product,version", SUPPORTED)
def test_every_query_resolves_on_every_supported_version(product, version):
    for name in sql_names():
        gap = KNOWN_GAPS.get((name, product, version))
        if gap:
            with pytest.raises(SqlUnavailable, match=gap):
                pick_sql(name, product, version)
        else:
            assert pick_sql(name, product, version).startswith(MARKER)


def test_innodb_metrics_column_differs_by_flavor():
    # MySQL kept INNODB_METRICS.STATUS; MariaDB 10.4 replaced it with ENABLED.
    assert "STATUS = 'enabled'" in pick_sql("innodb_metrics", "mysql", 80036)
    assert "ENABLED = 1" in pick_sql("innodb_metrics", "mariadb", 101119)


def test_redo_capacity_from_mysql_8_0_30():
    assert "innodb_redo_log_capacity" not in pick_sql("durability", "mysql", 80029)
    assert "innodb_redo_log_capacity" in pick_sql("durability", "mysql", 80030)
    assert "innodb_redo_log_capacity" in pick_sql("durability", "mysql", 80400)
    assert "innodb_log_file_size" in pick_sql("durability", "mariadb", 101119)


def test_non_default_settings_source_per_flavor():
    assert "SYSTEM_VARIABLES" in pick_sql("settings_changed", "mariadb", 100500)
    assert "variables_info" in pick_sql("settings_changed", "mysql", 80400)


@pytest.mark.parametrize("name", ["durability", "innodb_metrics"])
def test_too_old_server_names_the_oldest_version(name):
    with pytest.raises(SqlUnavailable, match=r"needs mysql 5\.7\.0 or newer \(server is 5\.6\.51\)"):
        pick_sql(name, "mysql", 50651)


def test_unknown_name_and_product():
    with pytest.raises(DiagError, match="no SQL named"):
        pick_sql("nope", "mysql", 80000)
    with pytest.raises(DiagError, match="unknown MySQL/MariaDB product 'postgresql'"):
        pick_sql("global_status", "postgresql", 160000)


def test_rules_on_a_scratch_folder(tmp_path: Path):
    for fname, body in [("q.0.sql", "any"), ("q.mysql.80000.sql", "my80"), ("q.mysql.80030.sql", "my8030"),
                        ("q.mariadb.100800.sql", "maria108"), ("r.mariadb.110000.sql", "r11")]:
        (tmp_path / fname).write_text(f"{MARKER} {body}\n")
    pick = lambda p, v, n="q": pick_sql(n, p, v, sql_dir=tmp_path).removeprefix(f"{MARKER} ")  # noqa: E731
    assert pick("mysql", 50744) == "any"  # no mysql file old enough: the shared one
    assert pick("mysql", 80029) == "my80"
    assert pick("mysql", 80030) == "my8030"  # the newest file whose oldest version fits
    assert pick("mysql", 90000) == "my8030"
    assert pick("mariadb", 100611) == "any"
    assert pick("mariadb", 110402) == "maria108"
    assert pick("mariadb", 110402, "r") == "r11"
    with pytest.raises(SqlUnavailable, match="needs mariadb 11.0.0"):
        pick("mariadb", 101119, "r")
    with pytest.raises(SqlUnavailable, match="not available on mysql"):
        pick("mysql", 80400, "r")


def test_badly_named_file_is_an_error(tmp_path: Path):
    (tmp_path / "q.oracle.1.sql").write_text("x")
    with pytest.raises(DiagError, match="not named"):
        pick_sql("q", "mysql", 80000, sql_dir=tmp_path)


def test_version_text():
    assert MYSQL.version_text(80030) == "8.0.30"
    assert MYSQL.version_text(101119) == "10.11.19"
    assert MYSQL.version_text(0) == "0.0.0"


def test_a_product_named_any_is_no_longer_a_file_name(tmp_path: Path):
    (tmp_path / "q.any.0.sql").write_text("SELECT 1\n")
    with pytest.raises(DiagError, match="not named"):
        pick_sql("q", "mysql", 80000, sql_dir=tmp_path)


def test_a_marker_the_file_puts_first_stays_first():
    """MySQL's processlist shows a statement from its first character; the wait sampler skips what starts so."""
    assert statement_text(f"{MARKER} SHOW GLOBAL STATUS\n") == f"{MARKER} SHOW GLOBAL STATUS"
    assert statement_text("-- why\nSHOW GLOBAL STATUS") == f"SHOW {MARKER} GLOBAL STATUS"


def test_every_engine_has_an_sql_folder_with_queries():
    for engine in ENGINES:
        assert sql_dir(engine).is_dir() and _sql_names(engine), engine
