"""Transaction programs for the native executor, without a server: the opcodes the C side reads, the
check every program passes before the C loader, ``\\set`` compilation against workloads.custom's own
evaluation, which workloads have a program, and what the start-up line says.

The runs on real servers (same rows as the Python reference, fuzzed loader, error classes) are in
tests/integration/test_native_executor.py.
"""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diag.core.engines import ENGINES, Engine
from workloads import custom, insert, pgbench, sysbench
from workloads.native import nativelib, program
from workloads.tpcc import tpcc
from workloads.base import ClientCtx, Workload
from workloads.clients.client import NATIVE_WORKLOADS, client_driver_text
from workloads.custom import SetCmd, parse_text
from workloads.driver import WORKLOADS
from workloads.steps.messages import Ready, decode
from workloads.native.program import Draw, Param, Program, Unsupported, compile_expr, reference_txn, seed_state

CTX = ClientCtx(0, 1, 0.05, seed=3)


def test_opcodes_and_limits_are_the_c_sides() -> None:
    mod = nativelib._native
    assert mod is not None, "workloads/native/_native.c is not built: pip install -e ."
    names = [n for n in vars(program) if n.startswith("OP_")]
    assert len(names) == 30
    for n in names + ["MAX_STR", "MAX_VARS", "MAX_STMTS", "MAX_PARAMS", "MAX_PROG", "MAX_STACK", "MAX_COLS",
                      "MAX_SREGS", "MAX_TALLY", "MAX_SCALE", "MAX_DIGITS", "MAX_JUMPS", "P_CENTS", "P_SREG"]:
        assert getattr(mod, n) == getattr(program, n), n


def test_workloads_with_a_program_are_the_named_ones() -> None:
    """NATIVE_WORKLOADS (the start-up line's list) is exactly the workloads that define program(); tpcc has one in
    both modes (the client-side transactions as a program with jumps, the stored procedures' CALL)."""
    classes = [v for m in (custom, insert, pgbench, sysbench, tpcc) for v in vars(m).values()
               if isinstance(v, type) and issubclass(v, Workload) and v is not Workload and v.name]
    # the modules scanned hold every registered workload (a new module must be added above, or its program goes
    # unchecked; this was test_workload_script's check until the key loop's test went with it)
    assert {c.name for c in classes} == set(WORKLOADS)
    assert {c.name for c in classes if c.program is not Workload.program} == NATIVE_WORKLOADS
    for mode in tpcc.MODES:
        prog = tpcc.Tpcc(mode).program(ClientCtx(0, 1, 1))
        assert prog is not None and prog.branches == (mode == "client")


@pytest.mark.parametrize("cls", [sysbench.ReadOnly, pgbench.ReadWrite, insert.Insert])
def test_built_in_programs_pass_the_check_and_count_like_txn(cls: type[Workload]) -> None:
    prog = cls().program(CTX)
    assert prog is not None
    prog.check()
    # the statement count is what the Python txn() returns (its source says it)
    src = inspect.getsource(cls.client)
    expected = {"read-only": 16, "read-write": 7, "insert": 1}[cls.name]
    assert prog.statements == expected and (f"return {expected}" in src or "POINT_SELECTS + 6" in src)


def _values(script: str, seed: int = 1) -> dict[str, int]:
    """The variables after one reference run of the script's program, read back by a statement that
    takes them all as parameters."""
    w = custom.Custom("")
    w.cmds = parse_text(script + "SELECT 1;\n")
    prog = w.program(CTX)
    assert prog is not None
    prog.execute("SELECT " + ", ".join("?" for _ in prog.names), [Param(i) for i in range(len(prog.names))])
    prog.check()
    got: list[object] = []

    def capture(args: object) -> int:
        got.extend(args)  # type: ignore[call-overload]
        return 0
    reference_txn(prog, [lambda args: 0, capture], lambda sql: None, Draw(seed_state(seed)), [0, 0])()
    return dict(zip(prog.names, got))  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(a=st.integers(-10**6, 10**6), b=st.integers(-10**6, 10**6).filter(bool))
