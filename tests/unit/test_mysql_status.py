"""MyStatusCollector's pure parts on saved real outputs: status values, fsync counter, INNODB STATUS handling."""

from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from collectors.base import CollectorContext
from collectors.mysql.common import redact_sql_secrets, to_number
from collectors.parts import Parts
from collectors.mysql.status import InnodbStatusArchive, MyStatusCollector, log_fsync_counter, status_record
from diag.core.errors import DbError
from diag.core.targets import parse_target

DATA = Path(__file__).resolve().parents[1] / "data"


def _saved_status() -> list[tuple[str, str]]:
    text = (DATA / "mysql" / "mariadb-10.11-global-status.tsv").read_text()
    return [tuple(line.split("\t", 1)) for line in text.splitlines()]  # type: ignore[misc]


def test_all_numeric_status_values_kept_raw():
    rows = _saved_status()
    rec = status_record(rows)
    assert len(rec) > 500
    assert isinstance(rec["status.Com_insert"], int)
    assert isinstance(rec["status.Innodb_data_fsyncs"], int)
    assert "status.Innodb_os_log_written" in rec
    # Text values (ON/OFF, dates, NULL) are left out rather than turned into numbers.
    for name in ("Innodb_have_punch_hole", "Innodb_buffer_pool_load_status", "Rpl_status", "Max_memory_used"):
        assert f"status.{name}" not in rec
    numeric = [n for n, v in rows if to_number(v) is not None]
    assert len(numeric) == len(rec)


def test_mariadb_10_11_has_no_separate_log_fsync_counter():
    rec = status_record(_saved_status())
    assert "status.Innodb_os_log_fsyncs" not in rec
    name, note = log_fsync_counter(rec)
    assert name == "status.Innodb_data_fsyncs"
    assert "redo log and data file" in note


def test_log_fsync_counter_prefers_the_redo_counter():
    assert log_fsync_counter({"status.Innodb_os_log_fsyncs": 1, "status.Innodb_data_fsyncs": 2})[0] == \
        "status.Innodb_os_log_fsyncs"
    assert log_fsync_counter({"metrics.os_log_fsyncs": 1, "status.Innodb_data_fsyncs": 2})[0] == \
        "metrics.os_log_fsyncs"
    assert log_fsync_counter({})[0] == ""


def test_to_number():
    assert to_number("123") == 123 and to_number("-4") == -4 and to_number("0.5") == 0.5
    assert to_number(" 7 ") == 7 and to_number(b"9") == 9 and to_number(3) == 3
    for text in ("ON", "", "NULL", None, "1.2.3", "261130  9:41:26", True):
        assert to_number(text) is None


@given(st.one_of(st.text(max_size=30), st.binary(max_size=30), st.none(), st.integers(), st.floats()))
def test_to_number_never_raises(v):
    to_number(v)


def _collector(tmp_path: Path) -> MyStatusCollector:
    return MyStatusCollector(CollectorContext(target=parse_target("m=mysql://u@h:3306/"), artifacts=tmp_path))


def test_innodb_text_parsed_section_errors_said_once_and_text_archived(tmp_path: Path):
    c = _collector(tmp_path)
    good = (DATA / "innodb_status" / "mariadb-10.11-load.txt").read_text()
    cut = good[: good.index("BUFFER POOL AND MEMORY") + 40]  # a text that ends inside a section
    recs = []
    for i, text in enumerate([good, cut, cut, good, cut]):
        rec: dict = {}
        c._innodb(rec, text, 1_700_000_000.0 + i)
        c.n += 1
        recs.append(rec)
    assert recs[0]["innodb.log.lsn"] > 0 and "innodb.transactions.history_list_length" in recs[0]
    assert "innodb_errors" not in recs[0]
    assert "buffer_pool" in recs[1]["innodb_errors"]
    assert all("innodb_errors" not in r for r in recs[2:])  # the same section is not said again
    # Archived: sample 0 (every 10th) and sample 1 (a new section error); not 2, 3, 4.
    assert [("innodb_status_offset" in r) for r in recs] == [True, True, False, False, False]
    art = tmp_path / "innodb_status--m.txt"
    assert recs[0]["innodb_status_file"] == "artifacts/innodb_status--m.txt"
    body = art.read_text()
    assert body.count("==== dbdiag ") == 2
    assert body[recs[1]["innodb_status_offset"]:].startswith("==== dbdiag 2023-11-14T22:13:21Z")


