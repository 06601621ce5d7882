"""Blocking chains: the typed record, the window builder, the collectors' row formatting and the rule's evidence.

Saved real output: tests/data/blocking/planted_run.json holds the blocking series of one run of
tests/integration/test_blocking_planted.py (PostgreSQL 18, MariaDB 10.11 with performance_schema ON), as
written, with its result rows cut to their windows. Steps: 1 client nothing planted, 2 clients a table lock
(LOCK TABLE ... IN EXCLUSIVE MODE / LOCK TABLES ... WRITE), 3 clients an UPDATE of every row left
uncommitted, each held ~1.5 s from 0.4 s into the 2.5 s window.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from collectors.blocking import Seen, Wait, WindowBuilder
from collectors.mysql.blocking import held_text, lock_wait_state, mdl_holders_from_info
from collectors.pg.blocking import lock_text, seen_blocker, waits_of
from diag.core.bundle import Bundle
from diag.core.schema import BundleFormatError
from diag.core.schema.blocking import BlockingWindow
from reports.views.blocking_view import blocking_sections
from reports.model.steps import steps
from reports.rules.blocking import advice_part, blocking_evidence, chains, step_blocking, title_part

DATA = Path(__file__).resolve().parents[1] / "data" / "blocking" / "planted_run.json"
SAVED = json.loads(DATA.read_text(encoding="utf-8"))
HOLD_S = 1.5


def saved_bundle(series: dict[str, list[dict[str, Any]]] | None = None) -> Bundle:
    return Bundle(path=Path("/nonexistent"), run={"targets": SAVED["targets"]}, results=SAVED["results"],
                  findings=[], events=[], series=SAVED["series"] if series is None else series)


def step_of(b: Bundle, target: str, clients: int):
    (s,) = [s for s in steps(b) if s.target == target and s.clients == clients]
    return s


@pytest.mark.parametrize("name", sorted(SAVED["series"]))
def test_saved_records_round_trip(name: str) -> None:
    for r in SAVED["series"][name]:
        assert BlockingWindow.from_dict(r).to_dict() == r


def test_record_with_a_wrong_type_names_the_field() -> None:
    bad = {**SAVED["series"]["pg_blocking--pg"][0], "blockers": [{"pid": "12"}]}
    with pytest.raises(BundleFormatError, match=r"blockers\[0\]: pid should be an integer"):
        BlockingWindow.from_dict(bad, "series/pg_blocking--pg.jsonl")


@pytest.mark.parametrize("target,statement", [("pg", "LOCK TABLE dbdiag.blk IN EXCLUSIVE MODE"),
                                              ("my", "LOCK TABLES dbdiag.blk WRITE")])
def test_saved_table_lock_names_the_outside_session(target: str, statement: str) -> None:
    b = saved_bundle()
    sb = step_blocking(b, step_of(b, target, 2))
    assert sb is not None and sb.blockers
    top = sb.blockers[0]
    assert top.last.statement == statement
    assert HOLD_S - 0.7 <= top.span_s <= HOLD_S + 0.25
    assert 0.5 * 2 * HOLD_S <= top.blocked_s <= 2 * (HOLD_S + 0.25)  # both clients waited behind it
    behind = {c: v for c, v in sb.chain_s.items() if c.endswith(f" -> {top.pid}")}
    assert len(behind) == 2 and all(HOLD_S - 0.7 <= v <= HOLD_S + 0.3 for v in behind.values()), sb.chain_s
    ev = blocking_evidence(b, step_of(b, target, 2))
    assert ev["blocker"].startswith(f"pid {top.pid} ") and statement in ev["blocker"]
    assert ev["blocked_sessions"] == 2
    assert ev["blocking_chain"].count(f"-> {top.pid}") == 2  # each client waits behind it
    assert title_part(b, step_of(b, target, 2)).startswith(f", blocked by pid {top.pid} (")


def test_saved_steps_without_plant_have_no_blocker() -> None:
    b = saved_bundle()
    for target in ("pg", "my"):
        sb = step_blocking(b, step_of(b, target, 1))
        assert sb is not None and sb.blockers == () and sb.waiting_s == 0
        assert title_part(b, step_of(b, target, 1)) == ""


def test_no_sampler_no_evidence() -> None:
    b = saved_bundle(series={})
    assert step_blocking(b, step_of(b, "pg", 2)) is None
    assert blocking_evidence(b, step_of(b, "pg", 2)) == {}


def test_wait_without_blocker_says_so() -> None:
    b = saved_bundle()
    s = step_of(b, "my", 2)
    rec = BlockingWindow(t=s.t0 + 1, ticks=10, window_s=1.0, waiting_s=0.8, unattributed_s=0.8,
                         unattributed="metadata lock holders not visible").to_dict()
    ev = blocking_evidence(saved_bundle({"my_blocking--my": [rec]}), s)
    assert ev == {"blocker": "none seen: metadata lock holders not visible", "lock_wait_s": 0.8}


def test_window_builder_chain_and_periods() -> None:
    w = WindowBuilder()
    seen = {10: Seen(10, "app", "psql (127.0.0.1)", "idle in transaction", "LOCK TABLE t IN EXCLUSIVE MODE", 3.0,
                     2.9), 11: Seen(11, state="active, waits Lock:relation", statement="UPDATE t SET n = 1")}
    for i in range(3):  # 12 waits for 11, which waits for 10; 13 waits with no blocker seen
        w.add(100.0 + i / 10, [Wait(11, (10,), "RowExclusiveLock on relation t", 0.1, 1.0 + i / 10),
                               Wait(12, (11,), "ShareLock on transactionid 5", 0.1),
                               Wait(13, (), "a heavyweight lock", 0.1, why_unattributed="gone")], seen)
    rec = BlockingWindow.from_dict(w.record(100.3))
    assert rec.ticks == 3 and rec.waiting_s == pytest.approx(0.9) and rec.unattributed_s == pytest.approx(0.3)
    assert rec.unattributed == "gone"
    b10, b11 = sorted(rec.blockers, key=lambda b: b.pid)
    assert (b10.first_t, b10.last_t, b10.ticks, b10.blocked, b10.waits_for) == (100.0, 100.2, 3, (11,), ())
    assert b11.waits_for == (10,) and b11.blocked == (12,) and b10.longest_wait_s == pytest.approx(1.2)
    b = saved_bundle()
    s = step_of(b, "pg", 2)
    moved = {**rec.to_dict(), "t": s.t0 + 1,
             "blockers": [{**x.to_dict(), "first_t": s.t0 + 0.5, "last_t": s.t0 + 0.7} for x in rec.blockers]}
    sb = step_blocking(saved_bundle({"pg_blocking--pg": [moved]}), s)
    # 3 samples of 0.1 s; 11 waits too, so it has its own chain
    assert chains(sb) == "11 -> 10 (idle in transaction) 0.3 s; 12 -> 11 -> 10 (idle in transaction) 0.3 s"


def test_cycle_is_shown_once() -> None:
    w = WindowBuilder()
    w.add(1.0, [Wait(1, (2,), "x", 0.1), Wait(2, (1,), "y", 0.1), Wait(3, (1,), "z", 0.1)], {})
    rec = w.record(1.1)
    b = saved_bundle()
    s = step_of(b, "pg", 2)
    moved = {**rec, "t": s.t0 + 1, "blockers": [{**x, "first_t": s.t0 + 0.5, "last_t": s.t0 + 0.5}
                                                 for x in rec["blockers"]]}
    assert chains(step_blocking(saved_bundle({"pg_blocking--pg": [moved]}), s)) == \
        "1 -> 2 -> 1 0.1 s; 2 -> 1 -> 2 0.1 s; 3 -> 1 -> 2 -> 1 0.1 s"  # a deadlock, and a waiter behind it


def test_links_seen_at_different_moments_are_not_joined() -> None:
    w = WindowBuilder()
    w.add(1.0, [Wait(11, (10,), "x", 0.1)], {})  # 11 waits for 10, then gets its lock
    w.add(1.1, [Wait(12, (11,), "y", 0.1), Wait(13, (11,), "y", 0.1)], {})  # later 11 blocks 12 and 13
    assert w.record(1.2)["chains"] == {"11 -> 10": 0.1, "12 -> 11": 0.1, "13 -> 11": 0.1}


def test_pg_rows_to_waits() -> None:
    rows = [{"pid": 7, "query_s": 2.0, "blocker": 5}, {"pid": 7, "query_s": 2.0, "blocker": 6},
            {"pid": 8, "query_s": 0.5, "blocker": None}]
    locks = [{"pid": 7, "locktype": "relation", "mode": "RowExclusiveLock", "relation": "t", "wait_s": 1.25,
              "holder": 5, "held": "ExclusiveLock"},
             {"pid": 8, "locktype": "transactionid", "mode": "ShareLock", "xid": "742", "tuple_relation": "t",
              "wait_s": None, "holder": None, "held": None}]
    w7, w8 = waits_of(rows, locks, 0.1)
    assert (w7.blockers, w7.lock, w7.wait_s) == ((5, 6), "RowExclusiveLock on relation t (held: ExclusiveLock)", 1.25)
    assert (w8.blockers, w8.wait_s) == ((), 0.5) and w8.why_unattributed
    assert lock_text(locks[1]) == "ShareLock on transactionid 742 (row of t)"


def test_mysql_lock_states_and_holders() -> None:
    assert lock_wait_state({"state": "Waiting for table metadata lock"}) == "metadata"
    assert lock_wait_state({"state": "Waiting for table level lock"}) == "table"
    assert lock_wait_state({"state": "Updating"}) == ""
    assert held_text("MDL_SHARED_NO_READ_WRITE") == "MDL_SHARED_NO_READ_WRITE = LOCK TABLES ... WRITE"
    assert held_text("SHARED_READ_ONLY") == "SHARED_READ_ONLY = LOCK TABLES ... READ"
    assert held_text("SHARED_WRITE") == "SHARED_WRITE"
    info = [{"pid": 3, "mode": "MDL_SHARED_NO_READ_WRITE", "db": "d", "name": "blk"},
            {"pid": 4, "mode": "MDL_SHARED_READ", "db": "d", "name": "blk2"},
            {"pid": 9, "mode": "MDL_SHARED_WRITE", "db": "d", "name": "blk"}]
    waiter = {"id": 9, "info": "UPDATE d.blk SET n = n + 1 WHERE id = 2"}
    assert mdl_holders_from_info(waiter, info) == [(3, "MDL_SHARED_NO_READ_WRITE", "d.blk")]


def test_report_section_lists_planted_steps_only() -> None:
    view = blocking_sections(saved_bundle())
    assert view["sampled"] is True
    assert [(s["target"], s["clients"]) for s in view["steps"]] == [("pg", 2), ("pg", 3), ("my", 2), ("my", 3)]
    for s in view["steps"]:
        top = s["rows"][0]
        assert top["blocked"] == s["clients"] and len(s["chains"]) == s["clients"]
        assert all(c.split(" -> ")[1].startswith(str(top["pid"])) for c in s["chains"])
    assert blocking_sections(saved_bundle(series={})) == {"sampled": False, "steps": []}


def test_prepared_transaction_blocker_and_idle_advice() -> None:
    assert seen_blocker({"blocker": 0}).state.startswith("a prepared transaction")
    b = saved_bundle()
    assert "pid " in advice_part(b, step_of(b, "pg", 2)) and "was idle" in advice_part(b, step_of(b, "my", 2))
    assert advice_part(b, step_of(b, "pg", 1)) == ""


def test_report_lists_a_step_of_unattributed_waits_only_when_they_last() -> None:
    b = saved_bundle()
    s = step_of(b, "my", 1)
    for waited, listed in ((0.2, False), (0.8, True)):
        rec = BlockingWindow(t=s.t0 + 1, ticks=10, window_s=1.0, waiting_s=waited, unattributed_s=waited,
                             unattributed="metadata lock holders not visible").to_dict()
        got = blocking_sections(saved_bundle({"my_blocking--my": [rec]}))["steps"]
        assert bool(got) is listed
        if listed:
            assert got[0]["rows"] == [] and got[0]["unattributed"] == "metadata lock holders not visible"


def test_queue_for_one_row_names_the_holder_not_the_first_waiter() -> None:
    # PostgreSQL's row-lock queue: the first waiter holds the tuple lock and waits for the holder's
    # transaction; the others wait for the tuple lock, so pg_blocking_pids names the first waiter for them
    seen = {7: Seen(7, state="idle in transaction", statement="UPDATE t SET n = 0 WHERE id = 1"),
            8: Seen(8, state="active, waits Lock:transactionid")}
    w = WindowBuilder()
    for i in range(5):
        w.add(100.0 + i / 10, [Wait(8, (7,), "ShareLock on transactionid 9", 0.1),
                               Wait(9, (8,), "ExclusiveLock on tuple t", 0.1),
                               Wait(10, (8,), "ExclusiveLock on tuple t", 0.1)], seen)
    b = saved_bundle()
    s = step_of(b, "pg", 2)
    rec = {**w.record(s.t0 + 1)}
    rec["blockers"] = [{**x, "first_t": s.t0 + 0.5, "last_t": s.t0 + 0.9} for x in rec["blockers"]]
    sb = step_blocking(saved_bundle({"pg_blocking--pg": [rec]}), s)
    assert [m.pid for m in sb.blockers] == [7, 8]  # 8 blocked more sessions directly, 7 heads every chain
    ev = blocking_evidence(saved_bundle({"pg_blocking--pg": [rec]}), s)
    assert ev["blocker"].startswith("pid 7: idle in transaction")
    assert ev["blocked_sessions"] == 3 and ev["blocked_wait_s"] == pytest.approx(1.5)
    assert ev["longest_blocked_s"] == pytest.approx(0.5)  # each of the three waited 5 samples of 0.1 s
    assert ev["blocking_chain"] == ("10 -> 8 -> 7 (idle in transaction) 0.5 s; 8 -> 7 (idle in transaction) 0.5 s; "
                                    "9 -> 8 -> 7 (idle in transaction) 0.5 s")


def test_hot_row_blocked_in_turn_names_no_sole_blocker() -> None:
    # four sessions updating one row: whoever holds it blocks the others, a new holder every few samples
    w = WindowBuilder()
    for i in range(9):
        holder = (1, 2, 3)[i // 3]
        others = [p for p in (1, 2, 3, 4) if p != holder]
        w.add(100.0 + i / 10, [Wait(p, (holder,), "ShareLock on transactionid", 0.1) for p in others],
              {holder: Seen(holder, state="active")})
    b = saved_bundle()
    s = step_of(b, "pg", 2)
    rec = w.record(s.t0 + 1)
    rec["blockers"] = [{**x, "first_t": s.t0 + 0.1, "last_t": s.t0 + 0.9} for x in rec["blockers"]]
    bb = saved_bundle({"pg_blocking--pg": [rec]})
    ev = blocking_evidence(bb, s)
    assert ev["head_share_pct"] == pytest.approx(33.3, abs=0.1) and "passed between 3 sessions" in ev["blocker_note"]
    assert title_part(bb, s).startswith(", blocked in turn by 3 sessions (most by pid ")
