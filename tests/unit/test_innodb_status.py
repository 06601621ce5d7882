"""Tests for collectors.mysql.innodb_status on saved real outputs (see tests/data/innodb_status/SOURCES.md)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.mysql.innodb_status import (
    FIELD_NAMES,
    FIELD_SPECS,
    SECTIONS,
    InnodbStatus,
    parse_innodb_status,
)

DATA = Path(__file__).resolve().parent.parent / "data" / "innodb_status"
SAMPLES = sorted(path.stem for path in DATA.glob("*.txt"))


def load(name: str) -> str:
    return (DATA / f"{name}.txt").read_text(encoding="utf-8")


def parse(name: str) -> InnodbStatus:
    return parse_innodb_status(load(name))


def assert_well_formed(result: InnodbStatus) -> None:
    """The invariants every result keeps, whatever the input."""
    assert isinstance(result, InnodbStatus)
    assert set(result.fields) <= FIELD_NAMES
    assert all(isinstance(v, float) and math.isfinite(v) for v in result.fields.values())
    assert set(result.errors) <= set(SECTIONS)
    for message in result.errors.values():
        assert isinstance(message, str) and message and "\n" not in message and "\r" not in message
        assert "internal error" not in message  # that would be a parser bug, caught at the section boundary


# --- the saved outputs -------------------------------------------------------------------------


def test_all_expected_samples_are_present() -> None:
    assert SAMPLES == [
        "mariadb-10.11-idle", "mariadb-10.11-load", "mariadb-10.5-load", "mariadb-10.6-load",
        "mariadb-11.1-load", "mysql-5.7-manual-example", "mysql-8.0-light-load", "mysql-8.4-manual-example",
    ]
    assert (DATA / "SOURCES.md").is_file()


@pytest.mark.parametrize("name", SAMPLES)
def test_saved_output_parses_without_errors(name: str) -> None:
    result = parse(name)
    assert result.errors == {}
    assert_well_formed(result)


# Fields every supported version prints (MySQL 5.7, 8.0, 8.4, MariaDB 10.5 to 11.x).
COMMON = {
    "header.per_second_averages_seconds",
    "transactions.trx_id_counter", "transactions.history_list_length",
    "file_io.pending_fsyncs_buffer_pool", "file_io.os_file_reads", "file_io.os_file_writes", "file_io.os_fsyncs",
    "file_io.reads_per_sec", "file_io.writes_per_sec", "file_io.fsyncs_per_sec", "file_io.avg_bytes_per_read",
    "log.lsn", "log.flushed_up_to", "log.pages_flushed_up_to", "log.last_checkpoint", "log.checkpoint_age",
    "buffer_pool.total_memory_allocated_bytes", "buffer_pool.dictionary_memory_allocated_bytes",
    "buffer_pool.total_pages", "buffer_pool.free_buffers", "buffer_pool.database_pages",
    "buffer_pool.old_database_pages", "buffer_pool.modified_db_pages", "buffer_pool.pending_reads",
    "buffer_pool.pending_writes_lru", "buffer_pool.pending_writes_flush_list",
    "buffer_pool.pages_made_young", "buffer_pool.pages_made_not_young", "buffer_pool.youngs_per_sec",
    "buffer_pool.non_youngs_per_sec", "buffer_pool.pages_read", "buffer_pool.pages_created",
    "buffer_pool.pages_written", "buffer_pool.pages_read_per_sec", "buffer_pool.pages_created_per_sec",
    "buffer_pool.pages_written_per_sec", "buffer_pool.read_ahead_per_sec",
    "buffer_pool.evicted_without_access_per_sec",
    "row_operations.read_views_open",
}


@pytest.mark.parametrize("name", SAMPLES)
def test_common_fields_have_the_same_names_everywhere(name: str) -> None:
    assert COMMON <= set(parse(name).fields)


def names_under(result: InnodbStatus, prefix: str) -> set[str]:
    return {name for name in result.fields if name.startswith(prefix)}


def test_rw_lock_semaphore_fields_match_across_mysql_and_mariadb() -> None:
    rw = {name for name in names_under(parse("mysql-8.0-light-load"), "semaphores.")}
    assert len(rw) == 14  # 2 wait array counts + 3 lock modes x (spins, rounds, os_waits, rounds per wait)
    for name in ("mysql-5.7-manual-example", "mysql-8.4-manual-example", "mariadb-10.5-load"):
        fields = {n for n in names_under(parse(name), "semaphores.") if "mutex" not in n}
        assert fields == rw, name


def test_row_counter_fields_match_across_mysql_and_mariadb() -> None:
    user_rows = {f"row_operations.rows_{w}" for w in ("inserted", "updated", "deleted", "read")}
    user_rows |= {f"row_operations.{w}_per_sec" for w in ("inserts", "updates", "deletes", "reads")}
    for name in ("mysql-5.7-manual-example", "mysql-8.0-light-load", "mysql-8.4-manual-example",
                 "mariadb-10.5-load", "mariadb-10.6-load"):
        assert user_rows <= set(parse(name).fields), name
    system_rows = {f"row_operations.system_{n}" for n in ("rows_read", "reads_per_sec", "rows_inserted")}
    assert system_rows <= set(parse("mysql-8.0-light-load").fields)
    assert system_rows <= set(parse("mariadb-10.5-load").fields)


def test_mysql_5_7_values() -> None:
    f = parse("mysql-5.7-manual-example").fields
    assert f["header.per_second_averages_seconds"] == 20
    assert f["semaphores.os_wait_array_reservation_count"] == 119
    assert f["semaphores.os_wait_array_signal_count"] == 103
    assert f["semaphores.mutex_spin_waits"] == 0
    assert f["semaphores.rw_shared_spins"] == 38
    assert f["semaphores.rw_excl_rounds"] == 9383715
    assert f["semaphores.rw_excl_os_waits"] == 3
    assert f["semaphores.spin_rounds_per_wait_rw_excl"] == 4691857.50
    assert f["semaphores.spin_rounds_per_wait_rw_sx"] == 0.0  # on the manual's wrapped continuation line
    assert f["transactions.trx_id_counter"] == 1950
    assert f["transactions.history_list_length"] == 23
    assert f["file_io.pending_fsyncs_log"] == 0
    assert f["file_io.os_file_writes"] == 5770
    assert f["file_io.writes_per_sec"] == 264.84
    assert f["file_io.fsyncs_per_sec"] == 23.05
    assert f["log.lsn"] == 165913808
    assert f["log.flushed_up_to"] == 164814979
    assert f["log.pages_flushed_up_to"] == 141544038
    assert f["log.last_checkpoint"] == 130503656
    assert f["log.checkpoint_age"] == 165913808 - 130503656
    assert f["log.pending_log_flushes"] == 0
    assert f["log.log_ios_done"] == 258
    assert f["log.log_ios_per_sec"] == 6.65
    # Totals, not the "INDIVIDUAL BUFFER POOL INFO" copies (65536 each).
    assert f["buffer_pool.total_pages"] == 131072
    assert f["buffer_pool.free_buffers"] == 124908
    assert f["buffer_pool.database_pages"] == 5720
    assert f["buffer_pool.modified_db_pages"] == 910
    assert f["buffer_pool.pages_written_per_sec"] == 244.94
    assert f["buffer_pool.hit_rate"] == 1.0
    assert f["buffer_pool.pending_writes_single_page"] == 0
    assert f["row_operations.queries_inside_innodb"] == 0
    assert f["row_operations.rows_inserted"] == 1526363
    assert f["row_operations.inserts_per_sec"] == 52671.72
    assert f["row_operations.rows_read"] == 11


def test_mysql_8_0_values() -> None:
    f = parse("mysql-8.0-light-load").fields
    assert f["header.per_second_averages_seconds"] == 23
    assert f["semaphores.os_wait_array_reservation_count"] == 731
    assert f["log.lsn"] == 32236865
    assert f["log.written_up_to"] == 32236865
    assert f["log.checkpoint_age"] == 0
    assert f["log.min_file_id"] == 9
    assert f["log.max_file_id"] == 9
    assert f["log.log_ios_done"] == 32
    assert f["file_io.os_fsyncs"] == 5119
    assert f["buffer_pool.total_memory_allocated_bytes"] == 0  # MySQL 8.0 no longer counts it
    assert f["buffer_pool.dictionary_memory_allocated_bytes"] == 540478
    assert f["buffer_pool.total_pages"] == 8191
    assert f["buffer_pool.pages_made_young"] == 42317
    assert f["buffer_pool.pages_made_not_young"] == 2474
    assert f["buffer_pool.pending_reads"] == 0
    assert f["row_operations.rows_read"] == 279721
    assert f["row_operations.reads_per_sec"] == 2.43
    assert f["row_operations.system_rows_updated"] == 331
    assert f["row_operations.system_rows_read"] == 3763162
    assert f["row_operations.system_reads_per_sec"] == 32.61
    # 8.0 dropped these lines: absent, not zero.
    assert "log.pending_log_flushes" not in f
    assert "semaphores.mutex_spin_waits" not in f


def test_mysql_8_4_manual_values() -> None:
    f = parse("mysql-8.4-manual-example").fields
    assert f["transactions.trx_id_counter"] == 7748
    assert f["transactions.history_list_length"] == 19
    assert f["buffer_pool.total_pages"] == 131072
    assert f["buffer_pool.hit_rate"] == 1.0  # the total line; pool 1 had "No buffer pool page gets"
    assert f["row_operations.rows_updated"] == 354
    assert f["log.buffer_assigned_up_to"] == 19643450


def test_mariadb_10_5_values() -> None:
    f = parse("mariadb-10.5-load").fields
    assert f["semaphores.os_wait_array_reservation_count"] == 32648
    assert f["semaphores.rw_sx_rounds"] == 130
    assert f["semaphores.spin_rounds_per_wait_rw_sx"] == 6.19
    assert f["transactions.trx_id_counter"] == 63624
    assert f["file_io.pending_fsyncs_log"] == 1
    assert f["log.pending_log_flushes"] == 1
    assert f["log.lsn"] == 62359978
    assert f["log.checkpoint_age"] == 62359978 - 45103
    assert f["buffer_pool.dirty_pages_percent"] == 40.184
    assert f["buffer_pool.modified_db_pages"] == 3236
    assert f["row_operations.read_views_open"] == 3
    assert f["row_operations.rows_read"] == 4256957713
    assert f["row_operations.reads_per_sec"] == 7364483.92
    assert f["row_operations.system_rows_inserted"] == 0
    assert "row_operations.queries_inside_innodb" not in f


def test_mariadb_10_6_empty_semaphores_is_not_an_error() -> None:
    result = parse("mariadb-10.6-load")
    assert "semaphores" not in result.errors
    assert names_under(result, "semaphores.") == set()
    f = result.fields
    assert f["transactions.history_list_length"] == 24
    assert f["log.checkpoint_age"] == 77575733 - 70775960
    assert f["log.log_ios_per_sec"] == 60.88
    assert f["row_operations.rows_deleted"] == 45535


def test_mariadb_10_11_idle_values() -> None:
    f = parse("mariadb-10.11-idle").fields
    assert f["header.per_second_averages_seconds"] == 25
    assert f["transactions.trx_id_counter"] == 15
    assert f["file_io.pending_fsyncs_buffer_pool"] == 0
    assert f["log.lsn"] == 44760
    assert f["log.checkpoint_age"] == 44760 - 44404
    assert f["buffer_pool.total_pages"] == 8112
    assert f["buffer_pool.modified_db_pages"] == 12
    # "No buffer pool page gets since the last printout": no hit rate at all.
    assert "buffer_pool.hit_rate" not in f
    # 10.8+ dropped these lines: absent, not zero.
    for name in ("file_io.pending_fsyncs_log", "log.log_ios_done", "log.pending_log_flushes",
                 "row_operations.rows_inserted", "semaphores.rw_shared_spins"):
        assert name not in f


def test_mariadb_10_11_load_values() -> None:
    f = parse("mariadb-10.11-load").fields
    assert f["header.per_second_averages_seconds"] == 8
    assert f["transactions.trx_id_counter"] == 41277
    assert f["transactions.history_list_length"] == 19774
    assert f["file_io.os_fsyncs"] == 12244
    assert f["file_io.fsyncs_per_sec"] == 706.29
    assert f["log.lsn"] == 14799605
    assert f["buffer_pool.modified_db_pages"] == 1272
    assert f["buffer_pool.dirty_pages_percent"] == 15.679
    assert f["buffer_pool.pages_created_per_sec"] == 60.12
    assert f["buffer_pool.hit_rate"] == 1.0


def test_mariadb_11_1_values() -> None:
    f = parse("mariadb-11.1-load").fields
    assert f["row_operations.read_views_open"] == 4
    assert f["log.lsn"] == 85062982
    assert f["buffer_pool.youngs_per_sec"] == 635.54


# --- framing and damage ------------------------------------------------------------------------


def test_client_frame_and_crlf_give_the_same_result() -> None:
    text = load("mysql-8.0-light-load")
    plain = parse_innodb_status(text)
    row = "*" * 27
    framed = f"{row} 1. row {row}\n  Type: InnoDB\n  Name: \nStatus: " + text
    assert parse_innodb_status(framed) == plain
    assert parse_innodb_status(text.replace("\n", "\r\n")) == plain


def test_truncated_output_keeps_sections_before_the_cut() -> None:
    text = load("mysql-5.7-manual-example")
    cut = text.index("Log flushed up to   164814979") + len("Log flushed up to   1648")
    result = parse_innodb_status(text[:cut])
    assert_well_formed(result)
    assert set(result.errors) == {"log", "buffer_pool", "row_operations"}
    assert "LOG" in result.errors["log"] and "cut off" in result.errors["log"]
    assert "ends early, inside LOG" in result.errors["buffer_pool"]
    assert result.fields["transactions.history_list_length"] == 23
    assert result.fields["file_io.os_fsyncs"] == 803
    assert result.fields["log.lsn"] == 165913808  # a complete line before the cut
    assert "log.flushed_up_to" not in result.fields  # the half line is not trusted
    assert "buffer_pool.total_pages" not in result.fields


def test_output_cut_at_a_line_end_keeps_that_line() -> None:
    text = load("mariadb-10.5-load")
    cut = text.index("Pages flushed up to 45115\n") + len("Pages flushed up to 45115\n")
    result = parse_innodb_status(text[:cut])
    assert result.fields["log.pages_flushed_up_to"] == 45115
    assert "cut off" in result.errors["log"]


def test_server_side_truncation_of_the_transaction_list_is_harmless() -> None:
    # Over 1 MB the server replaces the middle of the list with "...truncated...".
    text = load("mariadb-10.5-load")
    start = text.index("---TRANSACTION 418299592964528")
    end = text.index("---TRANSACTION 418299592607024")
    result = parse_innodb_status(text[:start] + "\n...truncated...\n" + text[end:])
    assert result.errors == {}
    assert result.fields == parse("mariadb-10.5-load").fields


def test_forged_heading_in_quoted_sql_is_not_trusted() -> None:
    text = load("mariadb-10.5-load")
    anchor = "SELECT * FROM order_item where sku LIKE 'random%'"
    forged = text.replace(anchor, anchor + "\n---\nLOG\n---\nLog sequence number 1\n", 1)
    result = parse_innodb_status(forged)
    assert "appears 2 times" in result.errors["log"]
    assert "log.lsn" not in result.fields
    assert set(result.errors) == {"log"}
    assert result.fields["buffer_pool.total_pages"] == 8065


def test_garbled_line_costs_only_its_own_section() -> None:
    good, bad = "Log sequence number 165913808", "Log sequence number 0 165913808"
    text = load("mysql-5.7-manual-example").replace(good, bad)
    result = parse_innodb_status(text)
    assert set(result.errors) == {"log"}
    assert "log.lsn" in result.errors["log"] and bad in result.errors["log"]
    assert "log.lsn" not in result.fields and "log.checkpoint_age" not in result.fields
    assert result.fields["log.last_checkpoint"] == 130503656
    assert result.fields["buffer_pool.total_pages"] == 131072


def test_wait_array_counts_are_summed_over_arrays() -> None:
    # innodb_sync_array_size > 1 prints one reservation/signal line per array.
    text = load("mysql-8.0-light-load").replace(
        "OS WAIT ARRAY INFO: reservation count 731\n",
        "OS WAIT ARRAY INFO: reservation count 731\nOS WAIT ARRAY INFO: reservation count 9\n")
    assert parse_innodb_status(text).fields["semaphores.os_wait_array_reservation_count"] == 740


def test_missing_section_is_named() -> None:
    text = load("mariadb-10.6-load")
    start = text.index("--------\nFILE I/O")
    end = text.index("-------------------------------------\nINSERT BUFFER")
    result = parse_innodb_status(text[:start] + text[end:])
    assert result.errors == {"file_io": "section FILE I/O not found in the output"}


@pytest.mark.parametrize("text", ["", "hello", "\n\n", "=" * 40, "END OF INNODB MONITOR OUTPUT"])
def test_text_that_is_not_monitor_output(text: str) -> None:
    result = parse_innodb_status(text)
    assert_well_formed(result)
    assert result.fields == {}
    assert set(result.errors) == set(SECTIONS)


@pytest.mark.parametrize("value", [None, b"LOG", 42, ["x"]])
def test_non_str_raises_type_error(value: object) -> None:
    with pytest.raises(TypeError):
        parse_innodb_status(value)  # type: ignore[arg-type]


def test_field_specs_are_declared_once_with_known_units() -> None:
    names = [spec.name for spec in FIELD_SPECS]
    assert len(names) == len(set(names)) == len(FIELD_NAMES)
    units = {"count", "pages", "bytes", "lsn", "seconds", "per_second", "fraction", "percent",
             "rounds_per_wait", "id"}
    for spec in FIELD_SPECS:
        assert re.fullmatch(r"[a-z_]+\.[a-z0-9_]+", spec.name), spec.name
        assert spec.name.split(".")[0] in SECTIONS
        assert spec.unit in units and spec.kind in {"counter", "gauge"} and spec.description


def test_every_declared_field_is_produced_by_some_sample() -> None:
    produced = set().union(*(parse(name).fields for name in SAMPLES))
    assert produced == FIELD_NAMES


# --- fuzzing -----------------------------------------------------------------------------------

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.text())
def test_random_text_never_raises(text: str) -> None:
    assert_well_formed(parse_innodb_status(text))


@FUZZ
@given(st.lists(st.sampled_from([
    "---", "LOG", "SEMAPHORES", "FILE I/O", "ROW OPERATIONS", "BUFFER POOL AND MEMORY", "TRANSACTIONS",
    "END OF INNODB MONITOR OUTPUT", "=====", "Log sequence number 12", "Buffer pool hit rate 5 / 0",
    "Buffer pool hit rate 9 / 3", "Spin rounds per wait: 1.0 RW-sx,", "RW-shared spins 1, OS waits 2",
    "OS WAIT ARRAY INFO: reservation count", "Number of rows inserted 1, updated 2, deleted 3, read 4",
    "1.00 inserts/s, 0.00 updates/s, 0.00 deletes/s, 0.00 reads/s", "Log sequence number " + "9" * 5000,
    "Trx id counter 3A", "Per second averages calculated from the last 7 seconds", "",
]), max_size=40))
def test_shuffled_real_lines_never_raise(lines: list[str]) -> None:
    assert_well_formed(parse_innodb_status("\n".join(lines)))


@st.composite
def mutated_sample(draw: st.DrawFn) -> str:
    """A real output with a few random cuts, insertions, duplications and digit swaps."""
    text = load(draw(st.sampled_from(SAMPLES)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        end = draw(st.integers(at, min(len(text), at + 300)))
        op = draw(st.sampled_from(["delete", "insert", "duplicate", "digits", "truncate"]))
        if op == "delete":
            text = text[:at] + text[end:]
        elif op == "insert":
            text = text[:at] + draw(st.text(max_size=40)) + text[at:]
        elif op == "duplicate":
            text = text[:end] + text[at:end] + text[end:]
        elif op == "digits":
            digits = draw(st.text(alphabet="0123456789.-", min_size=1, max_size=30))
            text = text[:at] + digits + text[end:]
        else:
            text = text[:at]
    return text


@FUZZ
@given(mutated_sample())
def test_mutated_real_output_never_raises(text: str) -> None:
    assert_well_formed(parse_innodb_status(text))
