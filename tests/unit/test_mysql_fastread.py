"""The MySQL samplers' cheaper reads: text-protocol rows cut out of packets, the status variables read every
second, and the watch's session count from SHOW PROCESSLIST rows."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, strategies as st

from collectors.mysql.status import SECOND_STATUS, SECOND_STATUS_SQL
from diag.core.engines import MYSQL
from diag.core.engines.mytext import row_values
from workloads.engines.mysql import my_sessions

ROOT = Path(__file__).resolve().parents[2]


def _lenenc_str(value: str | None) -> bytes:
    """A value as the server sends it in a text-protocol row (the protocol's length-encoded string)."""
    if value is None:
        return b"\xfb"
    data = value.encode("utf-8")
    n = len(data)
    if n < 251:
        head = bytes([n])
    elif n < 2**16:
        head = b"\xfc" + n.to_bytes(2, "little")
    elif n < 2**24:
        head = b"\xfd" + n.to_bytes(3, "little")
    else:
        head = b"\xfe" + n.to_bytes(8, "little")
    return head + data


def test_row_values_of_a_processlist_row() -> None:
    row = ("12", "root", "localhost:5000", None, "Query", "0", "Sending data", "SELECT 1", "0.000")
    packet = b"".join(_lenenc_str(v) for v in row)
    assert row_values(packet, len(row), "utf8") == row


def test_row_values_lengths_past_one_byte() -> None:
    for n in (250, 251, 300, 70_000):
        text = "x" * n
        assert row_values(_lenenc_str(text) + _lenenc_str(None), 2, "utf8") == (text, None)


@given(st.lists(st.one_of(st.none(), st.text(max_size=400)), min_size=1, max_size=12))
def test_row_values_round_trip(values: list[str | None]) -> None:
    packet = b"".join(_lenenc_str(v) for v in values)
    assert row_values(packet, len(values), "utf8") == tuple(values)


def test_every_status_variable_the_rules_read_is_read_every_second() -> None:
    """The report's rules, its comparison and the engine's counters name status variables as "status.<Name>";
    each one must be in the per-second read (a name read only every tenth record would cover too little of a
    short step)."""
    named: set[str] = set()
    for folder in ("reports", "diag", "workloads"):
        for f in (ROOT / folder).rglob("*.py"):
            named.update(re.findall(r"status\.([A-Z][A-Za-z_]+)", f.read_text()))
    assert "Handler_read_rnd_next" in named and "Innodb_checkpoint_age" in named  # the scan sees the rules
    assert sorted(named - set(SECOND_STATUS)) == []
    assert all(f"'{n}'" in SECOND_STATUS_SQL for n in SECOND_STATUS)


def test_engine_counters_are_read_every_second() -> None:
    keys = [*MYSQL.scan_counters, MYSQL.connection_counter, MYSQL.thread_create_counter,
            *(k for k, _w in MYSQL.spill_counters), *(k for k, _w in MYSQL.log_flush_counters),
            *(k for _m, ks in MYSQL.per_txn_counters for k in ks)]
    for k in keys:
        if k.startswith("status."):
            assert k.split(".", 1)[1] in SECOND_STATUS, k


def test_watch_sessions_from_processlist_rows() -> None:
    rows = [
        ("5", "system user", "", None, "Daemon", "0", "InnoDB purge", None),
        ("7", "root", "localhost", None, "Sleep", "3", "", None),  # the reader itself
        ("8", "sb", "localhost:1", "sbtest", "Query", "0", "Sending data", "SELECT c FROM sbtest1 WHERE id=1"),
        ("9", "sb", "localhost:2", "sbtest", "Sleep", "0", "", None),
        ("10", "root", "localhost:3", None, "Query", "0", "Filling schema table", "/* dbdiag */ SHOW PROCESSLIST"),
        ("11", "event_scheduler", "localhost", None, "Daemon", "9", "Waiting on empty queue", None),
    ]
    assert my_sessions(rows, 7) == (3, 1)