def test_archive_is_bounded(tmp_path: Path):
    a = InnodbStatusArchive(tmp_path, "x", max_bytes=300)
    assert a.append("a" * 100, 0.0) == 0
    assert a.append("b" * 100, 1.0) is not None
    assert a.append("c" * 100, 2.0) is None and a.full
    assert (tmp_path / "innodb_status--x.txt").stat().st_size <= 300


def test_archive_hides_quoted_passwords(tmp_path: Path):
    a = InnodbStatusArchive(tmp_path, "x")
    a.append("MySQL thread id 5, query id 9 localhost root\nALTER USER 'a'@'%' IDENTIFIED BY 's3cret!'\n", 0.0)
    assert "s3cret" not in (tmp_path / "innodb_status--x.txt").read_text()


def test_redact_sql_secrets():
    assert redact_sql_secrets("CREATE USER u IDENTIFIED BY 'pw'") == "CREATE USER u IDENTIFIED BY '***'"
    assert redact_sql_secrets('SET PASSWORD = PASSWORD("pw")') == "SET PASSWORD = PASSWORD('***')"
    assert "pw" not in redact_sql_secrets("CHANGE MASTER TO MASTER_PASSWORD='pw'")
    assert "*AB12" not in redact_sql_secrets("CREATE USER u IDENTIFIED WITH mysql_native_password AS '*AB12'")
    assert redact_sql_secrets("SELECT 1") == "SELECT 1"


def test_parts_switch_off_once_with_hint():
    p = Parts({"innodb_status": "GRANT PROCESS ON *.* TO {user}"}, user="'u'@'%'")

    def denied():
        raise DbError("Access denied; you need (at least one of) the PROCESS privilege(s)", "1227", "privilege")

    assert p.call("innodb_status", denied) is None
    assert not p.is_on("innodb_status")
    said = p.unsaid()
    assert said == {"innodb_status": "innodb_status: Access denied; you need (at least one of) the PROCESS "
                                      "privilege(s) (fix: GRANT PROCESS ON *.* TO 'u'@'%')"}
    assert p.unsaid() == {}
    assert p.call("innodb_status", lambda: 1) is None  # stays off
    assert p.hint() == "GRANT PROCESS ON *.* TO 'u'@'%'"


def test_parts_timeout_skips_once_and_lost_connection_raises():
    p = Parts()

    def slow():
        raise DbError("Query execution was interrupted (max_statement_time exceeded)", "1969", "timeout")

    assert p.call("x", slow) is None and p.is_on("x")

    def lost():
        raise DbError("Lost connection", "2013", "lost")

    with pytest.raises(DbError):
        p.call("x", lost)


def test_archive_keeps_no_literals_of_other_sessions(tmp_path: Path):
    """Saved real texts: the quoted statements become fingerprints, locked records lose their contents; with
    keep_literals the text is kept as the server gave it (passwords still hidden)."""
    load = (DATA / "innodb_status" / "mariadb-10.5-load.txt").read_text()
    manual = (DATA / "innodb_status" / "mysql-8.4-manual-example.txt").read_text()
    a = InnodbStatusArchive(tmp_path, "x")
    a.append(load, 0.0)
    a.append(manual, 1.0)
    body = (tmp_path / "innodb_status--x.txt").read_text()
    for literal in ("discount applied", "id = 275", "'random%'", "dddbs=", "hex 000000001e41", "asc      A;;",
                    "DELETE FROM t WHERE i = 1"):
        assert literal in load + manual, literal  # the plant is in the saved texts ...
        assert literal not in body, literal  # ... and not in the archive
    assert "SELECT * FROM dbm_user where username LIKE ?" in body
    assert "DELETE FROM t WHERE i = ?" in body and " 1: len 6; hex ?; asc ?;;" in body
    # the counters' lines are untouched
    assert all(line in body for line in load.splitlines() if line.startswith(("History list length", "Log sequence")))
    kept = InnodbStatusArchive(tmp_path, "y", keep_literals=True)
    kept.append(manual + "\nMySQL thread id 5, query id 9 localhost root\nSET PASSWORD = PASSWORD('pw9x')\n", 2.0)
    text = (tmp_path / "innodb_status--y.txt").read_text()
    assert "DELETE FROM t WHERE i = 1" in text and "pw9x" not in text
