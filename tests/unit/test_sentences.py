"""reports.model.sentences: the words that open each "Why is one slower" pair.

On accounting pairs built here (the right order and shares are known by construction), with settings
verdicts from the real rules (reports.model.durability_settings), and on saved real bundles.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.core.bundle import load_bundle
from diag.core.engines import MYSQL, POSTGRES
from reports.model.accounting import Component, StepAccounting
from reports.model.compare import compare
from reports.model.durability_settings import settings_verdict
from reports.model.sentences import (Side, component_sentences, contributions, durability_differs, durability_sentence,
                               joint_label, pair_sentences, side_names)

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"

PG_DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on", "wal_sync_method": "fdatasync"}
PG_ASYNC = {**PG_DURABLE, "synchronous_commit": "off"}
MY_DURABLE = {"innodb_flush_log_at_trx_commit": "1", "log_bin": "OFF", "innodb_doublewrite": "ON",
              "innodb_flush_method": "O_DIRECT", "version": "10.11.6-MariaDB"}
MY_FLUSH_2 = {**MY_DURABLE, "innodb_flush_log_at_trx_commit": "2"}
MY_NO_DOUBLEWRITE = {**MY_DURABLE, "innodb_doublewrite": "OFF"}


LABELS = {"client_cpu": "client CPU", "server_cpu_user": "server CPU (user)", "round_trips": "round trips",
          "wait:commit_flush": "waits: commit flush (WAL)", "wait:lock": "waits: row and table locks"}


def _acc(target: str, wall: float, **parts: float) -> StepAccounting:
    """An accounting of ``wall`` µs whose named parts (``wait_commit_flush`` -> ``wait:commit_flush``) are given
    and whose rest is unaccounted, so the shares add to 1 as the real one's do."""
    keys = {k: k.replace("wait_", "wait:", 1) for k in parts}
    comps = [Component(keys[k], LABELS[keys[k]], v, v / wall, {}) for k, v in parts.items()]
    comps.append(Component("unaccounted", "unaccounted", wall - sum(parts.values()),
                           (wall - sum(parts.values())) / wall, {}))
    return StepAccounting(target=target, workload="insert", clients=1, wall_us_per_txn=wall,
                          components=tuple(comps), evidence={})


def _side(name: str, acc: StepAccounting | None, settings: dict[str, str] | None, engine=POSTGRES,
          tps: float | None = None) -> Side:
    verdict = settings_verdict(engine, settings) if settings is not None else None
    rate = tps if tps is not None else (1e6 / acc.wall_us_per_txn if acc else 100.0)
    return Side(name=name, tps=rate, engine=engine, accounting=acc, durability=verdict)


def test_components_come_largest_first_with_their_share_of_the_gap() -> None:
    # Gap 1,000 µs: commit flush +600 (60%), server user CPU +300 (30%), client CPU +100 (10%),
    # round trips +40 (4%: below the 5% floor, no sentence), unaccounted -40 (offsets 4%: no sentence).
    fast = _acc("a", 1000.0, client_cpu=100.0, server_cpu_user=200.0, round_trips=60.0, wait_commit_flush=0.0)
    slow = _acc("b", 2000.0, client_cpu=200.0, server_cpu_user=500.0, round_trips=100.0, wait_commit_flush=600.0)
    cs = contributions(fast, slow)
    assert [c.key for c in cs] == ["wait:commit_flush", "server_cpu_user", "client_cpu", "round_trips",
                                   "unaccounted"]
    assert [c.share_of_gap for c in cs] == pytest.approx([0.6, 0.3, 0.1, 0.04, -0.04])
    assert sum(c.difference_us for c in cs) == pytest.approx(1000.0)  # the parts add up to the gap
    lines = component_sentences(_side("a", fast, PG_DURABLE), _side("b", slow, PG_DURABLE))
    assert lines == [
        "b spends 600 µs more per transaction waiting on commit flush (WAL) (600 µs against 0 µs on a), 60% of the gap.",
        "b spends 300 µs more per transaction on server CPU (user) (500 µs against 200 µs on a), 30% of the gap.",
        "b spends 100 µs more per transaction on client CPU (200 µs against 100 µs on a), 10% of the gap.",
    ]


def test_a_component_going_the_other_way_is_said_when_it_offsets_part_of_the_gap() -> None:
    fast = _acc("a", 1000.0, client_cpu=500.0)
    slow = _acc("b", 1500.0, client_cpu=100.0, wait_lock=900.0)  # lock +900 (180%), client CPU -400 (80%)
    lines = component_sentences(_side("a", fast, PG_DURABLE), _side("b", slow, PG_DURABLE))
    assert lines[0].startswith("b spends 900 µs more per transaction waiting on row and table locks") and "180% of the gap" in lines[0]
    assert lines[-1] == ("b spends 400 µs less per transaction on client CPU (100 µs against 500 µs on a), "
                         "which offsets 80% of the gap.")


def test_the_issues_example_sentence() -> None:
    """Durable PostgreSQL waiting 85 µs at commit against MariaDB at innodb_flush_log_at_trx_commit=2."""
    pg = _acc("pg", 243.0, wait_commit_flush=85.0, server_cpu_user=60.0)
    my = _acc("my", 104.0, server_cpu_user=50.0)
    s = durability_sentence(_side("my", my, MY_FLUSH_2, MYSQL), _side("pg", pg, PG_DURABLE))
    assert s == ("pg waits 85 µs per transaction on the WAL flush at commit (35% of its time); my does not flush "
                 "at commit (innodb_flush_log_at_trx_commit=2): the two are not at the same durability level.")


