"""``point-select`` and ``read-only``: sysbench's sbtest table and transactions.

Table as sysbench's ``oltp_common.lua`` creates it (``id`` primary key, ``k``
with index ``k_1``, ``c char(120)``, ``pad char(60)``); ``--scale`` is 100,000
rows per unit. Keys are drawn uniformly (sysbench ``--rand-type=uniform``, as
pgbench -S), so the comparison in BENCHMARKS.md uses that option.

Every row's ``c`` and ``pad`` differ, as sysbench's random strings do, so the
planner sees the same statistics on both tables (PostgreSQL 18: ``n_distinct``
-1 for c). With the pool of 1,009 strings used before it saw 1,009: 89 groups
estimated for ``DISTINCT c`` over 100 rows instead of 103, and a HashAggregate
instead of sysbench's Unique in that statement's generic plan. The custom plans
the server runs, their blocks hit per statement and their CPU were the same on
both tables (issue 15).
"""

from __future__ import annotations

import functools
import random
import struct
from collections.abc import Iterator

from workloads.base import ClientCtx, Runner, Workload
from workloads.clients.client import Client
from workloads.load import Dataset, RowFormat, Table
from workloads.native.program import Param, Program

ROWS_PER_SCALE = 100_000
RANGE_SIZE = 100
POINT_SELECTS = 10
POINT_SQL = "SELECT c FROM dbdiag.sbtest1 WHERE id = ?"
# sysbench oltp_read_only's simple, sum, order and distinct ranges, in its order
RANGE_SQL = ("SELECT c FROM dbdiag.sbtest1 WHERE id BETWEEN ? AND ?",
             "SELECT SUM(k) FROM dbdiag.sbtest1 WHERE id BETWEEN ? AND ?",
             "SELECT c FROM dbdiag.sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
             "SELECT DISTINCT c FROM dbdiag.sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c")
_POOL = 1009  # random c/pad strings made once: no per-row random string cost
# Row i = b * _POOL + j has c = c pool string j + tag(b) and pad = pad pool string (7 j mod _POOL) + tag(b):
# 1,009 random strings and a 5-digit tag per block of _POOL rows (b -> b * 7919 mod 10^5, a permutation, so c
# does not follow id across blocks) make every c and every pad its own for up to 10^5 * 1,009 rows (scale
# 1,009). The tag is last so that rows of one range differ from the first character, as random strings do.
_TAGS = 10 ** 5
_TAG_MUL = 7919
C_LEN, PAD_LEN = 119, 59  # 10 and 5 groups of 11 digits joined by '-' (sysbench's templates)
TAG_LEN = 5


def sbtest_rows(scale: float) -> int:
    return max(int(round(ROWS_PER_SCALE * scale)), RANGE_SIZE + 1)


def _digits(rng: random.Random, groups: int) -> str:
    """sysbench's c/pad shape: ``groups`` groups of 11 random digits joined by '-'."""
    d = "".join(rng.choices("0123456789", k=11 * groups))
    return "-".join(d[i:i + 11] for i in range(0, len(d), 11))


@functools.lru_cache(maxsize=1)
def _pools() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The c and pad strings without their last 5 digits (the block's tag), made once per process (one
    rng.choice per digit took 1.3 s of each load; every load of every scale uses the same pools)."""
    rng = random.Random(1)
    return (tuple(_digits(rng, 10)[:-TAG_LEN] for _ in range(_POOL)),
            tuple(_digits(rng, 5)[:-TAG_LEN] for _ in range(_POOL)))


def _tags(n: int) -> list[str]:
    """The 5-digit tag of each block of _POOL rows among rows 1..n."""
    return [f"{b * _TAG_MUL % _TAGS:0{TAG_LEN}d}" for b in range(n // _POOL + 1)]


def sbtest_c(i: int) -> str:
    """Row ``i``'s c (119 characters; no two rows alike up to 100,900,000 rows)."""
    return f"{_pools()[0][i % _POOL]}{i // _POOL * _TAG_MUL % _TAGS:0{TAG_LEN}d}"


def sbtest_pad(i: int) -> str:
    """Row ``i``'s pad (59 characters, likewise one of its own)."""
    return f"{_pools()[1][(i * 7) % _POOL]}{i // _POOL * _TAG_MUL % _TAGS:0{TAG_LEN}d}"


