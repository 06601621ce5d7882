"""``read-write``: pgbench's built-in TPC-B-like transaction on pgbench-shaped tables.

``--scale`` as ``pgbench -s``: branches = scale, tellers = 10 x scale, accounts =
100,000 x scale. A fractional scale (tests) keeps one branch and ten tellers and
scales only the accounts.
"""

from __future__ import annotations

from collections.abc import Iterator

from workloads.base import ClientCtx, Runner, Workload
from workloads.clients.client import Client
from workloads.load import Dataset, RowFormat, Table
from workloads.native.program import Param, Program


UPD_A = "UPDATE dbdiag.pgbench_accounts SET abalance = abalance + ? WHERE aid = ?"
SEL_A = "SELECT abalance FROM dbdiag.pgbench_accounts WHERE aid = ?"
UPD_T = "UPDATE dbdiag.pgbench_tellers SET tbalance = tbalance + ? WHERE tid = ?"
UPD_B = "UPDATE dbdiag.pgbench_branches SET bbalance = bbalance + ? WHERE bid = ?"
INS_H = "INSERT INTO dbdiag.pgbench_history (tid, bid, aid, delta, mtime) VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP)"


def sizes(scale: float) -> tuple[int, int, int]:
    """(branches, tellers, accounts)."""
    branches = max(int(scale), 1)
    return branches, 10 * branches, max(int(round(100_000 * scale)), 1)


def pgbench_dataset(scale: float) -> Dataset:
    nb, nt, na = sizes(scale)

    def branches() -> Iterator[tuple[int, int, None]]:
        return ((i, 0, None) for i in range(1, nb + 1))

    def tellers() -> Iterator[tuple[int, int, int, None]]:
        return ((i, (i - 1) // 10 + 1, 0, None) for i in range(1, nt + 1))

    per_branch = max(na // nb, 1)

    def accounts() -> Iterator[tuple[int, int, int, str]]:
        return ((i, min((i - 1) // per_branch + 1, nb), 0, "") for i in range(1, na + 1))

    def account_chunks(fmt: RowFormat) -> Iterator[tuple[int, str]]:
        copy = fmt is RowFormat.COPY_TEXT
        step = 20000 if copy else 50000
        for lo in range(1, na + 1, step):
            hi = min(lo + step, na + 1)
            if copy:
                yield hi - lo, "".join([f"{i}\t{min((i - 1) // per_branch + 1, nb)}\t0\t\n" for i in range(lo, hi)])
            else:
                yield hi - lo, ",".join([f"({i},{min((i - 1) // per_branch + 1, nb)},0,'')" for i in range(lo, hi)])

    return Dataset("pgbench", 2, scale, [
        Table("pgbench_branches", "bid integer NOT NULL, bbalance integer, filler char(88)", "bid", (), branches, nb),
        Table("pgbench_tellers", "tid integer NOT NULL, bid integer, tbalance integer, filler char(84)", "tid", (),
              tellers, nt),
        Table("pgbench_accounts", "aid integer NOT NULL, bid integer, abalance integer, filler char(84)", "aid", (),
              accounts, na, account_chunks),
        Table("pgbench_history", "tid integer, bid integer, aid integer, delta integer, mtime {ts}, "
              "filler char(22)", "", (), None, 0),
    ])


class ReadWrite(Workload):
    name = "read-write"
    description = "pgbench TPC-B-like: update account, select balance, update teller and branch, insert history"

    def dataset(self, scale: float) -> Dataset:
        return pgbench_dataset(scale)

    def program(self, ctx: ClientCtx) -> Program:
        """The same transaction for the native executor: client()'s draws, statements and order."""
        nb, nt, na = sizes(ctx.scale)
        p = Program()
        aid, bid, tid = p.uniform("aid", 1, na), p.uniform("bid", 1, nb), p.uniform("tid", 1, nt)
        delta = p.uniform("delta", -5000, 5000)
        p.simple("BEGIN")
        p.execute(UPD_A, [Param(delta), Param(aid)])
        p.execute(SEL_A, [Param(aid)])
        p.execute(UPD_T, [Param(delta), Param(tid)])
        p.execute(UPD_B, [Param(delta), Param(bid)])
        p.execute(INS_H, [Param(tid), Param(bid), Param(aid), Param(delta)])
        p.simple("COMMIT")
        return p

    def client(self, c: Client, ctx: ClientCtx) -> Runner:
        nb, nt, na = sizes(ctx.scale)
        upd_a, sel_a, upd_t, upd_b, ins_h = (c.prepare(sql).run for sql in (UPD_A, SEL_A, UPD_T, UPD_B, INS_H))
        begin, commit = c.begin, c.commit
        rnd = ctx.rng().random

        def txn() -> int:
            aid = int(rnd() * na) + 1
            bid = int(rnd() * nb) + 1
            tid = int(rnd() * nt) + 1
            delta = int(rnd() * 10001) - 5000
            begin()
            upd_a((delta, aid))
            sel_a((aid,))
            upd_t((delta, tid))
            upd_b((delta, bid))
            ins_h((tid, bid, aid, delta))
            commit()
            return 7
        return Runner(txn)
