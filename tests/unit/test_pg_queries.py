"""pick_sql (collectors.sql), the one function choosing version-specific SQL, on PostgreSQL's files (13 to 18)."""

from __future__ import annotations

import re

import pytest

from collectors.sql import MARKER, SqlUnavailable, sql_dir, sql_names, statement_text
from collectors.sql import pick_sql as _pick_sql
from diag.core.engines import POSTGRES
from diag.core.errors import DiagError

SQL_DIR = sql_dir(POSTGRES)


def pick_sql(name: str, version: int) -> str:
    return _pick_sql(name, POSTGRES, version, "postgresql")

# (version_num, file suffix expected) per query name; boundaries on both sides of each change.
EXPECTED = {
    "database": [(130000, 130000), (130022, 130000), (139999, 130000), (140000, 140000), (150020, 140000),
                 (170006, 140000), (179999, 140000), (180000, 180000), (180006, 180000), (190000, 180000)],
    "stat_wal": [(130000, 130000), (139999, 130000), (140000, 140000), (160000, 140000), (179999, 140000),
                 (180000, 180000)],
    "bgwriter": [(130000, 130000), (169999, 130000), (170000, 170000), (180006, 170000)],
    "checkpointer": [(130000, 130000), (160010, 130000), (170000, 170000), (179999, 170000), (180000, 180000)],
    "stat_io": [(160000, 160000), (170000, 160000), (180000, 160000)],
    "locks": [(130000, 130000), (180000, 130000)],
    "activity": [(130000, 130000), (180000, 130000)],
    "settings": [(130000, 130000), (180000, 130000)],
    "statements": [(130000, 130000), (180000, 130000)],
}


def _file_text(name: str, oldest: int) -> str:
    return statement_text((SQL_DIR / f"{name}.{oldest}.sql").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("name", "version", "oldest"),
                         [(n, v, o) for n, cases in EXPECTED.items() for v, o in cases])
def test_pick_sql_takes_the_newest_file_not_newer_than_the_server(name: str, version: int, oldest: int) -> None:
    assert pick_sql(name, version) == _file_text(name, oldest)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_server_older_than_13_gets_a_clear_error(name: str) -> None:
    with pytest.raises(SqlUnavailable, match=r"needs PostgreSQL 1[36] or newer \(server is 12\.17\)"):
        pick_sql(name, 120017)


@pytest.mark.parametrize("version", [130000, 140000, 150020, 159999])
def test_pg_stat_io_needs_16(version: int) -> None:
    with pytest.raises(SqlUnavailable, match="stat_io: needs PostgreSQL 16 or newer"):
        pick_sql("stat_io", version)


def test_unknown_name_is_an_error() -> None:
    with pytest.raises(DiagError, match="no SQL named 'nope'"):
        pick_sql("nope", 180000)


def test_every_file_is_named_by_version_and_says_what_it_reads() -> None:
    files = sorted(SQL_DIR.glob("*.sql"))
    assert files
    for p in files:
        assert re.fullmatch(r"[a-z0-9_]+\.1[3-9]0000\.sql", p.name), p.name
        assert p.read_text(encoding="utf-8").startswith("-- "), p.name
    assert set(EXPECTED) <= set(sql_names(POSTGRES))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_marker_sits_inside_the_statement(name: str) -> None:
    """pg_stat_statements drops comments before a statement, keeps those inside it."""
    text = pick_sql(name, 180000)
    assert not text.startswith("--") and "\n--" not in text.split(MARKER)[0]
    first, rest = text.split(" ", 1)
    assert first.isalpha() and rest.startswith(MARKER)


def test_statement_text() -> None:
    assert statement_text("-- what\n-- why\n\nSELECT 1") == f"SELECT {MARKER} 1"
    with pytest.raises(DiagError):
        statement_text("-- only a comment\n")


def _keys(text: str) -> set[str]:
    return set(re.findall(r'AS "([a-z_]+\.[a-z_]+)"', text))


@pytest.mark.parametrize(("name", "versions", "dropped"), [
    ("stat_wal", [140000, 170000, 180000], set()),
    ("checkpointer", [130000, 170000, 180000], set()),
    ("bgwriter", [130000, 170000], {"bgwriter.buffers_backend", "bgwriter.buffers_backend_fsync"}),
])
def test_record_keys_stay_the_same_across_versions(name: str, versions: list[int], dropped: set[str]) -> None:
    """A newer file keeps every key of the older one (a report reads one name on every version)."""
    keys = [_keys(pick_sql(name, v)) for v in versions]
    for older, newer in zip(keys, keys[1:]):
        assert older - dropped <= newer


def test_version_specific_sources() -> None:
    assert "pg_stat_bgwriter" in pick_sql("checkpointer", 160000)
    assert "pg_stat_checkpointer" in pick_sql("checkpointer", 170000)
    assert "FROM pg_stat_wal" not in pick_sql("stat_wal", 130000)
    wal18 = pick_sql("stat_wal", 180000)
    assert "object = 'wal'" in wal18
    assert "wal_sync AS" in pick_sql("stat_wal", 170000) and "wal_sync AS" not in wal18  # column gone in 18
    assert "session_time" in pick_sql("database", 140000) and "session_time" not in pick_sql("database", 130000)


def test_version_text() -> None:
    assert POSTGRES.version_text(150020) == "15.20"
    assert POSTGRES.version_text(180000) == "18.0"
    assert POSTGRES.release_text(160000) == "16" and POSTGRES.release_text(160004) == "16.4"


def test_a_file_per_product_is_refused_when_the_engine_has_no_such_product(tmp_path) -> None:
    (tmp_path / "q.mariadb.130000.sql").write_text("SELECT 1\n")
    with pytest.raises(DiagError, match="not named"):
        _pick_sql("q", POSTGRES, 180000, folder=tmp_path)
