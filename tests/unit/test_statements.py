"""Statement digests: deltas, own statements, plans parsed from saved real EXPLAIN output, the typed record,
parameter substitution and the cross-engine text normalisation of the A vs B table."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from collectors.base import CollectorContext
from collectors.mysql.statements import MyStatementSource, substitute
from collectors.plans import PlanFormatError, error_without_literals, my_plan_nodes, pg_plan_nodes, without_literals
from collectors.statements import digest_delta, explainable, table_delta
from diag.core.bundle import Bundle, load_bundle
from diag.core.engines import MYSQL, POSTGRES
from diag.core.schema import BundleFormatError, ResultRow, StatementPlan, StepStatements
from diag.core.targets import parse_target
from reports.model.compare import compare
from reports.model.plans import normalise, plan_difference
from reports.rules.statements import full_scan, statement_hotspot
from reports.views.statements_view import compare_pair, compare_statements, statement_sections
from reports.views.verdict import pair_lines

PLANS = Path(__file__).resolve().parents[1] / "data" / "plans"


def _plan(name: str) -> object:
    return json.loads((PLANS / name).read_text())


def test_delta_counts_new_statements_and_resets_from_zero_and_drops_idle_ones() -> None:
    start = {"a": {"calls": 10, "total_ms": 5.0}, "b": {"calls": 3, "total_ms": 1.0}, "c": {"calls": 7, "total_ms": 2.0}}
    end = {"a": {"calls": 15, "total_ms": 6.5}, "b": {"calls": 2, "total_ms": 0.5},  # b was reset
           "c": {"calls": 7, "total_ms": 2.0}, "d": {"calls": 4, "total_ms": 0.25}}  # c idle, d new
    d = digest_delta(start, end, ("calls", "total_ms", "rows"))
    assert d == {"a": {"calls": 5.0, "total_ms": 1.5}, "b": {"calls": 2.0, "total_ms": 0.5},
                 "d": {"calls": 4.0, "total_ms": 0.25}}


def test_table_delta_keeps_tables_that_changed() -> None:
    t0 = {"s.t": {"seq_scan": 1, "seq_tup_read": 100, "idx_scan": 0, "relpages": 9}, "s.u": {"seq_scan": 2}}
    t1 = {"s.t": {"seq_scan": 4, "seq_tup_read": 400, "idx_scan": 0, "relpages": 9}, "s.u": {"seq_scan": 2}}
    (t,) = table_delta(t0, t1)
    assert (t.table, t.seq_scan, t.seq_tup_read, t.idx_scan) == ("s.t", 3, 300, 0)


def test_postgres_plan_of_a_full_scan_under_an_aggregate() -> None:
    nodes = pg_plan_nodes(_plan("pg18_seq_scan_aggregate.json"))
    assert [(n.depth, n.node) for n in nodes] == [(0, "Aggregate"), (1, "Seq Scan")]
    scan = nodes[1]
    assert scan.full_scan and scan.table == "dbdiag.sbtest1" and "pad" in scan.filter
    assert scan.label == "Seq Scan on dbdiag.sbtest1"


def test_postgres_index_scan_is_not_a_full_scan() -> None:
    (n,) = pg_plan_nodes(_plan("pg18_index_scan.json"))
    assert n.node == "Index Scan" and n.index == "sbtest1_pkey" and not n.full_scan


def test_mariadb_plans() -> None:
    (scan,) = my_plan_nodes(_plan("mariadb1011_all.json"))
    assert scan.full_scan and scan.node == "ALL" and scan.table == "sbtest1" and scan.rows and scan.rows > 90000
    (const,) = my_plan_nodes(json.dumps(_plan("mariadb1011_const.json")))
    assert not const.full_scan and const.index == "PRIMARY"


@pytest.mark.parametrize("bad", ["not json", "[]", '{"Plan": 1}', '{"x": 1}'])
def test_a_plan_of_another_shape_is_one_clear_error(bad: str) -> None:
    with pytest.raises(PlanFormatError):
        pg_plan_nodes(bad)
    with pytest.raises(PlanFormatError):
        my_plan_nodes(bad)


def test_parameters_become_literals_mysql_compares_either_way() -> None:
    assert substitute("SELECT c FROM t WHERE id = ? LIMIT ?") == ("SELECT c FROM t WHERE id = '1' LIMIT 1", True)
    assert substitute("SELECT c FROM t WHERE id IN (...)") == ("SELECT c FROM t WHERE id IN('1')", True)
    assert substitute("SELECT '?' FROM t") == ("SELECT '?' FROM t", False)
    # a digest's spaced-out call parses again (MariaDB without IGNORE_SPACE: "COUNT (" is a syntax error)
    assert substitute("SELECT COUNT ( * ) FROM `t` WHERE `v` IN (...)") == \
        ("SELECT COUNT( * ) FROM `t` WHERE `v` IN('1')", True)
    assert substitute("SELECT COUNT ( * ) FROM `t`") == ("SELECT COUNT( * ) FROM `t`", False)


def test_own_statements_are_told_apart() -> None:
    own = MyStatementSource.is_own
    assert own(None, "k", "/* dbdiag */ SELECT 1")
    assert own(None, "k", "SELECT `NAME` FROM `performance_schema` . `setup_consumers`")
    assert own(None, "k", "SHOW GLOBAL STATUS")
    assert not own(None, "k", "SELECT `c` FROM `dbdiag` . `sbtest1` WHERE ID = ?")


def test_explainable_statements() -> None:
    assert explainable("SELECT 1") and explainable("  with x as (select 1) select * from x")
    assert not explainable("BEGIN") and not explainable("COMMIT") and not explainable("")


def test_texts_of_both_engines_meet() -> None:
    pg = "SELECT count(*) FROM dbdiag.sbtest1 WHERE pad = $1"
    my = "SELECT count(*) FROM dbdiag.sbtest1 WHERE pad = 'none'"
    digest = "SELECT COUNT ( * ) FROM `dbdiag` . `sbtest1` WHERE `pad` = ?"
    assert normalise(pg) == normalise(my) == normalise(digest)
    assert normalise("SELECT c FROM t WHERE id = $1") != normalise("SELECT k FROM t WHERE id = $1")


def test_record_round_trips_and_a_bad_value_names_its_field() -> None:
    rec = {"source": "pg_stat_statements", "t0": 1.0, "t1": 3.0, "total_ms": 10.0, "calls": 3, "statements_seen": 1,
           "own_excluded": 2, "notes": [], "tables": [{"table": "s.t", "seq_scan": 2, "seq_tup_read": 20}],
           "statements": [{"key": "1|r", "text": "SELECT 1", "calls": 3, "total_ms": 10.0, "rows": 3,
                           "rows_examined": 300, "examined_from": "x", "tables": ["s.t"],
                           "plan": {"method": "generic_plan", "nodes": [{"depth": 0, "node": "Seq Scan",
                                                                          "table": "s.t", "full_scan": True}]}}]}
    st = StepStatements.from_dict(rec)
    assert StepStatements.from_dict(st.to_dict()) == st
    (s,) = st.statements
    assert s.examined_per_row == 100 and s.mean_ms == pytest.approx(10 / 3) and st.share(s) == 1.0
    assert ResultRow.from_dict({"target": "pg", "statements": rec}).step_statements == st
    bad = {**rec, "statements": [{**rec["statements"][0], "calls": "three"}]}
    with pytest.raises(BundleFormatError, match=r"results\[0\]: statements: statements\[0\]: calls"):
        ResultRow.from_dict({"statements": bad}, "results[0]")


def test_every_engine_instruments_its_throwaway_servers() -> None:
    assert ("track_wal_io_timing", "on") in POSTGRES.instrumentation_for(180000)
    assert ("track_wal_io_timing", "on") not in POSTGRES.instrumentation_for(130000)
    assert ("performance_schema", "ON") in MYSQL.instrumentation_for(101100)


# --------------------------------------------------------------------------- rules and view on a saved real run

SAVED = Path(__file__).resolve().parents[1] / "data" / "statements" / "planted_run"


def _saved() -> Bundle:
    return load_bundle(SAVED)


@pytest.mark.parametrize("target,node", [("pg", "Seq Scan on dbdiag.sbtest1"), ("my", "ALL on sbtest1")])
def test_full_scan_and_hotspot_on_the_saved_planted_run_both_directions(target: str, node: str) -> None:
    b = _saved()
    scans = [f for f in full_scan(b) if f.target == target]
    (f,) = scans
    assert f.workload == "custom" and f.evidence["plan_node"] == node and "sbtest1" in f.evidence["table"]
    assert "pad" in f.evidence["statement"] and f.evidence["examined_per_row"] == 100000
    (h,) = [x for x in statement_hotspot(b) if x.target == target]
    assert h.workload == "custom" and "count(*)" in h.evidence["statement"]
    assert 0 < f.impact <= 1 and f.impact == h.impact  # the same statement's share of the clients' time


def test_a_single_lookup_per_transaction_is_neither_a_scan_nor_a_hotspot() -> None:
    b = _saved()
    assert not [f for f in (*full_scan(b), *statement_hotspot(b)) if f.workload == "point-select"]


def test_statement_section_and_versus_table_on_the_saved_run() -> None:
    b = _saved()
    secs = {s["target"]: s for s in statement_sections(b)}
    assert set(secs) == {"pg", "my"} and all(len(s["steps"]) == 2 and not s["off"] for s in secs.values())
    (custom,) = [c for c in compare_statements(b) if c["workload"] == "custom"]
    # Both engines' spellings of both statements meet: two rows, each with both sides and both plans.
    assert len(custom["rows"]) == 2 and all(r["a_us"] and r["b_us"] for r in custom["rows"])
    assert any("count(*)" in r["text"] and r["a_plan"] and r["b_plan"] for r in custom["rows"])
    # PostgreSQL times execution only, MariaDB from parse to end: never subtracted, never a share of the gap.
    assert custom["comparable"] is False and custom["lead"] is None and custom["gap_us"] is None
    assert all(r["diff_us"] is None for r in custom["rows"])
    assert "explains" not in custom["sentence"] and "total_exec_time" in custom["sentence"]
    assert "parse to end" in custom["sentence"]
    # Rows per call do mean the same on both: the saved digests' own rows / calls.
    raw = {r["target"]: r for r in b.results if r["workload"] == "custom"}
    for side, label in (("a", custom["a"]), ("b", custom["b"])):
        stmts = raw[label]["statements"]["statements"]
        (cnt,) = [x for x in stmts if "count(*)" in x["text"].lower()]
        (row,) = [r for r in custom["rows"] if "count(*)" in r["text"].lower()]
        assert row[f"{side}_rows_per_call"] == pytest.approx(cnt["rows"] / cnt["calls"])
    # The transaction gap is the accounting's: clients x window / transactions, worked out here from the rows.
    wall = {k: r["clients"] * (r["t_end"] - r["t_start"]) * 1e6 / r["transactions"] for k, r in raw.items()}
    assert custom["txn_gap_us"] == pytest.approx(wall[custom["b"]] - wall[custom["a"]], rel=1e-3)


def _custom_pair(txn_gap_us: float | None) -> dict[str, Any]:
    """The saved run's custom step compared as if both sides timed statements alike (two PostgreSQL servers)."""
    b = _saved()
    (ra, sa), (rb, sb) = [(r, r.step_statements) for r in b.rows if r.workload == "custom"]
    assert sa is not None and sb is not None
    return compare_pair("custom", 1, ra, sa, rb, sb, scopes=(POSTGRES, POSTGRES), txn_gap_us=txn_gap_us)


