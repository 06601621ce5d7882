"""The PostgreSQL collectors' pure parts: settings filter (on saved real pg_settings rows),
pg_stat_statements deltas, wait-profile aggregation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors.pg.settings import DURABILITY, changed, non_default
from collectors.pg.stats import STATEMENT_COUNTERS, statements_delta, top_statements
from collectors.pg.waits import WaitWindow, profile, wait_key

DATA = Path(__file__).resolve().parents[1] / "data" / "pg"


def _rows(version: int) -> list[dict[str, Any]]:
    return json.loads((DATA / f"pg_settings-{version}.json").read_text())["rows"]


# -- settings ------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [15, 18])
def test_non_default_keeps_server_settings_and_drops_our_connections(version: int) -> None:
    nd = non_default(_rows(version))
    # set in postgresql.conf (both) or on the command line (the throwaway 18)
    assert nd["shared_buffers"] == {"value": "16384", "unit": "8kB", "source": "configuration file"}
    assert nd["max_wal_size"]["source"] == "configuration file"
    # paths the server set itself (source override, differ from the empty built-in default)
    assert nd["data_directory"]["source"] == "override" and nd["data_directory"]["value"]
    # our own connection: application_name (client), our statement_timeout (session, reset value = default)
    assert "application_name" not in nd
    assert "statement_timeout" not in nd
    # override with the built-in value: per-transaction noise
    assert "transaction_isolation" not in nd and "transaction_read_only" not in nd
    # nothing left at its built-in default
    assert all(r["source"] != "default" for r in nd.values())


def test_non_default_on_the_18_throwaway_sees_its_command_line() -> None:
    nd = non_default(_rows(18))
    assert nd["max_connections"] == {"value": "200", "unit": None, "source": "command line"}
    assert nd["shared_preload_libraries"]["value"] == "pg_stat_statements"


def test_a_session_override_reports_the_server_value_underneath() -> None:
    rows = [{"name": "statement_timeout", "setting": "5000", "unit": "ms", "source": "session", "boot_val": "0",
             "reset_val": "30000"},
            {"name": "work_mem", "setting": "65536", "unit": "kB", "source": "session", "boot_val": "4096",
             "reset_val": "4096"}]
    nd = non_default(rows)
    assert nd == {"statement_timeout": {"value": "30000", "unit": "ms",
                                        "source": "reset value (this session overrides it)"}}


def test_durability_names_exist_on_real_servers() -> None:
    for version in (15, 18):
        names = {r["name"] for r in _rows(version)}
        assert set(DURABILITY) <= names


def test_changed_names_the_settings_that_moved() -> None:
    a = {"settings": {"fsync": {"value": "on"}}, "durability": {"fsync": {"value": "on"}}}
    b = {"settings": {}, "durability": {"fsync": {"value": "off"}}}
    assert changed(a, b) == ["fsync"]
    assert changed(a, a) == []


# -- pg_stat_statements --------------------------------------------------------------------------

def _stmt(calls: int, t: float, **kw: float) -> dict[str, float]:
    row = {c: 0.0 for c in STATEMENT_COUNTERS}
    row.update(calls=calls, total_exec_time=t, **kw)
    return row


def test_statements_delta_new_reset_and_idle() -> None:
    start = {"1|app": _stmt(10, 5.0, rows=10), "2|app": _stmt(100, 50.0), "3|app": _stmt(7, 1.0)}
    end = {"1|app": _stmt(310, 65.0, rows=310),  # ran 300 more times
           "2|app": _stmt(4, 2.0),               # reset in between: counts from zero
           "3|app": _stmt(7, 1.0),               # did not run: left out
           "4|app": _stmt(2, 0.5)}               # new
    d = statements_delta(start, end)
    assert set(d) == {"1|app", "2|app", "4|app"}
    assert d["1|app"]["calls"] == 300 and d["1|app"]["total_exec_time"] == pytest.approx(60.0)
    assert d["1|app"]["rows"] == 300
    assert d["2|app"]["calls"] == 4
    assert d["4|app"]["calls"] == 2
    assert [k for k, _ in top_statements(d, 2)] == ["1|app", "2|app"]


def test_statements_delta_tolerates_null_counters() -> None:
    end = {"1|app": {**_stmt(3, 1.0), "wal_bytes": None}}
    assert statements_delta({}, end)["1|app"]["wal_bytes"] == 0.0


# -- wait profile --------------------------------------------------------------------------------

def test_wait_key() -> None:
    assert wait_key("active", None, None) == "CPU"
    assert wait_key("active", "Lock", "transactionid") == "Lock:transactionid"
    assert wait_key("active", "IO", "WALSync") == "IO:WALSync"
    assert wait_key("idle in transaction", "Client", "ClientRead") == "Client:ClientRead"
    assert wait_key("idle in transaction (aborted)", "Client", "ClientRead") == "Client:ClientRead"
    assert wait_key("idle", "Client", "ClientRead") is None
    assert wait_key("disabled", None, None) is None


def test_window_aggregates_ticks_into_shares() -> None:
    w = WaitWindow()
    for _ in range(10):
        w.add([{"state": "active", "wait_event_type": "Lock", "wait_event": "tuple", "n": 2},
               {"state": "active", "wait_event_type": None, "wait_event": None, "n": 1},
               {"state": "idle in transaction", "wait_event_type": "Client", "wait_event": "ClientRead", "n": 1},
               {"state": "idle", "wait_event_type": "Client", "wait_event": "ClientRead", "n": 5},
               {"state": "hidden", "wait_event_type": None, "wait_event": None, "n": 3}])
    rec = w.record()
    assert rec["ticks"] == 10 and rec["samples"] == 40
    assert rec["waits"] == {"Lock:tuple": 20, "CPU": 10, "Client:ClientRead": 10}
    assert rec["idle"] == 50 and rec["hidden"] == 30
    assert profile([rec, rec]) == {"Lock:tuple": 0.5, "CPU": 0.25, "Client:ClientRead": 0.25}
    assert profile([]) == {}


_row = st.fixed_dictionaries({
    "state": st.sampled_from(["active", "idle", "idle in transaction", "hidden", "disabled", "fastpath function call"]),
    "wait_event_type": st.one_of(st.none(), st.sampled_from(["Lock", "LWLock", "IO", "Client", "IPC"])),
    "wait_event": st.one_of(st.none(), st.text(min_size=1, max_size=12)),
    "n": st.integers(min_value=1, max_value=1000),
})


@given(st.lists(st.lists(_row, max_size=8), max_size=20))
def test_window_counts_add_up(ticks: list[list[dict[str, Any]]]) -> None:
    w = WaitWindow()
    for rows in ticks:
        w.add(rows)
    rec = w.record()
    assert rec["ticks"] == len(ticks)
    assert sum(rec["waits"].values()) == rec["samples"]
    shares = profile([rec])
    assert not shares or sum(shares.values()) == pytest.approx(1.0)
