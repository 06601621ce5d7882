"""The native executor (workloads/native/_native.c) on real PostgreSQL and MariaDB servers.

The Python loop is the reference: the same program run through a Python client with the same generator
(:func:`workloads.native.program.reference_txn`) must send the same statements with the same parameters, so
the rows each statement returned and the rows written are equal, transaction for transaction. A bad
program is a ValueError from the C loader, never a crash (fuzzed), and failures come back as the same
error classes as the Python loop's.
"""

from __future__ import annotations

import threading
import time
from array import array
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diag.core.bundle import BundleWriter
from diag.core.db import Session
from diag.core.errors import DbError
from diag.core.schema import ResultRow
from diag.core.targets import Target
from workloads import load as wload
from workloads.native import nativelib
from workloads.native.nativelib import _native as c_module
from workloads.base import ClientCtx
from workloads.clients.clientbase import Client
from workloads.clients.client import client_driver_text, fastest_driver, open_client
from workloads.custom import Custom
from workloads.driver import DriverOptions
from tests.sweep import sweep_rows
from workloads.insert import INSERT_SQL, Insert, insert_dataset
from workloads.native.native import NativeClient, open_native
from workloads.pgbench import ReadWrite, pgbench_dataset
from workloads.native.opcodes import (F_CENTS, F_INT, F_LIT, F_SREG, OP_COL, OP_FMT, OP_JMP, OP_JZ, OP_ROWS, OP_SCOL,
                               OP_SEQ, OP_SORT, OP_STOREX, OP_TALLY, OP_VARX, P_CENTS, P_INT, P_SREG)
from workloads.native.program import (OP_ABS, OP_ADD, OP_CONST, OP_DIV, OP_EXEC, OP_FDIV, OP_GREATEST, OP_LEAST, OP_MOD,
                               OP_MUL, OP_NEG, OP_RANDOM, OP_SIMPLE, OP_STORE, OP_SUB, OP_VAR, Draw, Param, Program,
                               Unsupported, reference_txn, seed_state)
from workloads.clients.sql import Stmt
from workloads.sysbench import POINT_SQL, RANGE_SQL, PointSelect, ReadOnly, sbtest_dataset, sbtest_rows

SCALE = 0.05
TXNS = 150


@pytest.fixture(scope="module", params=["postgres", "mysql"])
def target(request: pytest.FixtureRequest) -> Target:
    srv = request.getfixturevalue("pg_server" if request.param == "postgres" else "my_server")
    t = srv.target()
    assert nativelib.available(t.dbms), "the native executor (workloads/native/_native.c) is not built: pip install -e ."
    with Session(t, statement_timeout_ms=0) as s:
        wload.ensure_schema(s)
        for ds in (sbtest_dataset(SCALE), pgbench_dataset(SCALE), insert_dataset(SCALE)):
            if not wload.is_loaded(s, ds):
                wload.load(s, ds, out=None)
    return t


def _native(target: Target, prog: Program, seed: int) -> NativeClient:
    nc = open_native(target, "", fastest_driver(target.dbms), "read-committed", prog, seed)
    assert nc is not None
    return nc


def _run_native(target: Target, prog: Program, seed: int, n: int) -> tuple[int, ...]:
    """n transactions in one C call (the buffer's size ends it); rows per statement."""
    nc = _native(target, prog, seed)
    try:
        buf = array("q", bytes(8 * n))
        t0 = time.perf_counter_ns()
        done, t1, err = nc.batch(t0, t0 + 10**13, buf)
        assert (done, err) == (n, None)
        assert all(v > 0 for v in buf) and sum(buf) == t1 - t0  # per-transaction latencies, back to back
        stats = nc.stats()
        assert all(execs > 0 and ns > 0 for execs, _, ns in stats)
        return tuple(rows for _, rows, _ in stats)
    finally:
        nc.close()


def _run_reference(target: Target, prog: Program, seed: int, n: int) -> tuple[int, ...]:
    c = open_client(target, "prepared", "read-committed")
    try:
        runs = [c.prepare(s).run for s in prog.stmts]
        rows = [0] * len(runs)
        txn = reference_txn(prog, runs, c.execute, Draw(seed_state(seed)), rows)
        assert sum(txn() for _ in range(n)) == n * prog.statements
        return tuple(rows)
    finally:
        c.close()


def _ctx(seed: int) -> ClientCtx:
    return ClientCtx(0, 1, SCALE, seed=seed)


