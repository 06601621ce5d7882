"""The program language's control flow and result reading (client-side TPC-C's needs), without a server: small
Python expressions compiled against Python's own evaluation, what the checker refuses, and the reference
interpreter's loops, sort, string building and result parsing. The C side's agreement on the same programs is
in tests/integration/test_native_executor.py (the fuzz) and test_tpcc_native.py (the same transactions).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diag.core.errors import DbError
from workloads.native import opcodes as op
from workloads.tpcc import tpcc_prog
from workloads.native.program import Draw, Param, Program, Unsupported, compile_py, reference_txn, seed_state
from workloads.native.progref import cents, parse_scaled


def _run(p: Program, results: Sequence[Sequence[Sequence[object]]] = (), seed: int = 1,
         extra: Counter[str] | None = None) -> tuple[list[list[object]], int]:
    """One reference transaction of ``p``: statement 0 answers ``results[k]`` at its k-th run, the last
    statement (``SELECT ?, ...``) records its parameters. (parameters of each recording, statements sent)."""
    got: list[list[object]] = []
    answers = iter(results)

    def record(args: Sequence[object]) -> Sequence[Sequence[object]]:
        got.append(list(args))
        return ()
    runs = [lambda args: next(answers)] * (len(p.stmts) - 1) + [record]
    p.check()
    sent = reference_txn(p, runs, lambda sql: None, Draw(seed_state(seed)), [0] * len(p.stmts), extra)()
    return got, sent


def _emit_values(p: Program, names: Sequence[str]) -> None:
    p.execute("SELECT " + ", ".join("?" for _ in names), [Param(p.var(n)) for n in names])


EXPRS = ["a + b * 3", "a // b", "a % b", "a | b", "a < b", "a <= b", "a > b", "a >= b", "a == b", "a != b",
         "-a + abs(b)", "min(a, b, 4)", "max(a, b) - (a < b) * 7", "(a >= 0) * a // 2"]


@settings(max_examples=150, deadline=None)
@given(a=st.integers(-10**6, 10**6), b=st.integers(-10**6, 10**6).filter(bool))
def test_compiled_expressions_equal_python(a: int, b: int) -> None:
    p = Program()
    p.let("a", str(a))
    p.let("b", str(b))
    for i, e in enumerate(EXPRS):
        p.let(f"e{i}", e)
    _emit_values(p, [f"e{i}" for i in range(len(EXPRS))])
    got, sent = _run(p)
    assert sent == 1
    assert got == [[int(eval(e, {}, {"a": a, "b": b})) for e in EXPRS]]  # noqa: S307 (the test's own text)


def test_compile_py_refuses_what_it_does_not_know() -> None:
    for src in ("a ** 2", "a < b < c", "f(1)", "a / b", "'x'", "a and b", "rnd(1)"):
        with pytest.raises(Unsupported):
            compile_py(src, lambda n: 0)


def test_a_loop_draws_sorts_and_indexes() -> None:
    """Draw n records of (key, payload) into an array, sort them, read them back in order: as sorted() does."""
    p = Program()
    p.let("n", "rnd(5, 15)")
    p.array("L", 30)
    p.let("i", "0")
    p.label("draw")
    p.store_at("L", "2 * i", "rnd(1, 5)")
    p.store_at("L", "2 * i + 1", "rnd(1, 1000)")
    p.let("i", "i + 1")
    p.jump_unless("i == n", "draw")
    p.sort("L", 2, "n")
    p.let("i", "0")
    p.label("out")
    p.let("k", "at(L, 2 * i)")
    p.let("v", "at(L, 2 * i + 1)")
    _emit_values(p, ["k", "v"])
    p.let("i", "i + 1")
    p.jump_unless("i == n", "out")
    for seed in range(20):
        got, sent = _run(p, seed=seed)
        d = Draw(seed_state(seed))
        n = d.uniform(5, 15)
        recs = [[d.uniform(1, 5), d.uniform(1, 1000)] for _ in range(n)]
        assert got == sorted(recs) and sent == n


def test_results_rows_text_format_and_tallies() -> None:
    """The middle row of a by-name result, a price in cents, a NULL sum, a string compare and a cut format."""
    p = Program()
    p.execute("SELECT c_id FROM c WHERE last = ?", [Param(p.uniform("x", 1, 1))])
    p.let("nrows", "rows()")
    p.read("mid", 0, row="(rows() - 1) // 2")
    p.execute("SELECT price, credit, total FROM t WHERE x = ?", [Param(p.var("x"))])
    p.read("price", 0, scale=2)
    p.read("total", 2, scale=2)
    p.read_text(0, 1)
    p.expr("bc", [op.OP_SEQ, 0, p.literal("BC")])
    p.jump_unless("bc", "skip")
    p.tally("bad credit")
    p.label("skip")
    p.fmt(1, 11, [(op.F_INT, "mid"), (op.F_LIT, " "), (op.F_CENTS, "price"), (op.F_LIT, " | "), (op.F_SREG, 0)])
    p.execute("SELECT ?, ?, ?, ?, ?", [Param(p.var("nrows")), Param(p.var("mid")), Param.cents(p.var("price")),
                                       Param(p.var("total")), Param.sreg(1)])
    extra: Counter[str] = Counter()
    got, sent = _run(p, [[(b"7",), (b"9",), (b"4",), (b"2",)], [(b"12.345", b"BC", None)]], extra=extra)
    assert got == [[4, 9, "12.34", 0, "9 12.34 | B"]] and sent == 3 and extra == Counter({"bad credit": 1})
    # the cut of a format does not split a UTF-8 character (the C side backs off the same way)
    q = Program()
    q.fmt(0, 4, [(op.F_LIT, "abcé")])
    q.execute("SELECT ?", [Param.sreg(0)])
    assert _run(q)[0] == [["abc"]]


@pytest.mark.parametrize("text,scale,value", [
    ("12.34", 2, 1234), ("12.345", 2, 1234), ("-0.5", 2, -50), ("7", 2, 700), (None, 2, 0), (b"15", 0, 15),
    ("+3.", 1, 30), (".25", 2, 25), ("0000000000000000000001", 0, 1), ("999999999999999999", 0, 10**18 - 1)])
def test_numbers_read_from_results(text: object, scale: int, value: int) -> None:
    assert parse_scaled(text, scale) == value


@pytest.mark.parametrize("text,scale", [("abc", 0), ("1e5", 0), (".", 0), ("", 0), ("-", 0), ("1.2.3", 1),
                                         ("1000000000000000000", 0), ("99999999999999999", 2), (" 1", 0)])
def test_what_is_not_a_number_is_a_script_error(text: str, scale: int) -> None:
    with pytest.raises(DbError) as e:
        parse_scaled(text, scale)
    assert (e.value.code, e.value.kind) == ("script", "other")


def test_cents_text() -> None:
    assert [cents(v) for v in (0, 5, 100, 123456, -1, -1234)] == ["0.00", "0.05", "1.00", "1234.56", "-0.01",
                                                                   "-12.34"]


def test_a_loop_that_never_ends_is_an_error() -> None:
    p = Program()
    p.label("top")
    p.jump("top")
    p.execute("SELECT 1", [])
    with pytest.raises(DbError, match="jumps"):
        _run(p)


@pytest.mark.parametrize("words,names", [
    ([op.OP_JMP, 1, op.OP_CONST, 1, op.OP_STORE, 0], 1),               # into the middle of an instruction
    ([op.OP_CONST, 1, op.OP_JMP, 4, op.OP_STORE, 0], 1),               # a jump from a non-empty stack
    ([op.OP_JMP, 4, op.OP_CONST, 1, op.OP_CONST, 2, op.OP_ADD, op.OP_STORE, 0], 1),  # to a depth of 1
    ([op.OP_JMP, 99], 0),                                              # past the end
    ([op.OP_JZ, 0], 0),                                                # nothing to test
    ([op.OP_CONST, 0, op.OP_STOREX, 0], 1),                            # one value for two
    ([op.OP_CONST, 0, op.OP_COL, 40, 0, op.OP_STORE, 0], 1),           # column past MAX_COLS
    ([op.OP_CONST, 0, op.OP_COL, 0, 19, op.OP_STORE, 0], 1),           # scale past MAX_SCALE
    ([op.OP_CONST, 0, op.OP_SCOL, 0, 8], 0),                           # no string register 8
    ([op.OP_TALLY, 8], 0),
    ([op.OP_FMT, 0, 10, 1, op.F_LIT, 0], 0),                           # no pool 0
    ([op.OP_FMT, 0, 2000, 0], 0),                                      # longer than MAX_STR
    ([op.OP_CONST, 1, op.OP_SORT, 0, 2], 1),                           # records wider than the variables
    ([op.OP_SEQ, 0, 0, op.OP_STORE, 0], 1),                            # no pool 0
])
def test_check_refuses_bad_flow(words: list[int], names: int) -> None:
    p = Program(names=[f"v{i}" for i in range(names)], words=words)
    with pytest.raises(Unsupported):
        p.check()


def test_check_refuses_a_parameter_both_integer_and_string_and_a_missing_label() -> None:
    p = Program()
    p.execute("SELECT ?", [Param(p.uniform("x", 1, 2))])
    p.execute("SELECT ?", [Param.cents(p.var("x"))])
    with pytest.raises(Unsupported, match="integer and a string"):
        p.check()
    q = Program()
    q.jump("nowhere")
    with pytest.raises(Unsupported, match="nowhere"):
        q.check()


@pytest.mark.parametrize("scale,index", [(0.05, 0), (1, 0), (3, 2), (10, 7)])
def test_tpcc_client_program_fits_the_c_limits_and_draws_its_kind_first(scale: float, index: int) -> None:
    """The client-side TPC-C program at one and at several warehouses (the remote-warehouse paths): it passes the
    check within the C side's limits, and its first draw is the type 1..100 (what --think's keying time reads
    from the generator's state, tpcc_sp.next_kind)."""
    p = tpcc_prog.program(scale, index)
    assert len(p.stmts) <= op.MAX_STMTS and len(p.words) <= op.MAX_PROG and len(p.names) <= op.MAX_VARS
    assert p.branches and p.tallies == ["new_order", "rollback"]
    first = next(pc for o, pc in p.ops() if o == op.OP_RANDOM)
    assert p.words[first - 4: first] == [op.OP_CONST, 1, op.OP_CONST, 100]
    assert p.words[first + 1: first + 3] == [op.OP_STORE, p.var("kind")]
    remote = any(n == "rw" for n in p.names)
    assert remote == (tpcc_prog.Sizes.of(scale).warehouses > 1)
