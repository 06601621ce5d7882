"""Custom script parsing, statement rendering, histograms and option checks (no server)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diag.core.engines import ENGINES, Engine
from diag.core.errors import DbError, UsageError
from workloads import hist
from workloads import tables
from workloads.engines import workload_parts
from workloads.load import RowFormat
from workloads.pgbench import pgbench_dataset
from workloads.sysbench import sbtest_dataset
from workloads.custom import SetCmd, SqlCmd, parse_script, parse_text
from workloads.driver import WORKLOADS, DriverOptions, validate
from workloads.clients.sql import Stmt, my_literal, pg_literal


def _eval(cmds: list, seed: int = 1) -> dict[str, int]:
    env: dict[str, int] = {}
    rnd = random.Random(seed).random
    for c in cmds:
        if isinstance(c, SetCmd):
            env[c.name] = c.fn(env, rnd)
    return env


def test_script_sets_and_statements() -> None:
    cmds = parse_text("-- a comment\n\\set aid random(1, 100000 * 10)\n\\set d :aid / 7 + abs(-3)\n"
                      "BEGIN;\nUPDATE dbdiag.t SET v = v + :d\n  WHERE id = :aid;\nSELECT x::int FROM t WHERE id = :aid;\n"
                      "COMMIT;\n", "s.sql")
    sql = [c for c in cmds if isinstance(c, SqlCmd)]
    assert [c.line for c in sql] == [4, 5, 7, 8]
    assert sql[1].params == ("d", "aid") and sql[1].stmt.nparams == 2
    assert sql[2].stmt.numbered() == "SELECT x::int FROM t WHERE id = $1"  # a ::cast is not a variable
    assert sql[0].control and sql[3].control and not sql[1].control
    env = _eval(cmds)
    assert 1 <= env["aid"] <= 1_000_000 and env["d"] == env["aid"] // 7 + 3


@pytest.mark.parametrize("text,line,what", [
    ("\\set a random(1, 10)\n\\set b random(1,\n", 2, "cannot parse"),
    ("\\set a 1\nSELECT :b;\n", 2, "not set"),
    ("\\sleep 10ms\n", 1, "unknown meta-command"),
    ("\\set a foo(1)\nSELECT 1;\n", 1, "unknown function"),
    ("SELECT 1;\nSELECT 2\n", 2, "not terminated"),
    ("\\set 1a 5\nSELECT 1;\n", 1, "expected \\set NAME"),
    ("SELECT ?;\n", 1, ":name variables"),
    ("\\set a random(1)\nSELECT 1;\n", 1, "two arguments"),
])
def test_script_errors_name_file_and_line(tmp_path: Path, text: str, line: int, what: str) -> None:
    f = tmp_path / "bad.sql"
    f.write_text(text)
    with pytest.raises(UsageError) as ei:
        parse_script(str(f))
    assert str(ei.value).startswith(f"{f}:{line}: ") and what in str(ei.value)


def test_missing_script_and_validate(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read script"):
        parse_script(str(tmp_path / "nope.sql"))
    with pytest.raises(UsageError, match="needs --script"):
        validate(["custom"], DriverOptions())
    with pytest.raises(UsageError, match="unknown workload 'oltp'"):
        validate(["oltp"], DriverOptions())
    with pytest.raises(UsageError, match="--clients"):
        validate(["point-select"], DriverOptions(clients=(0,)))
    with pytest.raises(UsageError, match="--isolation"):
        validate(["point-select"], DriverOptions(isolation="snapshot"))
    with pytest.raises(UsageError, match="--protocol"):
        validate(["point-select"], DriverOptions(protocol="binary"))
    bad = tmp_path / "x.sql"
    bad.write_text("\\set a random(1, 2)\n\nSELECT :a\n")
    with pytest.raises(UsageError, match=r"x\.sql:3: "):
        validate(["custom"], DriverOptions(script=str(bad)))
    validate(list(WORKLOADS[:5]), DriverOptions(clients=(1, 2)))


def test_expression_semantics_follow_pgbench() -> None:
    cmds = parse_text("\\set a -7 / 2\n\\set b 7 % 3\n\\set c least(:a, 5) + greatest(1, 2, 3)\n"
                      "\\set d abs(:a) * -(2)\nSELECT :a, :b, :c, :d;\n")
    assert _eval(cmds) == {"a": -3, "b": 1, "c": 0, "d": -6}  # integer division truncates toward zero
    with pytest.raises(DbError, match="division by zero"):
        _eval(parse_text("\\set a 1 / 0\nSELECT :a;\n"))


def test_random_bounds_checked_at_run_time() -> None:
    cmds = parse_text("\\set a random(5, 1)\nSELECT :a;\n")
    with pytest.raises(DbError, match="upper bound"):
        _eval(cmds)


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_script_parser_never_crashes(text: str) -> None:
    try:
        parse_text(text, "f.sql")
    except UsageError as e:
        assert str(e).startswith("f.sql")


def test_stmt_forms_and_literals() -> None:
    s = Stmt.parse("SELECT c FROM t WHERE id BETWEEN ? AND ? AND x LIKE 'a%'")
    assert s.numbered() == "SELECT c FROM t WHERE id BETWEEN $1 AND $2 AND x LIKE 'a%'"
    assert s.qmarks() == "SELECT c FROM t WHERE id BETWEEN ? AND ? AND x LIKE 'a%'"
    assert s.template() % ("1", "2") == "SELECT c FROM t WHERE id BETWEEN 1 AND 2 AND x LIKE 'a%'"
    assert pg_literal("it's") == "'it''s'" and pg_literal(None) == "NULL" and pg_literal(3) == "3"
    assert my_literal("a\\'b") == "'a\\\\\\'b'" and my_literal(2.5) == "2.5"


def test_histograms_merge_exactly() -> None:
    rng = random.Random(3)
    a = [rng.randint(10_000, 5_000_000) for _ in range(5000)]
    b = [rng.randint(10_000, 50_000_000) for _ in range(3000)]
    merged = hist.new()
    hist.record(merged, hist.fold(a))
    hist.record(merged, hist.fold(b))
    whole = hist.new()
    hist.record(whole, hist.fold(a + b))
    assert merged.get_total_count() == 8000
    assert hist.summary_ms(merged) == hist.summary_ms(whole)
    s = hist.summary_ms(merged)
    assert s["max"] == pytest.approx(max(a + b) / 1e6, rel=1e-3)
    assert s["p50"] <= s["p95"] <= s["p99"] <= s["p999"] <= s["max"]
    back = hist.decode(hist.encode(merged))
    assert back.get_total_count() == 8000
    assert hist.summary_ms(hist.new()) == {"p50": 0.0, "p95": 0.0, "p99": 0.0, "p999": 0.0, "max": 0.0}


@pytest.mark.parametrize("text,shape", [
    ("\\set aid random(1, 100000 * 1)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n", (1, 100000)),
    ("\\set aid random(3, least(5, 9))\nSELECT 1 FROM t WHERE id = :aid;\n", (3, 5)),
    ("\\set aid random(1, 10) + 1\nSELECT 1 FROM t WHERE id = :aid;\n", None),       # not a bare random()
    ("\\set n 10\n\\set aid random(1, :n)\nSELECT 1 FROM t WHERE id = :aid;\n", None),  # two \set lines
    ("\\set aid random(1, 10)\nSELECT 1 FROM t WHERE id = :aid OR id = :aid;\n", None),  # two parameters
    ("\\set aid random(1, 10)\nBEGIN;\n", None),                                      # transaction control
    ("\\set aid random(1, random(2, 3))\nSELECT 1 FROM t WHERE id = :aid;\n", None),  # bounds drawn per run
    ("\\set aid random(10, 1)\nSELECT 1 FROM t WHERE id = :aid;\n", None),            # fails at run time instead
])
def test_keyed_shape_only_for_pgbench_s_scripts(text: str, shape: tuple[int, int] | None) -> None:
    """Only a script with pgbench -S's shape takes the driver's point-lookup path."""
    from workloads.custom import Custom

    w = Custom("")
    w.cmds = parse_text(text)
    got = w.keyed_shape()
    assert (got[:2] if got else None) == shape


@pytest.mark.parametrize("engine", ENGINES, ids=[e.name for e in ENGINES])
def test_every_engine_has_workload_clients_and_a_loader(engine: Engine) -> None:
    """The per-engine registries of the workloads layer cover every engine, for every driver it may pick."""
    parts = workload_parts(engine)
    assert {d for d, _ in engine.drivers} <= set(parts.clients)
    assert all(cls.engine == engine.name for cls in parts.clients.values())
    assert parts.load_table is not None and engine.load_container


def test_sbtest_rows_have_their_own_c_and_pad_in_no_id_order() -> None:
    """As sysbench's random strings: every c and pad differs (PostgreSQL then keeps n_distinct -1 for c, as on
    sysbench's table; a pool of 1,009 strings gave 1,009), with sysbench's lengths, and sorting a 100-row id
    range by c is not the id order (ORDER BY c sorts as much as on random strings)."""
    rows = list(sbtest_dataset(2.5).tables[0].rows())  # 250,000 rows: 248 blocks of the 1,009-string pool
    assert len(rows) == 250_000
    assert len({r[2] for r in rows}) == len(rows) and len({r[3] for r in rows}) == len(rows)
    assert {len(r[2]) for r in rows} == {119} and {len(r[3]) for r in rows} == {59}
    assert all(r[2][11] == "-" and r[2][:11].isdigit() for r in rows[:2000])
    for lo in (0, 950, 123_456):  # within a block, across two blocks, far in
        ids = [r[0] for r in sorted(rows[lo:lo + 100], key=lambda r: r[2])]
        in_order = sum(b == a + 1 for a, b in zip(ids, ids[1:]))
        assert in_order < 10, (lo, in_order)  # about 1 expected for random strings


def test_point_lookup_rows_are_the_same_in_both_row_formats() -> None:
    """The fast chunk formatters of sbtest and pgbench_accounts give the generic path's rows in each format."""
    for ds in (sbtest_dataset(0.01), pgbench_dataset(0.01)):
        t = next(t for t in ds.tables if t.chunks is not None)
        assert t.rows is not None
        for fmt in RowFormat:
            sep = "," if fmt is RowFormat.VALUES else ""  # VALUES chunks are joined by commas; COPY lines end in \n
            fast = sep.join(text for _, text in t.chunks(fmt))
            generic = sep.join(text for _, text in tables._GENERIC[fmt](t.rows()))
            assert fast == generic and sum(n for n, _ in t.chunks(fmt)) == t.count, (t.name, fmt)