def test_read_only_rows_equal_the_python_reference(target: Target) -> None:
    prog = ReadOnly().program(_ctx(3))
    assert prog.statements == 16  # what the Python loop's txn() counts: BEGIN, 10 points, 4 ranges, COMMIT
    native = _run_native(target, prog, 11, TXNS)
    assert native == _run_reference(target, prog, 11, TXNS)
    # each point select finds its row, each range 100 rows (distinct c values), the sum one row
    assert native == (10 * TXNS, 100 * TXNS, TXNS, 100 * TXNS, 100 * TXNS)


def test_point_select_rows_equal_the_python_reference(target: Target, tmp_path: Path) -> None:
    """point-select and a pgbench -S-shaped script (what the retired point-lookup C loop ran) are programs:
    one draw, one lookup that finds its row, on both paths."""
    prog = PointSelect().program(_ctx(3))
    assert prog.statements == 1 and [s.qmarks() for s in prog.stmts] == [POINT_SQL]
    assert _run_native(target, prog, 13, TXNS) == _run_reference(target, prog, 13, TXNS) == (TXNS,)
    script = tmp_path / "s.sql"
    script.write_text(f"\\set id random(1, {sbtest_rows(SCALE)})\nSELECT c FROM dbdiag.sbtest1 WHERE id = :id;\n")
    wl = Custom(str(script))
    assert wl.keyed_shape() is not None  # the Python loop's fast path for the same script
    prog = wl.program(_ctx(3))
    assert prog is not None and prog.statements == 1
    assert _run_native(target, prog, 17, TXNS) == _run_reference(target, prog, 17, TXNS) == (TXNS,)


def _status(s: Session, names: tuple[str, ...]) -> dict[str, int]:
    return {r["Variable_name"]: int(r["Value"]) for r in s.query("SHOW GLOBAL STATUS") if r["Variable_name"] in names}


@pytest.mark.parametrize("target", ["mysql"], indirect=True)  # MySQL's command counters and table collations
def test_mysql_sends_what_sysbench_sends_on_tables_of_the_servers_charset(target: Target) -> None:
    """MariaDB: BEGIN and COMMIT go as prepared statements (COM_STMT_EXECUTE, as sysbench's
    oltp_read_only sends them), and the tables have the server's default collation, as sysbench's."""
    assert target.engine == "mysql"
    with Session(target, statement_timeout_ms=0) as s:
        bad = s.query("SELECT t.TABLE_NAME AS name FROM information_schema.TABLES t JOIN information_schema.SCHEMATA d "
                      "ON d.SCHEMA_NAME = t.TABLE_SCHEMA WHERE t.TABLE_SCHEMA = 'dbdiag' "
                      "AND t.TABLE_COLLATION <> d.DEFAULT_COLLATION_NAME")
        assert bad == [] and wload.is_loaded(s, insert_dataset(SCALE))
        server = s.query("SELECT @@character_set_server AS cs")[0]["cs"]
        other = "utf8mb4" if server != "utf8mb4" else "latin1"
        # a table of another charset (an older dbdiag made them utf8mb4): not loaded, so it is remade
        s.execute("CREATE TABLE dbdiag.charset_probe (id integer PRIMARY KEY)")
        try:
            probe = wload.Dataset("charset_probe", 1, 1, [wload.Table("charset_probe", "id integer", "id")])
            s.execute("INSERT INTO dbdiag.dbdiag_meta VALUES ('charset_probe', 1, '1')")
            assert wload.is_loaded(s, probe)
            s.execute(f"ALTER TABLE dbdiag.charset_probe CONVERT TO CHARACTER SET {other}")
            assert not wload.is_loaded(s, probe)
        finally:
            wload.drop(s, probe)
    prog = ReadOnly().program(_ctx(3))
    names = ("Com_stmt_execute", "Com_begin", "Com_commit", "Com_select")
    nc = _native(target, prog, 11)
    try:
        with Session(target, statement_timeout_ms=0) as s:  # one session: its own start is not counted
            before = _status(s, names)
            buf = array("q", bytes(8 * TXNS))
            t0 = time.perf_counter_ns()
            assert nc.batch(t0, t0 + 10**13, buf)[0] == TXNS
            after = _status(s, names)
    finally:
        nc.close()
    sent = {k: after[k] - before[k] for k in names}
    assert sent == {"Com_stmt_execute": 16 * TXNS, "Com_begin": TXNS, "Com_commit": TXNS, "Com_select": 14 * TXNS}