def sbtest_dataset(scale: float) -> Dataset:
    n = sbtest_rows(scale)
    P = _POOL

    def pools() -> tuple[random.Random, list[str], tuple[str, ...], tuple[str, ...]]:
        cs, pads = _pools()
        return random.Random(2), _tags(n), cs, pads  # the k column's generator, fresh for each pass

    def rows() -> Iterator[tuple[int, int, str, str]]:
        rnd = pools()[0].random
        for i in range(1, n + 1):
            yield (i, int(rnd() * n) + 1, sbtest_c(i), sbtest_pad(i))

    def chunks(fmt: RowFormat) -> Iterator[tuple[int, str]]:
        # Same rows as rows(), formatted without a per-value call: the pool strings are pre-built with
        # the text before them, so a row costs one f-string of six pieces.
        rng, tags, cs, pads = pools()
        rnd = rng.random
        sep, end, step = ("\t", "\n", 20000) if fmt is RowFormat.COPY_TEXT else ("','", "')", 5000)
        cpre = [f"{sep}{cs[j]}" for j in range(P)]
        ppre = [f"{sep}{pads[(j * 7) % P]}" for j in range(P)]
        for lo in range(1, n + 1, step):
            hi = min(lo + step, n + 1)
            if fmt is RowFormat.COPY_TEXT:
                yield hi - lo, "".join([f"{i}\t{int(rnd() * n) + 1}{cpre[i % P]}{tags[i // P]}{ppre[i % P]}"
                                        f"{tags[i // P]}\n" for i in range(lo, hi)])
            else:
                yield hi - lo, ",".join([f"({i},{int(rnd() * n) + 1},'{cs[i % P]}{tags[i // P]}{ppre[i % P]}"
                                         f"{tags[i // P]}')" for i in range(lo, hi)])

    def pg_binary() -> Iterator[tuple[int, bytes]]:
        # COPY BINARY rows (field count, then length + value per field): the same rows, without the
        # server parsing 190 MB of text at scale 10 (measured: its COPY takes about a quarter less).
        # c and pad have fixed lengths, so a row is one struct: the field count, then length and value
        # of id, k, c (pool string, tag) and pad (pool string, tag).
        rng, tags, cs, pads = pools()
        rnd = rng.random
        btags = [t.encode() for t in tags]
        cb = [cs[j].encode() for j in range(P)]
        pb = [pads[(j * 7) % P].encode() for j in range(P)]
        cl, pl, tl = C_LEN - TAG_LEN, PAD_LEN - TAG_LEN, TAG_LEN
        row = struct.Struct(f">hiiiii{cl}s{tl}si{pl}s{tl}s").pack
        step = 20000
        for lo in range(1, n + 1, step):
            hi = min(lo + step, n + 1)
            yield hi - lo, b"".join([row(4, 4, i, 4, int(rnd() * n) + 1, C_LEN, cb[i % P], btags[i // P], PAD_LEN,
                                         pb[i % P], btags[i // P]) for i in range(lo, hi)])

    t = Table("sbtest1", "id integer NOT NULL, k integer NOT NULL DEFAULT 0, c char(120) NOT NULL DEFAULT '', "
              "pad char(60) NOT NULL DEFAULT ''", "id", (("k_1", "k"),), rows, n, chunks, pg_binary)
    return Dataset("sbtest", 3, scale, [t])


class PointSelect(Workload):
    name = "point-select"
    description = "one primary-key lookup per transaction (sysbench oltp_point_select, pgbench -S)"

    def dataset(self, scale: float) -> Dataset:
        return sbtest_dataset(scale)

    def program(self, ctx: ClientCtx) -> Program:
        """The same transaction for the native executor: one uniform key, one prepared lookup."""
        p = Program()
        p.execute(POINT_SQL, [Param(p.uniform("id", 1, sbtest_rows(ctx.scale)))])
        return p

    def client(self, c: Client, ctx: ClientCtx) -> Runner:
        q = c.prepare(POINT_SQL)
        return Runner(c.keyed_txn(q, 1, sbtest_rows(ctx.scale), ctx.rng().random))


class ReadOnly(Workload):
    name = "read-only"
    description = "sysbench oltp_read_only: 10 point selects, simple/sum/order/distinct ranges, one transaction"

    def dataset(self, scale: float) -> Dataset:
        return sbtest_dataset(scale)

    def program(self, ctx: ClientCtx) -> Program:
        """The same transaction for the native executor: the statements, ranges and order of client()."""
        p = Program()
        n = sbtest_rows(ctx.scale)
        p.simple("BEGIN")
        for _ in range(POINT_SELECTS):
            p.execute(POINT_SQL, [Param(p.uniform("id", 1, n))])
        for sql in RANGE_SQL:
            lo = p.uniform("lo", 1, n - RANGE_SIZE + 1)
            p.execute(sql, [Param(lo), Param(p.add("hi", "lo", RANGE_SIZE - 1))])
        p.simple("COMMIT")
        return p

    def client(self, c: Client, ctx: ClientCtx) -> Runner:
        point = c.prepare(POINT_SQL).run
        simple, total, order, distinct = (c.prepare(sql).run for sql in RANGE_SQL)
        begin, commit = c.begin, c.commit
        n = sbtest_rows(ctx.scale)
        span = n - RANGE_SIZE + 1
        rnd = ctx.rng().random
        loop = range(POINT_SELECTS)

        def txn() -> int:
            begin()
            for _ in loop:
                point((int(rnd() * n) + 1,))
            for q in (simple, total, order, distinct):
                lo = int(rnd() * span) + 1
                q((lo, lo + RANGE_SIZE - 1))
            commit()
            return POINT_SELECTS + 6
        return Runner(txn)
