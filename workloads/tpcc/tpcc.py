"""``tpcc``: a TPC-C-like mix on the nine TPC-C tables (not an audited TPC-C).

Mix: New-Order 45, Payment 43, Order-Status 4, Delivery 4, Stock-Level 4 (%).
About 1% of New-Orders name an unused item and roll back, as the specification
asks. ``--scale`` = warehouses; each client has a home warehouse (client i ->
warehouse i mod W + 1). No keying or think time unless ``--think`` (then the
specification's keying times and negative-exponential think times apply, and
each client does about one transaction per 10-30 s).

Reported: NOPM (committed New-Orders per minute: the engine-independent figure,
as HammerDB reports it) and TPM (committed transactions of all kinds per minute).
Rows of a transaction are locked in a fixed order (items sorted) so deadlocks are
rare; the ones that happen are retried by the driver.

``--tpcc-mode sp`` runs each transaction as one call of server-side routines, as HammerDB does
(:mod:`workloads.tpcc.tpcc_sp`: same mix, keying/think times, NOPM/TPM, retries); the default ``client``
sends every statement from here: the five transactions are one program (:mod:`workloads.tpcc.tpcc_prog`), run
by the native executor when it can, else by the Python loop through the same program.

A fractional ``--scale`` (tests only) keeps one warehouse and shrinks items,
customers and orders by that factor; its NOPM is not comparable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from diag.core.db import Session
from workloads.tpcc import tpcc_prog, tpcc_sp
from workloads.base import ClientCtx, Runner, Workload
from workloads.clients.client import Client
from workloads.load import Dataset
from workloads.native.program import Draw, Program, Tally, reference_txn, seed_state
from workloads.tpcc.tpcc_data import tpcc_dataset

__all__ = ["KEYING", "MIX", "MODES", "THINK", "think_note", "Tpcc", "consistency_errors", "tpcc_dataset"]

# Keying and mean think times (s) per transaction type, TPC-C 5.2.5.
KEYING = {"new_order": 18, "payment": 3, "order_status": 2, "delivery": 2, "stock_level": 2}
THINK = {"new_order": 12, "payment": 12, "order_status": 10, "delivery": 5, "stock_level": 5}
# The mix (% of transactions per type): the type draw of both programs (tpcc_prog, tpcc_sp.kind_of).
MIX = {"new_order": 45, "payment": 43, "order_status": 4, "delivery": 4, "stock_level": 4}
MODES = ("client", "sp")  # --tpcc-mode: statements sent from the client; stored procedures (one call)


class Tpcc(Workload):
    name = "tpcc"
    description = "TPC-C-like mix (New-Order 45, Payment 43, Order-Status 4, Delivery 4, Stock-Level 4); NOPM, TPM"

    def __init__(self, mode: str = "client") -> None:
        self.mode = mode
        self.sp = mode == "sp"

    def dataset(self, scale: float) -> Dataset:
        return tpcc_dataset(scale)

    def setup(self, s: Session) -> None:
        if self.sp:
            tpcc_sp.install(s)

    def program(self, ctx: ClientCtx) -> Program | None:
        return tpcc_sp.program(ctx.scale, ctx.index) if self.sp else tpcc_prog.program(ctx.scale, ctx.index)

    def outcomes(self) -> Tally | None:
        return tpcc_sp.tally if self.sp else None

    def client(self, c: Client, ctx: ClientCtx) -> Runner:
        if self.sp:
            return _sp_runner(c, ctx)
        return _client_runner(c, ctx)

    def result_extra(self, totals: Counter[str], transactions: int, duration_s: float) -> dict[str, float]:
        committed = transactions - totals.get("rollback", 0)
        return {"nopm": round(totals.get("new_order", 0) / duration_s * 60, 1),
                "tpm": round(committed / duration_s * 60, 1)}


def think_pause(ctx: ClientCtx, next_kind: Callable[[], str]) -> Callable[[], int]:
    """``pause_ns``: the think time after the last transaction plus the keying time of ``next_kind()``."""
    r = ctx.rng()
    prev = [0.0]

    def pause_ns() -> int:
        kind = next_kind()
        secs = prev[0] + KEYING[kind]
        prev[0] = min(r.expovariate(1 / THINK[kind]), 10 * THINK[kind])
        return int(secs * 1e9)
    return pause_ns


def _sp_runner(c: Client, ctx: ClientCtx) -> Runner:
    """Stored-procedure mode on the Python loop: the native executor's program through ``c``."""
    extra: Counter[str] = Counter()
    txn, draw = tpcc_sp.python_txn(c, tpcc_sp.program(ctx.scale, ctx.index), ctx.key_seed(), extra)
    pause = think_pause(ctx, lambda: tpcc_sp.next_kind(draw.s)) if ctx.think else None
    return Runner(txn, extra, pause)


def _client_runner(c: Client, ctx: ClientCtx) -> Runner:
    """Client-side mode on the Python loop: the native executor's program (workloads.tpcc.tpcc_prog) through ``c``,
    reading the rows it needs; its outcomes counted by the program's tallies."""
    prog = tpcc_prog.program(ctx.scale, ctx.index)
    extra: Counter[str] = Counter()
    draw = Draw(seed_state(ctx.key_seed()))
    queries = [c.prepare(s) for s in prog.stmts]
    txn = reference_txn(prog, [q.rows for q in queries], c.execute, draw, [0] * len(queries), extra)
    pause = think_pause(ctx, lambda: tpcc_sp.next_kind(draw.s)) if ctx.think else None
    return Runner(txn, extra, pause)


def consistency_errors(rows_district: list[tuple[int, int, int]], max_o: dict[tuple[int, int], int]) -> list[str]:
    """TPC-C 3.3.2.2: each district's d_next_o_id - 1 equals max(o_id) of its orders."""
    out = []
    for w, d, nxt in rows_district:
        if nxt - 1 != max_o.get((w, d), 0):
            out.append(f"warehouse {w} district {d}: d_next_o_id - 1 = {nxt - 1}, max(o_id) = {max_o.get((w, d))}")
    return out


def mean_cycle_s() -> float:
    """Mean keying plus think time per transaction and client (s) over :data:`MIX`: about 21 s."""
    return sum(w * (KEYING[k] + THINK[k]) for k, w in MIX.items()) / sum(MIX.values())


def think_note(duration_s: float, clients: Sequence[int]) -> str | None:
    """A start-up note where ``--think`` leaves a step too short to measure: each client waits its keying
    and think times (about 21 s a transaction), so a step shorter than that counts a few transactions or
    none, and its throughput says nothing. None when the step is long enough."""
    cycle = mean_cycle_s()
    if duration_s >= 10 * cycle:
        return None
    per = duration_s / cycle
    few = min(clients, default=1)
    return (f"--think: TPC-C's keying and think times average {cycle:.0f} s per transaction and client, so a "
            f"{duration_s:g} s step measures about {per:.1f} transactions per client ({per * few:.0f} at "
            f"{few} client{'s' if few != 1 else ''}); use --duration {10 * cycle:.0f} or more, or many clients "
            f"(TPC-C runs 10 terminals per warehouse)")