def test_statement_latencies_are_counted_per_statement(target: Target) -> None:
    """The C side's per-statement counts: every statement of every batched transaction once, under its
    label, short ones (< 1024 µs, binned) and long ones (a 1.5 ms sleep: kept exactly) alike; the retry
    path's single transactions are not counted; each drain empties them."""
    sleep = "SELECT pg_sleep(0.0015)" if target.dbms.name == "postgres" else "DO SLEEP(0.0015)"
    prog = Program()
    key = prog.uniform("id", 1, sbtest_rows(SCALE))
    prog.execute(POINT_SQL, [Param(key)])
    prog.simple(sleep)
    prog.execute(POINT_SQL, [Param(key)])
    nc = _native(target, prog, 19)
    try:
        n = 40
        buf = array("q", bytes(8 * n))
        t0 = time.perf_counter_ns()
        assert nc.batch(t0, t0 + 10**13, buf)[:2] != (0, 0)
        nc.txn()  # the retry path: not counted
        got = nc.statement_latency()
        assert set(got) == {POINT_SQL, sleep}
        assert sum(got[POINT_SQL].values()) == 2 * n and sum(got[sleep].values()) == n, got
        assert min(got[sleep]) >= 1500, got  # the long ones' exact path
        assert sum(c for us, c in got[POINT_SQL].items() if us < 1024) > n, got  # most point selects: binned
        # each transaction's latency is its statements' (one clock read per statement, none lost between)
        assert sum(buf) >= sum(us * c for counts in got.values() for us, c in counts.items()) * 1000
        assert nc.statement_latency() == {}
    finally:
        nc.close()


def test_a_looped_slow_statement_keeps_every_latency(target: Target) -> None:
    """A program's loop runs one statement more times than the C side's first store of long latencies holds
    (4,096 pairs; the batch guard bounds statements per transaction only without jumps): the store grows,
    every latency comes back exactly, nothing is written past its end (before the fix: a heap overflow)."""
    sleep = "SELECT pg_sleep(0.0011)" if target.dbms.name == "postgres" else "DO SLEEP(0.0011)"
    n = 4200
    prog = Program()
    prog.let("i", "0")
    prog.label("top")
    prog.simple(sleep)
    prog.add("i", "i", 1)
    prog.jump_unless(f"i == {n}", "top")
    nc = _native(target, prog, 23)
    try:
        buf = array("q", bytes(8))
        t0 = time.perf_counter_ns()
        assert nc.batch(t0, t0 + 10**13, buf)[::2] == (1, None)
        got = nc.statement_latency()[sleep]
        assert sum(got.values()) == n and min(got) >= 1000, (sum(got.values()), min(got))
        assert nc.sent() == n
    finally:
        nc.close()


def _balances(target: Target) -> Counter[int]:
    with Session(target, statement_timeout_ms=0) as s:
        rows = s.query("SELECT aid, abalance FROM dbdiag.pgbench_accounts WHERE abalance <> 0")
    return Counter({int(r["aid"]): int(r["abalance"]) for r in rows})


def _history(target: Target) -> Counter[tuple[int, int, int, int]]:
    with Session(target, statement_timeout_ms=0) as s:
        rows = s.query("SELECT tid, bid, aid, delta FROM dbdiag.pgbench_history")
    return Counter((int(r["tid"]), int(r["bid"]), int(r["aid"]), int(r["delta"])) for r in rows)


def test_read_write_changes_equal_the_python_reference(target: Target) -> None:
    """The same seed moves the same balances by the same deltas and writes the same history rows."""
    prog = ReadWrite().program(_ctx(5))
    assert prog.statements == 7  # BEGIN, 3 updates, a select, an insert, COMMIT: the Python loop's count
    b0, h0 = _balances(target), _history(target)
    native_rows = _run_native(target, prog, 21, TXNS)
    b1, h1 = _balances(target), _history(target)
    ref_rows = _run_reference(target, prog, 21, TXNS)
    b2, h2 = _balances(target), _history(target)
    assert native_rows == ref_rows == (0, TXNS, 0, 0, 0)  # the account select finds its row
    d1, d2 = b1.copy(), b2.copy()
    d1.subtract(b0)
    d2.subtract(b1)
    assert {k: v for k, v in d1.items() if v} == {k: v for k, v in d2.items() if v} != {}
    assert h1 - h0 == h2 - h1 and sum((h1 - h0).values()) == TXNS


