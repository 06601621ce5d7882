"""Wait-profile states of MySQL / MariaDB threads from processlist / performance_schema rows as servers return them."""

from collections import Counter

from hypothesis import given, strategies as st

from collectors.mysql.waits import IDLE, classify, thread_state

PL = "processlist"
PS = "performance_schema"


def row(command="Query", state="", wait_event=None, info="update t set", user="app", id=7, wait_id=None):
    return {"id": id, "user": user, "command": command, "state": state, "info": info, "wait_event": wait_event,
            "wait_id": wait_id}


def test_row_lock_wait_wins_over_everything():
    # MariaDB 10.11 with p_s on shows the blocked UPDATE as a table I/O wait: misleading; INNODB_TRX knows better.
    assert thread_state(row(state="Updating", wait_event="wait/io/table/sql/handler"), "LOCK WAIT", PS) == "Lock:row"
    assert thread_state(row(state="Updating"), "LOCK WAIT", PL) == "Lock:row"


def test_idle_in_transaction_is_client_read():
    assert thread_state(row(command="Sleep", state="", info=None), "RUNNING", PL) == "ClientRead"
    assert thread_state(row(command="Sleep", state=None, info=None, wait_event="idle"), "RUNNING", PS) == "ClientRead"


def test_idle_outside_transaction_is_not_a_wait():
    assert thread_state(row(command="Sleep", info=None), None, PL) == IDLE


def test_cpu_and_wait_events_with_performance_schema():
    assert thread_state(row(wait_event=None, state="Sending data"), "RUNNING", PS) == "CPU"
    assert thread_state(row(wait_event="wait/io/file/innodb/innodb_log_file"), "RUNNING", PS) == \
        "wait/io/file/innodb/innodb_log_file"


def test_processlist_states_without_performance_schema():
    assert thread_state(row(state="Commit"), "RUNNING", PL) == "State:Commit"
    assert thread_state(row(state=""), None, PL) == "CPU"


def test_lock_states():
    assert thread_state(row(state="Waiting for table metadata lock"), None, PL) == "Lock:metadata"
    assert thread_state(row(state="Waiting for schema metadata lock"), None, PS) == "Lock:metadata"
    assert thread_state(row(state="Waiting for table level lock"), None, PL) == "Lock:table"
    assert thread_state(row(state="Waiting for global read lock"), None, PL) == "Lock:global_read"
    assert thread_state(row(state="Waiting for backup lock"), None, PL) == "Lock:backup"
    assert thread_state(row(state="Waiting for table flush"), None, PL) == "State:Waiting for table flush"


def test_own_statements_and_background_threads_are_left_out():
    assert thread_state(row(info="/* dbdiag */ SHOW"), None, PL) == ""
    assert thread_state(row(user="system user", command="Daemon"), None, PL) == ""
    assert thread_state(row(user="event_scheduler", command="Daemon"), None, PL) == ""
    assert thread_state(row(command="Binlog Dump GTID"), None, PL) == ""


def test_classify_counts_a_tick_and_uses_the_innermost_nested_wait():
    rows = [
        row(id=1, wait_event="wait/io/table/sql/handler", wait_id=10),
        row(id=1, wait_event="wait/io/file/innodb/innodb_data_file", wait_id=11),  # nested inside the one above
        row(id=2, command="Sleep", info=None),
        row(id=3, command="Sleep", info=None),
        row(id=4, state="Updating", wait_event="wait/io/table/sql/handler", wait_id=5),
        row(id=5, info="/* dbdiag */ SELECT"),
    ]
    counts, idle = classify(rows, {3: "RUNNING", 4: "LOCK WAIT"}, PS)
    assert dict(counts) == {"wait/io/file/innodb/innodb_data_file": 1, "ClientRead": 1, "Lock:row": 1}
    assert idle == 1


_text = st.one_of(st.none(), st.text(max_size=40), st.binary(max_size=20))


@given(st.fixed_dictionaries({"id": st.one_of(st.none(), st.integers(0, 2**63)), "user": _text, "command": _text,
                              "state": _text, "info": _text, "wait_event": _text,
                              "wait_id": st.one_of(st.none(), st.integers(0, 2**63))}),
       st.one_of(st.none(), st.sampled_from(["RUNNING", "LOCK WAIT", "ROLLING BACK", "COMMITTING"])),
       st.sampled_from([PL, PS]))
def test_any_row_gives_a_string_state(r, trx_state, source):
    out = thread_state(r, trx_state, source)
    assert isinstance(out, str)
    counts, idle = classify([r], {} if trx_state is None or r["id"] is None else {r["id"]: trx_state}, source)
    assert sum(counts.values()) + idle <= 1


def test_cpu_samples_keep_their_thread_state():
    # MariaDB 10.8+ does not instrument redo log I/O: a commit waiting for its fsync has no current wait.
    cpu: Counter[str] = Counter()
    rows = [row(id=1, state="Commit"), row(id=2, state="Commit"), row(id=3, state=None),
            row(id=4, state="Update", wait_event="wait/io/file/innodb/innodb_data_file")]
    counts, _ = classify(rows, {}, PS, cpu)
    assert counts["CPU"] == 3
    assert dict(cpu) == {"Commit": 2, "-": 1}


def test_own_threads_are_not_counted():
    # dbdiag's own connections (by program_name): neither a state nor idle, whatever they do
    rows = [row(id=7, command="Sleep", info=None), row(id=8, state="Commit"), row(id=9, command="Sleep", info=None),
            row(id=10, state="Commit")]
    counts, idle = classify(rows, {7: "RUNNING", 8: "RUNNING"}, PL, own=frozenset({7, 9, 10}))
    assert counts == Counter({"State:Commit": 1}) and idle == 0


def test_classify_names_the_threads_in_a_lock_state() -> None:
    rows = [{"id": 3, "user": "app", "command": "Query", "state": "Sending data", "info": "SELECT 1"},
            {"id": 4, "user": "app", "command": "Query", "state": "Updating", "info": "UPDATE t SET n = 1"},
            {"id": 5, "user": "app", "command": "Query", "state": "Waiting for table metadata lock",
             "info": "ALTER TABLE t ADD c int"}]
    locked: set[int] = set()
    counts, _ = classify(rows, {3: "RUNNING", 4: "LOCK WAIT"}, PL, locked=locked)
    assert locked == {4, 5}
    assert counts["Lock:row"] == 1 and counts["Lock:metadata"] == 1