def test_a_same_scope_statement_gap_is_never_claimed_beyond_the_transaction_gap() -> None:
    big = _custom_pair(txn_gap_us=None)
    assert big["comparable"] and "count(*)" in big["lead"]["text"] and "explains" in big["sentence"]
    stmt_gap = big["gap_us"]
    assert stmt_gap == pytest.approx(sum(r["b_us"] or 0 for r in big["rows"]) - sum(r["a_us"] or 0 for r in big["rows"]))
    # A transaction gap wider than the statements' difference: the share stands as said.
    wide = _custom_pair(txn_gap_us=2 * stmt_gap)
    assert "more than the whole transaction" not in wide["sentence"]
    # Narrower (or the other way): the sentence says the statement difference exceeds it, not a share of it.
    for gap in (stmt_gap / 4, -stmt_gap):
        narrow = _custom_pair(txn_gap_us=gap)
        assert "more than the whole transaction's measured gap" in narrow["sentence"]


def test_plan_conditions_lose_their_literals() -> None:
    """A MariaDB plan of a sampled statement quotes its constants in attached_condition: stored as a fingerprint
    (node filter and raw plan) unless the run keeps literals; PostgreSQL's $1 conditions are unchanged."""
    raw = _plan("mariadb1011_all.json")
    plan = StatementPlan(method="explain", nodes=tuple(my_plan_nodes(raw)))
    assert "'none'" in plan.nodes[0].filter
    ctx = CollectorContext(target=parse_target("m=mysql://u@h:3306/"), artifacts=Path("/nonexistent"))
    clean, clean_raw = without_literals(plan, raw, ctx.statement_text)
    assert clean.nodes[0].filter == "dbdiag.sbtest1.pad = ?"
    assert "'none'" not in json.dumps(clean_raw) and "dbdiag.sbtest1.pad = ?" in json.dumps(clean_raw)
    kept = CollectorContext(target=ctx.target, artifacts=ctx.artifacts, keep_literals=True)
    assert without_literals(plan, raw, kept.statement_text) == (plan, raw)
    pg_raw = _plan("pg18_index_scan.json")
    pg = StatementPlan(nodes=tuple(pg_plan_nodes(pg_raw)))
    pg_ctx = CollectorContext(target=parse_target("p=postgresql://u@h/db"), artifacts=Path("/nonexistent"))
    assert without_literals(pg, pg_raw, pg_ctx.statement_text) == (pg, pg_raw)