def test_set_arithmetic_equals_the_python_evaluation(a: int, b: int) -> None:
    script = (f"\\set a {a}\n\\set b {b}\n\\set q :a / :b\n\\set f :a // :b\n\\set m :a % :b\n"
              "\\set n -:a * 3 + (:b - 1)\n\\set l least(:a, :b, 7)\n\\set g greatest(:a, :b, -7)\n"
              "\\set x abs(:a - :b)\n")
    got = _values(script)
    cmds = [c for c in parse_text(script + "SELECT 1;\n") if isinstance(c, SetCmd)]
    env: dict[str, int] = {}
    for c in cmds:
        env[c.name] = c.fn(env, None)
    assert got == env


def test_random_stays_in_its_range_and_is_uniform() -> None:
    d = Draw(seed_state(9))
    counts = [0] * 5
    for _ in range(5000):
        v = d.uniform(10, 14)
        assert 10 <= v <= 14
        counts[v - 10] += 1
    assert min(counts) > 800, counts
    assert Draw(seed_state(9)).uniform(1, 10**9) == Draw(seed_state(9)).uniform(1, 10**9)


@pytest.mark.parametrize("words,names", [
    ([program.OP_ADD], 0),                                   # nothing on the stack
    ([program.OP_CONST, 1, program.OP_ADD, program.OP_STORE, 0], 1),
    ([program.OP_CONST, 1, program.OP_STORE, 1], 1),         # no variable 1
    ([program.OP_CONST, 1], 0),                              # a value left over
    ([program.OP_EXEC, 0, 0], 0),                            # no statement 0
    ([program.OP_SIMPLE, 0], 0),                             # no text 0
    ([99], 0),
    ([program.OP_CONST, 1 << 63, program.OP_STORE, 0], 1),   # does not fit in 64 bits
    ([], 0),
])
def test_check_refuses_bad_programs(words: list[int], names: int) -> None:
    p = Program(names=[f"v{i}" for i in range(names)], words=words)
    with pytest.raises(Unsupported):
        p.check()


def test_compile_refuses_what_it_does_not_know() -> None:
    with pytest.raises(Unsupported):
        compile_expr("__import__('os')", lambda n: 0)
    with pytest.raises(Unsupported):
        compile_expr("v_a ** 2", lambda n: 0)
    with pytest.raises(Unsupported):
        Program().pool(["x" * 2000])


@pytest.mark.parametrize("engine", ENGINES, ids=[e.name for e in ENGINES])
def test_start_up_line_names_the_loop_that_will_run(engine: Engine) -> None:
    base = client_driver_text(engine, "prepared", [])
    if nativelib.available(engine):
        assert client_driver_text(engine, "prepared", ["read-only", "insert"]) == \
            f"{base} + native executor for insert, read-only"
    # a paced run (--rate, --think) and the simple protocol run the Python loop: no C loop named
    for names in (["read-only"], ["point-select"], ["read-only", "point-select"]):
        assert client_driver_text(engine, "prepared", names, paced=True) == base
        assert client_driver_text(engine, "simple", names) == base
    if nativelib.available(engine):
        assert client_driver_text(engine, "prepared", ["tpcc"]) == f"{base} + native executor for tpcc"


def test_ready_names_its_loop_and_old_senders_still_decode() -> None:
    assert decode(("ready", 42, True)) == Ready(pid=42, c_loop=True, loop="")
    assert decode(("ready", 42, True, "native executor")).loop == "native executor"


def test_consecutive_clients_draw_unrelated_keys() -> None:
    """Clients' seeds are consecutive (ClientCtx.key_seed). With the state seed x splitmix64's increment, client
    i + 1's draws were client i's one draw later, so 8 clients of 1,000 draws each touched about 1,008 distinct
    positions of one sequence; from independent states they touch about as many keys as chance allows."""
    ctxs = [ClientCtx(i, 8, 1.0, seed=3) for i in range(8)]
    streams = []
    for c in ctxs:
        d = Draw(seed_state(c.key_seed()))
        streams.append([d.uniform(1, 10**9) for _ in range(1000)])
    assert len({v for s in streams for v in s}) > 7_990  # 8,000 draws from 10^9: collisions are rare
    assert not set(streams[0][1:]) & set(streams[1])  # not the neighbour's stream shifted by one draw
