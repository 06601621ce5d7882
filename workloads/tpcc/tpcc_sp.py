"""TPC-C in stored-procedure mode, as HammerDB runs it: each transaction is one ``CALL dbdiag.tpcc_txn(...)``.

The terminal (this client) draws a transaction's inputs: the type (1..100 over the mix of
:mod:`workloads.tpcc.tpcc`), district, the two uniform draws of each NURand (customer number, last
name), by-name or by-number, order-line count, the 1% New-Order rollback, remote payment
warehouse, amount, carrier, threshold; the server-side routine (``workloads/tpcc/tpcc_sql/<engine>/``,
one routine per file, picked for the server's version by :func:`diag.core.sqlfiles.pick_in`) chooses the
transaction, runs its statements (the same ones, in the same order, as the client-side mode) and
commits: PostgreSQL functions under a PL/pgSQL procedure (its caller's autocommit transaction),
MariaDB/MySQL procedures between their own START TRANSACTION and COMMIT. As HammerDB's routines do,
New-Order draws its order lines inside the routine (item NURand, supply warehouse, quantity) and
sorts them by item, so stock rows lock in one order.

The transaction is a :class:`~workloads.native.program.Program` (15 uniform draws, constants, one
statement), so the native executor runs it in C when it can; the Python loop runs the same program
through :func:`~workloads.native.program.reference_txn` with the same generator. Either way the outcome
counts (committed New-Orders, rolled-back ones) come from replaying the draws: every run makes
exactly :data:`DRAWS` draws before its statement, so the generator's state before and after a batch
says how many transactions ran and what each one was (:func:`tally`), with no result read back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

from diag.core.db import Session
from diag.core.engines import ENGINES
from diag.core.errors import DbError, UsageError
from diag.core.sqlfiles import SqlUnavailable, names_in, pick_in
from workloads.clients.clientbase import Client
from workloads.native.program import (OP_CONST, Draw, Param, Program, draw_at, draws_between, reference_txn,
                               seed_state, tallied)
from workloads.tpcc.tpcc_data import DISTRICTS, Sizes

_HERE = Path(__file__).resolve().parent / "tpcc_sql"
# Engine name -> folder of its TPC-C routines (one CREATE per file).
SQL_DIRS: dict[str, Path] = {e.name: _HERE / e.sql_folder for e in ENGINES}
# Created in this order (callees first); tpcc_last_name exists on PostgreSQL only.
ORDER = ("tpcc_last_name", "tpcc_customer_by_name", "tpcc_new_order", "tpcc_payment", "tpcc_order_status",
         "tpcc_delivery", "tpcc_stock_level", "tpcc_txn")

# The draws of one transaction, in program order: (name, lo, hi). tpcc_txn.*.sql reads them in this order.
INPUTS: tuple[tuple[str, int, int], ...] = (
    ("kind", 1, 100), ("d", 1, DISTRICTS), ("ca", 0, 1023), ("cb", 1, 0), ("byname", 1, 100), ("la", 0, 255),
    ("lb", 0, 999), ("ol_cnt", 5, 15), ("rb", 1, 100), ("remote", 1, 100), ("rw", 1, 0), ("rd", 1, DISTRICTS),
    ("cents", 100, 500_000), ("carrier", 1, 10), ("threshold", 10, 20))
DRAWS = len(INPUTS)
KIND, RB = 0, 8  # draw indexes of the transaction type and the New-Order rollback
CALL = "CALL dbdiag.tpcc_txn(" + ", ".join(["?"] * (DRAWS + 4)) + ")"
# tpcc_txn's parameters: the first draw, then the client's constants, then the other draws.
CONSTANTS = ("w", "nw", "items", "cust")


def kind_of(x: int) -> str:
    """The transaction type of a type draw 1..100 (the mix of workloads.tpcc.tpcc; tpcc_txn's IF ladder)."""
    if x <= 45:
        return "new_order"
    if x <= 88:
        return "payment"
    if x <= 92:
        return "order_status"
    return "delivery" if x <= 96 else "stock_level"


def program(scale: float, index: int) -> Program:
    """Client ``index``'s transaction: its home warehouse and the sizes as constants, the draws, the CALL."""
    z = Sizes.of(scale)
    p = Program()
    consts = {"w": index % z.warehouses + 1, "nw": z.warehouses, "items": z.items, "cust": z.customers}
    for name in CONSTANTS:
        p.expr(name, [OP_CONST, consts[name]])
    his = {"cb": z.customers, "rw": max(z.warehouses - 1, 1)}
    for name, lo, hi in INPUTS:
        p.uniform(name, lo, his.get(name, hi))
    order = [INPUTS[0][0], *CONSTANTS, *(n for n, _, _ in INPUTS[1:])]
    p.execute(CALL, [Param(p.var(n)) for n in order])
    return p


def tally(before: int, after: int, failed: bool, extra: Counter[str]) -> None:
    """Count the committed New-Orders (``new_order``) and the rolled-back ones (``rollback``) of the runs that
    took the generator from state ``before`` to ``after``; the last run failed when ``failed`` (not counted)."""
    runs = draws_between(before, after) // DRAWS
    for r in range(runs - 1 if failed else runs):
        k = r * DRAWS  # each run starts DRAWS draws after the previous one
        if draw_at(before, k + KIND, 1, 100) <= 45:
            extra["rollback" if draw_at(before, k + RB, 1, 100) == 1 else "new_order"] += 1


def next_kind(state: int) -> str:
    """The type of the transaction the generator at ``state`` will run next (for --think's keying time)."""
    return kind_of(draw_at(state, KIND, 1, 100))


def python_txn(c: Client, prog: Program, seed: int, extra: Counter[str]) -> tuple[Callable[[], int], Draw]:
    """The program through a Python client (the fallback and the reference): its tallied ``txn()`` and its
    generator (the same splitmix64 as the C side, from the same seed)."""
    draw = Draw(seed_state(seed))
    queries = [c.prepare(s) for s in prog.stmts]
    run = reference_txn(prog, [q.run for q in queries], c.execute, draw, [0] * len(queries))
    return tallied(run, lambda: draw.s, tally, extra), draw


def install(s: Session) -> None:
    """Create (or replace) the routines on ``s``'s server, as picked for its version. UsageError, one line,
    when the server has no file for it or refuses one (the message names the routine)."""
    folder = SQL_DIRS[s.dbms.name]
    have = set(names_in(folder, s.dbms))
    drop = s.dbms.drop_routine_sql  # None: the file says CREATE OR REPLACE
    for name in (n for n in ORDER if n in have):
        try:
            text = pick_in(folder, name, s.dbms, s.version_num, s.product)
            if drop:
                s.execute(drop.format(name))
            s.execute(text)
        except SqlUnavailable as e:
            raise UsageError(f"tpcc --tpcc-mode sp: {e}") from None
        except DbError as e:
            raise UsageError(f"tpcc --tpcc-mode sp: creating {name} failed: {e}") from None