def test_plan_errors_quote_no_literals() -> None:
    """A server's EXPLAIN error quotes the statement (MySQL "near '...'") or a value (PostgreSQL): fingerprints."""
    my = CollectorContext(target=parse_target("m=mysql://u@h:3306/"), artifacts=Path("/nonexistent"))
    pg = CollectorContext(target=parse_target("p=postgresql://u@h/db"), artifacts=Path("/nonexistent"))
    near = "You have an error in your SQL syntax; check the manual near 'WHERE c = 'SECRET-1' LIMIT 5' at line 1"
    assert error_without_literals(near, my.statement_text) == \
        "You have an error in your SQL syntax; check the manual near 'WHERE c = ? LIMIT ?' at line 1"
    assert error_without_literals('invalid input syntax for type integer: "SECRET-2"', pg.statement_text) == \
        "invalid input syntax for type integer: ?"
    assert error_without_literals("Table 'db.t' doesn't exist", my.statement_text) == "Table 'db.t' doesn't exist"
    kept = CollectorContext(target=my.target, artifacts=my.artifacts, keep_literals=True)
    assert error_without_literals(near, kept.statement_text) == near


def test_plans_that_read_a_table_differently_are_said() -> None:
    b = _saved()
    (custom,) = [c for c in compare_statements(b) if c["workload"] == "custom"]
    (scan,) = [r for r in custom["rows"] if "count(*)" in r["text"].lower()]
    (look,) = [r for r in custom["rows"] if "where id" in r["text"].lower()]
    # Both engines scan sbtest1 for count(*) and use the key for the lookup: the same access, nothing said.
    assert scan["plan_difference"] == "" and look["plan_difference"] == ""
    raw = {r["target"]: ResultRow.from_dict(r).step_statements for r in b.results if r["workload"] == "custom"}
    pg = next(s for s in raw["pg"].statements if "count(*)" in s.text.lower())
    my_look = next(s for s in raw["my"].statements if "where id" in s.text.lower())
    said = plan_difference("q", "pg", pg, "my", my_look)  # a full scan against a key lookup of one table
    assert said == "The plans differ for 'q': pg reads sbtest1: full scan; my reads sbtest1: index", said
    assert plan_difference("q", "pg", pg, "my", None) == ""