@pytest.mark.parametrize("fast,slow,said", [
    ((PG_DURABLE, POSTGRES), (PG_DURABLE, POSTGRES), None),
    ((PG_DURABLE, POSTGRES), (MY_DURABLE, MYSQL), None),
    ((PG_ASYNC, POSTGRES), (PG_ASYNC, POSTGRES), None),  # relaxed the same way: the same level
    ((PG_ASYNC, POSTGRES), (PG_DURABLE, POSTGRES), "does not flush at commit (synchronous_commit=off)"),
    ((PG_DURABLE, POSTGRES), (PG_ASYNC, POSTGRES), "does not flush at commit (synchronous_commit=off)"),
    ((MY_FLUSH_2, MYSQL), (PG_DURABLE, POSTGRES), "does not flush at commit (innodb_flush_log_at_trx_commit=2)"),
    ((MY_NO_DOUBLEWRITE, MYSQL), (MY_DURABLE, MYSQL), "is not crash-safe (innodb_doublewrite=OFF)"),
    ((None, POSTGRES), (PG_DURABLE, POSTGRES), "durability is not known"),
    ((PG_ASYNC, POSTGRES), (MY_NO_DOUBLEWRITE, MYSQL), "may not be at the same durability level"),
])
def test_the_durability_sentence_is_there_iff_the_settings_differ(fast, slow, said) -> None:
    a = _acc("a", 100.0, server_cpu_user=50.0)
    b = _acc("b", 200.0, server_cpu_user=50.0, wait_commit_flush=100.0)
    fa, fb = _side("a", a, fast[0], fast[1]), _side("b", b, slow[0], slow[1])
    s = durability_sentence(fa, fb)
    assert durability_differs(fa.durability, fb.durability) == (said is not None)
    lines = pair_sentences(fa, fb)
    if said is None:
        assert s is None and not any("durability" in x for x in lines)
        return
    assert s is not None and said in s
    assert lines[1] == s  # said right after the gap, before the components, whatever their size
    if fb.durability is not None and fb.durability.status == "durable" and "may not" not in said:
        log = slow[1].log_name  # the durable side's own words: WAL / redo log
        assert s.startswith(f"b waits 100 µs per transaction on the {log} flush at commit (50% of its time)")


def test_without_accounting_the_sentences_say_the_gap_cannot_be_split() -> None:
    fast = _side("a", _acc("a", 100.0), PG_DURABLE)
    slow = _side("b", None, PG_DURABLE, tps=5000.0)
    lines = pair_sentences(fast, slow)
    assert lines[0] == "a is 2.00x faster than b (10,000 against 5,000 transactions/s)."
    assert lines[1].startswith("No time accounting for b")


def test_rows_shared_across_engines_get_one_label() -> None:
    assert joint_label("waits: commit flush (WAL)", "waits: commit flush (redo log)") == \
        "waits: commit flush (WAL / redo log)"
    assert joint_label("client CPU", "client CPU") == "client CPU"
    assert joint_label(None, "waits: latches") == "waits: latches"


def test_sides_are_named_by_their_run_when_their_labels_are_equal() -> None:
    assert side_names(("pg", "my"), ("r1", "r2")) == ("pg", "my")
    assert side_names(("pg", "pg"), ("durable", "relaxed")) == ("durable", "relaxed")
    assert side_names(("pg", "pg"), ("r", "r")) == ("pg (first run)", "pg (second run)")
    # the faster side (named first) came from the second run named on the command line
    assert side_names(("pg", "pg"), ("r", "r"), first=False) == ("pg (second run)", "pg (first run)")


def test_saved_bundles_durable_against_fsync_off_leads_with_durability() -> None:
    """Real runs: durable PostgreSQL (and MariaDB) inserts against PostgreSQL at fsync=off, 2 clients."""
    items = [e for e in compare(load_bundle(DATA / "insert_flush_cap_120"), load_bundle(DATA / "insert_pg_fsync_off"))
             if e["clients"] == 2]
    assert len(items) == 2
    for e in items:
        assert e["fast"] == "postgres@127.0.0.1:56045"  # the fsync=off server, 7x and 6x faster
        assert "does not flush at commit (fsync=off)" in e["sentences"][1]
        assert "not at the same durability level" in e["sentences"][1]
        assert e["sentences"][0].startswith(f"{e['fast_name']} is ")
        # The time rows are the accounting's components: their shares of the gap add to about 1 (the measured
        # parts may overlap a little, which the accounting absorbs into its shares of the wall time, not the µs).
        shares = [d["share_of_gap"] for d in e["differences"] if d["unit"] == "µs"]
        assert sum(shares) == pytest.approx(1.0, abs=0.1) and shares == sorted(shares, reverse=True)


def test_saved_bundle_same_durability_says_nothing_of_it_and_ranks_by_share() -> None:
    for e in compare(load_bundle(DATA / "point_select")):
        assert not any("durability" in s for s in e["sentences"])
        assert len(e["sentences"]) >= 2
        rows = [d for d in e["differences"] if d["unit"] == "µs"]
        assert [d["share_of_gap"] for d in rows] == sorted((d["share_of_gap"] for d in rows), reverse=True)
        # Rows line up by the shared classes: no engine-specific wait name, no lump of processlist states.
        assert all(d["metric"].split(":", 1)[0] in ("wait", "client_cpu", "round_trips", "server_cpu_user",
                                                     "server_cpu_system", "unaccounted") for d in rows)