def _inserted(target: Target, after_id: int) -> list[tuple[int, str]]:
    with Session(target, statement_timeout_ms=0) as s:
        rows = s.query(f"SELECT id, val, txt FROM dbdiag.insert_data WHERE id > {int(after_id)} ORDER BY id")
    return [(int(r["val"]), str(r["txt"])) for r in rows]


def _max_id(target: Target) -> int:
    with Session(target, statement_timeout_ms=0) as s:
        return int(s.query("SELECT COALESCE(MAX(id), 0) AS m FROM dbdiag.insert_data")[0]["m"])


def test_insert_rows_equal_the_python_reference(target: Target) -> None:
    prog = Insert().program(_ctx(7))
    start = _max_id(target)
    _run_native(target, prog, 31, TXNS)
    _run_reference(target, prog, 31, TXNS)
    rows = _inserted(target, start)  # in id order: the native client's, then the reference's
    first, second = rows[:TXNS], rows[TXNS:]
    assert len(first) == len(second) == TXNS and first == second
    assert len({txt for _, txt in first}) > TXNS // 2  # strings from the pool, not one repeated


SCRIPT = r"""-- every \set form the Python side knows
\set a random(1, 1000)
\set b (:a * 7 - 3) / 4
\set c -:a % 7
\set d least(:a, :b, 500) + greatest(1, :c)
\set e abs(-:a) // 3
BEGIN;
INSERT INTO dbdiag.native_custom (a, b, c, d, e) VALUES (:a, :b, :c, :d, :e);
SELECT COUNT(*) FROM dbdiag.native_custom WHERE a = :a;
COMMIT;
"""


def test_custom_script_values_equal_the_python_reference(target: Target, tmp_path: Path) -> None:
    script = tmp_path / "s.sql"
    script.write_text(SCRIPT)
    with Session(target, statement_timeout_ms=0) as s:
        s.execute("DROP TABLE IF EXISTS dbdiag.native_custom")
        s.execute("CREATE TABLE dbdiag.native_custom (a bigint, b bigint, c bigint, d bigint, e bigint, "
                  "n integer NOT NULL DEFAULT 0)")
    wl = Custom(str(script))
    prog = wl.program(_ctx(1))
    assert prog is not None and prog.statements == 4
    _run_native(target, prog, 41, TXNS)
    _run_reference(target, prog, 41, TXNS)
    with Session(target, statement_timeout_ms=0) as s:
        rows = [tuple(int(r[k]) for k in "abcde") for r in s.query("SELECT a, b, c, d, e FROM dbdiag.native_custom")]
    assert len(rows) == 2 * TXNS and Counter(rows[:TXNS]) == Counter(rows[TXNS:])
    # and the values are those of the Python \set evaluation (workloads.custom)
    for a, b, c, d, e in rows:
        env = {"a": a}
        sets = {cmd.name: cmd for cmd in wl.cmds if hasattr(cmd, "src")}
        for name, got in (("b", b), ("c", c), ("d", d), ("e", e)):
            env[name] = sets[name].fn(env, None)
            assert env[name] == got, (name, env, got)


def test_script_outside_the_subset_falls_back(target: Target, tmp_path: Path) -> None:
    script = tmp_path / "u.sql"
    script.write_text("\\set n random(1, 5)\nSET LOCAL lock_timeout = :n;\nSELECT 1;\n")
    with pytest.raises(Unsupported):
        Custom(str(script)).program(_ctx(1))


def test_errors_come_back_as_the_python_loops_classes(target: Target) -> None:
    prog = Program()  # a duplicate key: sbtest1 has every id of 1..5000
    prog.execute("INSERT INTO dbdiag.sbtest1 (id, k, c, pad) VALUES (?, 0, '', '')", [Param(prog.uniform("z", 1, 1))])
    nc = _native(target, prog, 1)
    try:
        with pytest.raises(DbError) as e:
            nc.txn()
        assert e.value.code == ("23505" if target.engine == "postgres" else "1062"), e.value
        bad = Program()
        bad.words = [1, 5, 1, 2, 13, 14, 0]  # random(5, 2): upper bound below the lower
        bad.names = ["x"]
        bad.execute("SELECT ?", [Param(0)])
    finally:
        nc.close()
    nc = _native(target, bad, 1)
    try:
        with pytest.raises(DbError, match="upper bound") as e:
            nc.txn()
        assert (e.value.code, e.value.kind) == ("script", "other")
    finally:
        nc.close()
    with pytest.raises(DbError) as e:
        _native(target, _one("SELECT nosuch FROM dbdiag.sbtest1 WHERE id = ?"), 1)
    assert e.value.kind != "lost" and e.value.code in ("42703", "1054")


