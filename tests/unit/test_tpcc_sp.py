"""TPC-C's stored-procedure mode without a server: the program, the replayed outcome counts, the routine files."""

from __future__ import annotations

from collections import Counter

import pytest

from diag.core.engines import MYSQL, POSTGRES
from diag.core.errors import DiagError
from diag.core.sqlfiles import SqlUnavailable, pick_in
from workloads.tpcc import tpcc, tpcc_sp
from workloads.base import ClientCtx
from workloads.native.program import Draw, reference_txn, seed_state

N = 3000


def _run(seed: int, n: int) -> tuple[list[list[object]], Counter[str], Counter[str]]:
    """n transactions through the Python reference interpreter: the CALL's arguments, the outcome counts the
    arguments say, and the ones :func:`tpcc_sp.tally` replays from the generator's states."""
    prog = tpcc_sp.program(0.05, 3)
    calls: list[list[object]] = []
    draw = Draw(seed_state(seed))
    txn = reference_txn(prog, [lambda args: calls.append(list(args)) or 0], lambda sql: None, draw, [0])
    s0 = draw.s
    for _ in range(n):
        assert txn() == 1
    said: Counter[str] = Counter()
    for a in calls:
        if a[0] <= 45:  # kind, w, nw, items, cust, d, ca, cb, byname, la, lb, ol_cnt, rb, ...
            said["rollback" if a[12] == 1 else "new_order"] += 1
    replayed: Counter[str] = Counter()
    tpcc_sp.tally(s0, draw.s, False, replayed)
    return calls, said, replayed


def test_replayed_outcomes_are_what_the_calls_said() -> None:
    calls, said, replayed = _run(11, N)
    assert replayed == said
    assert 0.42 * N < said["new_order"] + said["rollback"] < 0.48 * N  # 45% of the mix
    assert 0 < said["rollback"] < 0.03 * said["new_order"]  # about 1% of New-Orders
    kinds = Counter(tpcc_sp.kind_of(int(a[0])) for a in calls)
    assert 0.40 * N < kinds["payment"] < 0.46 * N and all(kinds[k] > 0.02 * N for k in
                                                           ("order_status", "delivery", "stock_level"))
    # the constants: client 3 of a one-warehouse mini TPC-C (scale 0.05: 5,000 items, 150 customers)
    assert {tuple(a[1:5]) for a in calls} == {(1, 1, 5000, 150)}
    assert all(1 <= int(a[5]) <= 10 and 1 <= int(a[7]) <= 150 and 5 <= int(a[11]) <= 15 for a in calls)


def test_a_failed_last_run_is_not_counted() -> None:
    calls, _, _ = _run(5, 40)
    prog_draw = Draw(seed_state(5))
    s0 = prog_draw.s
    for _ in range(40 * tpcc_sp.DRAWS):
        prog_draw.uniform(0, 1)
    whole: Counter[str] = Counter()
    cut: Counter[str] = Counter()
    tpcc_sp.tally(s0, prog_draw.s, False, whole)
    tpcc_sp.tally(s0, prog_draw.s, True, cut)
    last_is_new_order = int(calls[-1][0]) <= 45
    assert sum(whole.values()) - sum(cut.values()) == int(last_is_new_order)
    assert tpcc_sp.next_kind(s0) == tpcc_sp.kind_of(int(calls[0][0]))


def test_program_is_one_call_the_native_loader_accepts() -> None:
    prog = tpcc_sp.program(3, 4)
    prog.check()
    assert prog.statements == 1 and prog.draws == tpcc_sp.DRAWS
    assert prog.stmts[0].qmarks().startswith("CALL dbdiag.tpcc_txn(")
    assert prog.stmts[0].nparams == tpcc_sp.DRAWS + len(tpcc_sp.CONSTANTS)


@pytest.mark.parametrize("engine,version,product", [(POSTGRES, 110000, ""), (POSTGRES, 180000, ""),
                                                    (MYSQL, 101100, "mariadb"), (MYSQL, 80004, "mysql")])
def test_every_routine_has_a_file_for_supported_servers(engine, version, product) -> None:
    folder = tpcc_sp.SQL_DIRS[engine.name]
    got = []
    for name in tpcc_sp.ORDER:
        try:
            got.append(pick_in(folder, name, engine, version, product))
        except DiagError as e:  # only tpcc_last_name may be missing (MySQL's procedures inline it)
            assert name == "tpcc_last_name" and engine is MYSQL, e
    assert got[-1].startswith(("CREATE /* dbdiag */ OR REPLACE PROCEDURE dbdiag.tpcc_txn",
                               "CREATE /* dbdiag */ PROCEDURE dbdiag.tpcc_txn"))


def test_older_servers_are_told_what_they_need() -> None:
    with pytest.raises(SqlUnavailable, match="tpcc_txn: needs PostgreSQL 11"):
        pick_in(tpcc_sp.SQL_DIRS[POSTGRES.name], "tpcc_txn", POSTGRES, 100000)
    with pytest.raises(SqlUnavailable, match="tpcc_new_order: needs mysql 8.0.4"):
        pick_in(tpcc_sp.SQL_DIRS[MYSQL.name], "tpcc_new_order", MYSQL, 50700, "mysql")
    # MariaDB's version numbers are all above MySQL 8.0.4's, but JSON_TABLE came in 10.6 (Debian 11 ships 10.5)
    with pytest.raises(SqlUnavailable, match="tpcc_new_order: needs mariadb 10.6.0 or newer"):
        pick_in(tpcc_sp.SQL_DIRS[MYSQL.name], "tpcc_new_order", MYSQL, 100500, "mariadb")


def test_think_pause_keys_the_transaction_that_runs_next() -> None:
    """--think in sp mode: the keying time of each pause is that of the transaction the program runs next."""
    prog = tpcc_sp.program(0.05, 0)
    draw = Draw(seed_state(3))
    calls: list[list[object]] = []
    txn = reference_txn(prog, [lambda args: calls.append(list(args)) or 0], lambda sql: None, draw, [0])
    pause = tpcc.think_pause(ClientCtx(0, 1, 0.05, think=True, seed=3), lambda: tpcc_sp.next_kind(draw.s))
    prev = ""
    for i in range(500):
        ns = pause()
        txn()
        kind = tpcc_sp.kind_of(int(calls[-1][0]))
        keying = int(tpcc.KEYING[kind] * 1e9)
        if i == 0:
            assert ns == keying  # no think time before the first transaction
        else:
            assert keying <= ns <= keying + 10 * tpcc.THINK[prev] * 1e9 + 1
        prev = kind
    assert len({tpcc_sp.kind_of(int(a[0])) for a in calls}) == 5