def test_the_comparison_says_a_plan_difference_right_after_its_headline() -> None:
    """The saved run's lookups use the key on both engines: the pair's sentences say nothing of plans. With
    MariaDB's lookup plan made a full read of sbtest1 (as without the primary key), the comparison says so
    second, before the time components, and the report's verdict (its first two sentences) carries it."""
    b = _saved()
    (same,) = [e for e in compare(b) if e["workload"] == "custom"]
    assert not [x for x in same["sentences"] if "plans differ" in x], same["sentences"]
    b = copy.deepcopy(b)
    (row,) = [r for r in b.results if r["workload"] == "custom" and r["target"] == "my"]
    (look,) = [x for x in row["statements"]["statements"] if "where id" in x["text"].lower()]
    look["plan"]["nodes"][0].update(node="ALL", full_scan=True)
    (e,) = [e for e in compare(b) if e["workload"] == "custom"]
    assert e["sentences"][1] == "The plans differ for 'SELECT c FROM dbdiag.sbtest1 WHERE id = $1': pg reads " \
        "sbtest1: index; my reads sbtest1: full scan.", e["sentences"]
    assert [x for x in e["sentences"] if "plans differ" in x] == [e["sentences"][1]]
    (pair,) = pair_lines([e])
    assert pair["sentences"][1] == e["sentences"][1]