def _one(sql: str) -> Program:
    p = Program()
    p.execute(sql, [Param(p.uniform("k", 1, 10))])
    return p


def test_lost_connection_is_lost_and_the_step_reconnects(target: Target, tmp_path: Path) -> None:
    """The server ends the native connection mid-step: the client counts it, connects again and goes on."""
    result: dict[str, Any] = {}

    def run() -> None:
        result["rows"] = sweep_rows(target, ["read-write"], DriverOptions(clients=(2,), duration_s=2.0, warmup_s=0.2,
                                                                          scale=SCALE), BundleWriter(tmp_path / "r"),
                                    progress=None)
    th = threading.Thread(target=run)
    th.start()
    time.sleep(1.2)
    with Session(target, statement_timeout_ms=0) as s:
        if target.engine == "postgres":
            s.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'dbdiag-workload'")
        else:
            for r in s.query("SELECT ID AS id FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() "
                             "AND USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1) AND COMMAND <> 'Daemon'"):
                try:
                    s.execute(f"KILL {int(r['id'])}")
                except DbError:
                    pass
    th.join(30)
    r = result["rows"][0]
    assert r["driver"].endswith("+ native executor"), r["driver"]
    assert r["reconnects"] >= 1 and r["transactions"] > 0, r
    assert r["errors"] and not r.get("server_lost"), r


@pytest.fixture(scope="module")
def fuzz_client(target: Target) -> Iterator[NativeClient]:
    base = Program()
    base.execute("SELECT ?", [Param(base.var("v"))])
    nc = _native(target, base, 1)
    yield nc
    nc.close()


_I64 = st.integers(-(1 << 63), (1 << 63) - 1)


@st.composite
def _expr(draw: Any, nvars: int, depth: int = 0) -> list[int]:
    """Words of a well-formed expression (one value on the stack)."""
    kind = draw(st.sampled_from(["const", "var", "bin", "un", "many"] if depth < 3 else ["const", "var"]))
    if kind == "const" or (kind == "var" and not nvars):
        return [OP_CONST, draw(st.one_of(st.integers(-5, 5), _I64))]
    if kind == "var":
        return [OP_VAR, draw(st.integers(0, nvars - 1))]
    if kind == "bin":
        op = draw(st.sampled_from([OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_RANDOM]))
        return draw(_expr(nvars, depth + 1)) + draw(_expr(nvars, depth + 1)) + [op]
    if kind == "un":
        return draw(_expr(nvars, depth + 1)) + [draw(st.sampled_from([OP_NEG, OP_ABS]))]
    k = draw(st.integers(1, 3))
    return [w for _ in range(k) for w in draw(_expr(nvars, depth + 1))] + \
        [draw(st.sampled_from([OP_LEAST, OP_GREATEST])), k]


@st.composite
def _program(draw: Any) -> tuple[list[int], int, int, int]:
    """(words, variables, texts, pools): a well-formed program, in half the cases with one word changed."""
    nvars, texts, pools = draw(st.integers(0, 3)), draw(st.integers(0, 2)), draw(st.integers(0, 2))
    words: list[int] = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["set", "exec", "simple"]))
        if kind == "set" and nvars:
            words += draw(_expr(nvars)) + [OP_STORE, draw(st.integers(0, nvars - 1))]
        elif kind == "simple" and texts:
            words += [OP_SIMPLE, draw(st.integers(0, texts - 1))]
        elif nvars:
            words += [OP_EXEC, 0, 1, draw(st.integers(0, pools)), draw(st.integers(0, nvars - 1))]
    if words and draw(st.booleans()):
        words[draw(st.integers(0, len(words) - 1))] = draw(st.one_of(st.integers(-3, 20), _I64))
    return words, nvars, texts, pools


