"""``insert``: single-row autocommit inserts, as in the 2010 insert comparison (seeds/004).

Table ``(id auto-increment primary key, val int with a secondary index,
txt varchar(20))``. Every committed transaction adds exactly one row, so the
table's growth equals the transactions counted (warmup included).
"""

from __future__ import annotations

import random
import string

from workloads.base import ClientCtx, Runner, Workload
from workloads.clients.client import Client
from workloads.load import Dataset, Table
from workloads.native.program import Param, Program

VAL_MAX = 1_000_000
POOL = 997  # distinct txt strings per client
INSERT_SQL = "INSERT INTO dbdiag.insert_data (val, txt) VALUES (?, ?)"


def _pool(rng: random.Random) -> list[str]:
    return ["".join(rng.choice(string.ascii_letters) for _ in range(20)) for _ in range(POOL)]


def insert_dataset(scale: float) -> Dataset:
    # The scale does not change an empty table; keep it out of the reuse key.
    t = Table("insert_data", "id {autoinc}, val integer NOT NULL, txt varchar(20)", "id", (("idx_val", "val"),),
              None, 0)
    return Dataset("insert", 2, 1, [t])


class Insert(Workload):
    name = "insert"
    description = "single-row autocommit INSERT into (id auto-increment pk, val indexed, txt varchar(20))"

    def dataset(self, scale: float) -> Dataset:
        return insert_dataset(scale)

    def program(self, ctx: ClientCtx) -> Program:
        """The same insert for the native executor: a value in 1..VAL_MAX and a string of client()'s pool."""
        p = Program()
        pool = p.pool(_pool(ctx.rng()))
        p.execute(INSERT_SQL, [Param(p.uniform("val", 1, VAL_MAX)), Param(p.uniform("txt", 0, POOL - 1), pool)])
        return p

    def client(self, c: Client, ctx: ClientCtx) -> Runner:
        ins = c.prepare(INSERT_SQL).run
        rng = ctx.rng()
        pool = _pool(rng)
        rnd = rng.random

        def txn() -> int:
            ins((int(rnd() * VAL_MAX) + 1, pool[int(rnd() * 997)]))
            return 1
        return Runner(txn)
