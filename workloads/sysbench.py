"""``point-select`` and ``read-only``: sysbench's sbtest table and transactions.

Table as sysbench's ``oltp_common.lua`` creates it (``id`` primary key, ``k``
with index ``k_1``, ``c char(120)``, ``pad char(60)``); ``--scale`` is 100,000
rows per unit. Keys are drawn uniformly (sysbench ``--rand-type=uniform``, as
pgbench -S), so the comparison in BENCHMARKS.md uses that option.
"""

from __future__ import annotations

import functools
import random
import struct
from collections.abc import Iterator

from workloads.base import ClientCtx, Runner, Workload
from workloads.client import Client
from workloads.load import Dataset, RowFormat, Table
from workloads.program import Param, Program

ROWS_PER_SCALE = 100_000
RANGE_SIZE = 100
POINT_SELECTS = 10
POINT_SQL = "SELECT c FROM dbdiag.sbtest1 WHERE id = ?"
# sysbench oltp_read_only's simple, sum, order and distinct ranges, in its order
RANGE_SQL = ("SELECT c FROM dbdiag.sbtest1 WHERE id BETWEEN ? AND ?",
             "SELECT SUM(k) FROM dbdiag.sbtest1 WHERE id BETWEEN ? AND ?",
             "SELECT c FROM dbdiag.sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c",
             "SELECT DISTINCT c FROM dbdiag.sbtest1 WHERE id BETWEEN ? AND ? ORDER BY c")
_POOL = 1009  # distinct c/pad strings: enough variety, no per-row random string cost


def sbtest_rows(scale: float) -> int:
    return max(int(round(ROWS_PER_SCALE * scale)), RANGE_SIZE + 1)


def _digits(rng: random.Random, groups: int) -> str:
    """sysbench's c/pad shape: ``groups`` groups of 11 random digits joined by '-'."""
    d = "".join(rng.choices("0123456789", k=11 * groups))
    return "-".join(d[i:i + 11] for i in range(0, len(d), 11))


@functools.lru_cache(maxsize=1)
def _pools() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The distinct c and pad strings, made once per process (one rng.choice per digit took 1.3 s of each
    load; every load of every scale uses the same pools)."""
    rng = random.Random(1)
    return tuple(_digits(rng, 10) for _ in range(_POOL)), tuple(_digits(rng, 5) for _ in range(_POOL))


def _field(text: str) -> bytes:
    b = text.encode()
    return struct.pack(">i", len(b)) + b


def sbtest_dataset(scale: float) -> Dataset:
    n = sbtest_rows(scale)

    def pools() -> tuple[random.Random, tuple[str, ...], tuple[str, ...]]:
        cs, pads = _pools()
        return random.Random(2), cs, pads  # the k column's generator, fresh for each pass over the rows

    def rows() -> Iterator[tuple[int, int, str, str]]:
        rng, cs, pads = pools()
        rnd = rng.random
        for i in range(1, n + 1):
            yield (i, int(rnd() * n) + 1, cs[i % _POOL], pads[(i * 7) % _POOL])

    def chunks(fmt: RowFormat) -> Iterator[tuple[int, str]]:
        # Same rows as rows(), formatted without a per-value call: the c/pad tail of each row is
        # pre-built, so a row costs one f-string.
        rng, cs, pads = pools()
        rnd = rng.random
        if fmt is RowFormat.COPY_TEXT:
            tails = [f"\t{cs[j]}\t{pads[(j * 7) % _POOL]}\n" for j in range(_POOL)]
            step = 20000
            for lo in range(1, n + 1, step):
                hi = min(lo + step, n + 1)
                yield hi - lo, "".join([f"{i}\t{int(rnd() * n) + 1}{tails[i % _POOL]}" for i in range(lo, hi)])
        else:
            tails = [f",'{cs[j]}','{pads[(j * 7) % _POOL]}')" for j in range(_POOL)]
            step = 5000
            for lo in range(1, n + 1, step):
                hi = min(lo + step, n + 1)
                yield hi - lo, ",".join([f"({i},{int(rnd() * n) + 1}{tails[i % _POOL]}" for i in range(lo, hi)])

    def pg_binary() -> Iterator[tuple[int, bytes]]:
        # COPY BINARY rows (field count, then length + value per field): the same rows, without the
        # server parsing 190 MB of text at scale 10 (measured: its COPY takes about a quarter less).
        rng, cs, pads = pools()
        rnd = rng.random
        tails = [_field(cs[j]) + _field(pads[(j * 7) % _POOL]) for j in range(_POOL)]
        head = struct.Struct(">hiiii").pack
        step = 20000
        for lo in range(1, n + 1, step):
            hi = min(lo + step, n + 1)
            yield hi - lo, b"".join([head(4, 4, i, 4, int(rnd() * n) + 1) + tails[i % _POOL] for i in range(lo, hi)])

    t = Table("sbtest1", "id integer NOT NULL, k integer NOT NULL DEFAULT 0, c char(120) NOT NULL DEFAULT '', "
              "pad char(60) NOT NULL DEFAULT ''", "id", (("k_1", "k"),), rows, n, chunks, pg_binary)
    return Dataset("sbtest", 2, scale, [t])


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