@settings(max_examples=300, deadline=None)
@given(prog=_program())
def test_bad_programs_are_refused_not_crashed(fuzz_client: NativeClient, prog: tuple[list[int], int, int, int]) -> None:
    """Generated programs, well-formed or with one word changed: the Python check and the C loader agree
    on every one; a loaded one runs or fails with a DbError, never a crash."""
    nc = fuzz_client
    words, nvars, texts, pools = prog
    p = Program(stmts=[Stmt.parse("SELECT ?")], texts=["SELECT 1", "SELECT 2"][:texts],
                pools=[("x",), ("y", "z")][:pools], names=[f"v{i}" for i in range(nvars)], words=words)
    try:
        p.check()
        py_ok = True
    except Unsupported:
        py_ok = False
    try:
        c_module.load(nc.cap, p.packed(), tuple(t.encode() for t in p.texts),
                      tuple(tuple(s.encode() for s in pool) for pool in p.pools), nvars)
        c_ok = True
    except ValueError:
        c_ok = False
    assert py_ok == c_ok, (words, nvars, texts, pools)
    FUZZ_ACCEPTED[py_ok] += 1
    if c_ok:
        nc.program = p
        try:
            nc.txn()
        except DbError as e:
            assert e.code == "script" or e.kind == "other", e


FUZZ_ACCEPTED: Counter[bool] = Counter()


def test_the_fuzz_reached_both_paths(fuzz_client: NativeClient) -> None:
    """The generated programs above were both accepted and refused, often (run after them)."""
    assert FUZZ_ACCEPTED[True] > 50 and FUZZ_ACCEPTED[False] > 50, FUZZ_ACCEPTED
    FUZZ_ACCEPTED.clear()


_FLOW_KINDS = ["set", "exec", "read", "text", "fmt", "jump", "jz", "seq", "tally", "index", "sort", "simple"]


@st.composite
def _flow_program(draw: Any) -> tuple[list[int], int, int, int]:
    """(words, variables, texts, pools): blocks that leave the stack empty, with the control-flow and result
    opcodes (client-side TPC-C's), jumps forward to block boundaries; in half the cases one word changed."""
    nvars, texts, pools = draw(st.integers(1, 4)), draw(st.integers(0, 2)), draw(st.integers(1, 2))
    v = st.integers(0, nvars - 1)
    blocks: list[list[int]] = []
    pending: list[tuple[int, int]] = []  # (block, word) of jumps whose target is a later boundary
    for b in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(_FLOW_KINDS))
        if kind == "set":
            words = draw(_expr(nvars)) + [OP_STORE, draw(v)]
        elif kind == "exec":
            pk = draw(st.sampled_from([P_INT, P_CENTS, P_SREG, 1]))
            words = [OP_EXEC, 0, 1, pk, draw(st.integers(0, 7)) if pk == P_SREG else draw(v)]
        elif kind == "read":
            words = [OP_CONST, draw(st.integers(-1, 2)), OP_COL, draw(st.integers(0, 2)), draw(st.integers(0, 3)),
                     OP_STORE, draw(v)]
        elif kind == "text":
            words = [OP_ROWS, OP_CONST, 1, OP_SUB, OP_SCOL, 0, draw(st.integers(0, 7))]
        elif kind == "fmt":
            parts = [draw(st.sampled_from([(F_INT, 0), (F_CENTS, 0), (F_SREG, 1), (F_LIT, 0)])) for _ in range(3)]
            words = [OP_FMT, draw(st.integers(0, 7)), draw(st.integers(0, 30)), 3] + [w for p in parts for w in p]
        elif kind in ("jump", "jz"):
            pending.append((b, 1 if kind == "jump" else len(words := draw(_expr(nvars))) + 1))
            words = [OP_JMP, 0] if kind == "jump" else words + [OP_JZ, 0]
        elif kind == "seq":
            words = [OP_SEQ, draw(st.integers(0, 7)), 0, OP_STORE, draw(v)]
        elif kind == "tally":
            words = [OP_TALLY, draw(st.integers(0, 7))]
        elif kind == "index":
            words = [OP_CONST, draw(st.integers(-1, nvars)), OP_VARX, 0, OP_CONST, 3, OP_ADD, OP_CONST,
                     draw(st.integers(0, nvars)), OP_STOREX, 0] if nvars else []
        elif kind == "sort":
            words = [OP_CONST, draw(st.integers(0, nvars)), OP_SORT, 0, draw(st.integers(1, nvars))]
        else:
            words = [OP_SIMPLE, draw(st.integers(0, texts - 1))] if texts else []
        blocks.append(words)
    starts = [0]
    for words in blocks:
        starts.append(starts[-1] + len(words))
    for b, at in pending:
        blocks[b][at] = draw(st.sampled_from(starts[b + 1:]))
    out = [w for words in blocks for w in words]
    if out and draw(st.booleans()):
        out[draw(st.integers(0, len(out) - 1))] = draw(st.one_of(st.integers(-3, 40), _I64))
    return out, nvars, texts, pools


def _jumps_back(words: list[int]) -> bool:
    return any(op in (OP_JMP, OP_JZ) and words[pc + 1] <= pc for op, pc in Program(words=words).ops())


@settings(max_examples=400, deadline=None)
@given(prog=_flow_program())
def test_bad_flow_programs_are_refused_not_crashed(fuzz_client: NativeClient,
                                                  prog: tuple[list[int], int, int, int]) -> None:
    """As above with jumps, result reads, string registers, indexed variables and sorts: the Python check and
    the C loader agree; a loaded program without a backward jump runs (a backward one may loop to the jump
    limit: not run here) or fails with a DbError, never a crash."""
    nc = fuzz_client
    words, nvars, texts, pools = prog
    p = Program(stmts=[Stmt.parse("SELECT ?")], texts=["SELECT 1", "SELECT 2"][:texts],
                pools=[("1.5",), ("y", "z")][:pools], names=[f"v{i}" for i in range(nvars)], words=words)
    try:
        p.check()
        py_ok = True
    except Unsupported:
        py_ok = False
    try:
        c_module.load(nc.cap, p.packed(), tuple(t.encode() for t in p.texts),
                      tuple(tuple(s.encode() for s in pool) for pool in p.pools), nvars)
        c_ok = True
    except ValueError:
        c_ok = False
    assert py_ok == c_ok, (words, nvars, texts, pools)
    FLOW_ACCEPTED[py_ok] += 1
    if c_ok and not _jumps_back(words):
        nc.program = p
        try:
            nc.txn()
        except DbError as e:
            assert e.code == "script" or e.kind == "other", e


FLOW_ACCEPTED: Counter[bool] = Counter()


def test_the_flow_fuzz_reached_both_paths(fuzz_client: NativeClient) -> None:
    assert FLOW_ACCEPTED[True] > 50 and FLOW_ACCEPTED[False] > 50, FLOW_ACCEPTED
    FLOW_ACCEPTED.clear()


class Recording:
    """A real workload client whose prepared statements and text statements are recorded as the Python
    loop's transaction sends them (the database is real; only the calls are written down)."""

    def __init__(self, c: Any) -> None:
        self.c, self.log = c, []

    def prepare(self, sql: str | Stmt) -> Any:
        q = self.c.prepare(sql)
        run, log = q.run, self.log

        def recorded(params: Any) -> int:
            log.append((q.stmt, tuple(params)))
            return run(params)
        return type(q)(q.rows, q.stmt, recorded, q.name)

    def execute(self, sql: str) -> Any:
        self.log.append((sql, ()))
        return self.c.execute(sql)

    def begin(self) -> None:
        self.execute("BEGIN")

    def commit(self) -> None:
        self.execute("COMMIT")

    def keyed_txn(self, q: Any, lo: int, hi: int, rnd: Any) -> Any:
        """The drivers' point-lookup paths call the library directly; the generic one calls q.run."""
        return Client.keyed_txn(self, q, lo, hi, rnd)  # type: ignore[arg-type]


def _program_log(prog: Program, n: int) -> list[tuple[Any, tuple[Any, ...]]]:
    log: list[tuple[Any, tuple[Any, ...]]] = []

    def runner(stmt: Stmt) -> Any:
        def run(params: Any) -> int:
            log.append((stmt, tuple(params)))
            return 0
        return run
    txn = reference_txn(prog, [runner(s) for s in prog.stmts], lambda sql: log.append((sql, ())),
                        Draw(seed_state(5)), [0] * len(prog.stmts))
    for _ in range(n):
        txn()
    return log


@pytest.mark.parametrize("cls", [PointSelect, ReadOnly, ReadWrite, Insert], ids=lambda c: c.name)
def test_program_is_the_python_loops_transaction(target: Target, cls: type) -> None:
    """program() says what client()'s txn() does: the same statements in the same order, a parameter
    the program takes from one variable equal wherever the Python txn uses it, and values in the same
    ranges (the generators differ: Python's random against splitmix64)."""
    wl, n = cls(), 200
    prog = wl.program(_ctx(2))
    c = open_client(target, "prepared", "read-committed")
    try:
        rec = Recording(c)
        txn = wl.client(rec, _ctx(2)).txn
        assert sum(txn() for _ in range(n)) == n * prog.statements
    finally:
        c.close()
    ref = _program_log(prog, n)
    py = rec.log
    assert [s for s, _ in py] == [s for s, _ in ref]  # statement for statement
    # which parameters share a variable (between two stores into it), from the program's words
    per_txn = len(py) // n
    events: list[tuple[str, list[int]]] = []
    for op, pc in prog.ops():
        if op == OP_EXEC:
            k = prog.words[pc + 2]
            events.append(("stmt", prog.words[pc + 4: pc + 4 + 2 * k: 2]))
        elif op == OP_SIMPLE:
            events.append(("stmt", []))
        elif op == OP_STORE:
            events.append(("store", [prog.words[pc + 1]]))
    shared = 0
    for t in range(n):
        sent = iter(py[t * per_txn:(t + 1) * per_txn])
        seen: dict[int, Any] = {}
        for kind, vars_ in events:
            if kind == "store":
                seen.pop(vars_[0], None)
                continue
            _, params = next(sent)
            for v, val in zip(vars_, params):
                shared += v in seen
                assert seen.setdefault(v, val) == val, (t, v, val, seen[v])
    assert shared or cls is not ReadWrite  # read-write reuses aid, delta, tid and bid
    for i in range(per_txn):
        for j in range(len(py[i][1])):
            a = [p[j] for s, p in py[i::per_txn]]
            b = [p[j] for s, p in ref[i::per_txn]]
            if isinstance(a[0], int):
                lo, hi = min(min(a), min(b)), max(max(a), max(b))
                slack = (hi - lo) * 0.2 + 1
                assert abs(min(a) - min(b)) <= slack and abs(max(a) - max(b)) <= slack, (i, j, min(a), min(b))
            else:
                assert set(a) <= set(wl_pool(prog)) and set(b) <= set(wl_pool(prog)), (i, j)


def wl_pool(prog: Program) -> tuple[str, ...]:
    return tuple(s for pool in prog.pools for s in pool)


def test_result_row_and_start_up_line_name_the_loop_that_ran(target: Target, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Closed loop: "+ native executor" in the row and on the start-up line; a paced run (--rate) and
    DBDIAG_PY_LOOP=1 run the Python loop, and neither names a C loop."""
    def step(names: tuple[str, ...] = ("insert",), **kw: Any) -> dict:
        opts = DriverOptions(clients=(2,), duration_s=0.6, warmup_s=0.1, scale=SCALE, **kw)
        rows = sweep_rows(target, list(names), opts, BundleWriter(tmp_path / f"r{len(kw)}{len(str(kw))}"),
                          progress=None)
        return rows[0] if len(rows) == 1 else rows
    from_line = client_driver_text(target.dbms, "prepared", ["insert"])
    closed, ro = step(("insert", "read-only"))
    assert closed["driver"].endswith(" + native executor") and from_line == closed["driver"] + " for insert"
    assert closed["qps"] == closed["tps"] > 0 and closed["errors"] == {}
    # per-statement latencies, every batched statement of the measured part, in the row and the schema
    assert not ResultRow.from_dict(closed).extra and not ResultRow.from_dict(ro).extra
    assert list(closed["statement_latency_ms"]) == [INSERT_SQL]
    assert closed["statement_latency_ms"][INSERT_SQL]["count"] == closed["transactions"]
    st_ro = ro["statement_latency_ms"]
    assert set(st_ro) == {"BEGIN", "COMMIT", POINT_SQL, *RANGE_SQL} and ro["errors"] == {}
    assert st_ro[POINT_SQL]["count"] == 10 * ro["transactions"] and st_ro["BEGIN"]["count"] == ro["transactions"]
    assert 0 < st_ro[POINT_SQL]["p50"] <= st_ro[POINT_SQL]["p99"] <= st_ro[POINT_SQL]["max"]
    # the statements' medians add up to about the transaction's (within HDR's and the clock's slack)
    assert sum(v["p50"] for v in st_ro.values()) < 3 * ro["latency_ms"]["p50"] + 0.5
    paced = step(rate=100.0)
    assert " + " not in paced["driver"] and paced["transactions"] > 0, paced["driver"]
    assert client_driver_text(target.dbms, "prepared", ["insert"], paced=True) == paced["driver"]
    monkeypatch.setenv("DBDIAG_PY_LOOP", "1")
    python = step(max_tries=3)
    assert python["driver"] == paced["driver"] and python["transactions"] > 0
    assert "statement_latency_ms" not in python and "statement_latency_ms" not in paced
    assert client_driver_text(target.dbms, "prepared", ["insert"]) == python["driver"]
