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
(:mod:`workloads.tpcc_sp`: same mix, keying/think times, NOPM/TPM, retries); the default ``client``
sends every statement from here.

A fractional ``--scale`` (tests only) keeps one warehouse and shrinks items,
customers and orders by that factor; its NOPM is not comparable.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from diag.db import Session
from workloads import tpcc_sp
from workloads.base import ClientCtx, Runner, Workload
from workloads.client import Client, text
from workloads.load import Dataset
from workloads.program import Program, Tally
from workloads.tpcc_data import C_ID, C_LAST, C_OL, DISTRICTS, Sizes, last_name, nurand, tpcc_dataset

__all__ = ["KEYING", "MIX", "MODES", "THINK", "think_note", "Tpcc", "consistency_errors", "tpcc_dataset"]

# Keying and mean think times (s) per transaction type, TPC-C 5.2.5.
KEYING = {"new_order": 18, "payment": 3, "order_status": 2, "delivery": 2, "stock_level": 2}
THINK = {"new_order": 12, "payment": 12, "order_status": 10, "delivery": 5, "stock_level": 5}
# The mix (% of transactions per type): the thresholds of Tpcc.choose, and tpcc_sp's draw.
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
        return tpcc_sp.program(ctx.scale, ctx.index) if self.sp else None

    def outcomes(self) -> Tally | None:
        return tpcc_sp.tally if self.sp else None

    def client(self, c: Client, ctx: ClientCtx) -> Runner:
        if self.sp:
            return _sp_runner(c, ctx)
        return _TpccClient(c, ctx).runner

    def result_extra(self, totals: Counter[str], transactions: int, duration_s: float) -> dict[str, float]:
        committed = transactions - totals.get("rollback", 0)
        return {"nopm": round(totals.get("new_order", 0) / duration_s * 60, 1),
                "tpm": round(committed / duration_s * 60, 1)}


class _TpccClient:
    """The five transactions for one client (home warehouse fixed)."""

    def __init__(self, c: Client, ctx: ClientCtx) -> None:
        self.c = c
        self.z = z = Sizes.of(ctx.scale)
        self.w = ctx.index % z.warehouses + 1
        self.r = ctx.rng()
        self.rnd = self.r.random
        self.next_type = ""
        self.prev_think = 0.0
        p = c.prepare
        S = "dbdiag."
        # New-Order
        self.no_cust = p(f"SELECT c_discount, c_last, c_credit, w_tax FROM {S}customer, {S}warehouse "
                         "WHERE w_id = ? AND c_w_id = w_id AND c_d_id = ? AND c_id = ?").rows
        self.no_dist = p(f"SELECT d_next_o_id, d_tax FROM {S}district WHERE d_w_id = ? AND d_id = ? FOR UPDATE").rows
        self.no_dist_upd = p(f"UPDATE {S}district SET d_next_o_id = ? WHERE d_w_id = ? AND d_id = ?").rows
        self.no_ins_o = p(f"INSERT INTO {S}orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, "
                          "o_all_local) VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP, NULL, ?, ?)").rows
        self.no_ins_no = p(f"INSERT INTO {S}new_order (no_o_id, no_d_id, no_w_id) VALUES (?, ?, ?)").rows
        self.no_item = p(f"SELECT i_price, i_name, i_data FROM {S}item WHERE i_id = ?").rows
        self.no_stock = [p(f"SELECT s_quantity, s_data, s_dist_{d:02d} FROM {S}stock WHERE s_i_id = ? AND s_w_id = ? "
                           "FOR UPDATE").rows for d in range(1, DISTRICTS + 1)]
        self.no_stock_upd = p(f"UPDATE {S}stock SET s_quantity = ?, s_ytd = s_ytd + ?, s_order_cnt = s_order_cnt + 1, "
                              "s_remote_cnt = s_remote_cnt + ? WHERE s_i_id = ? AND s_w_id = ?").rows
        self.no_ins_ol = p(f"INSERT INTO {S}order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, "
                           "ol_supply_w_id, ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) "
                           "VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)").rows
        # Payment
        self.pay_w_upd = p(f"UPDATE {S}warehouse SET w_ytd = w_ytd + ? WHERE w_id = ?").rows
        self.pay_w = p(f"SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM {S}warehouse "
                       "WHERE w_id = ?").rows
        self.pay_d_upd = p(f"UPDATE {S}district SET d_ytd = d_ytd + ? WHERE d_w_id = ? AND d_id = ?").rows
        self.pay_d = p(f"SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM {S}district "
                       "WHERE d_w_id = ? AND d_id = ?").rows
        self.by_name = p(f"SELECT c_id FROM {S}customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? "
                         "ORDER BY c_first").rows
        self.pay_c = p(f"SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, "
                       f"c_since, c_credit, c_credit_lim, c_discount, c_balance FROM {S}customer "
                       "WHERE c_w_id = ? AND c_d_id = ? AND c_id = ? FOR UPDATE").rows
        self.pay_c_data = p(f"SELECT c_data FROM {S}customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?").rows
        self.pay_c_upd = p(f"UPDATE {S}customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, "
                           "c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?").rows
        self.pay_c_upd_bc = p(f"UPDATE {S}customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, "
                              "c_payment_cnt = c_payment_cnt + 1, c_data = ? "
                              "WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?").rows
        self.pay_h = p(f"INSERT INTO {S}history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, "
                       "h_data) VALUES (?, ?, ?, ?, ?, CURRENT_TIMESTAMP, ?, ?)").rows
        # Order-Status
        self.os_c = p(f"SELECT c_balance, c_first, c_middle, c_last FROM {S}customer "
                      "WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?").rows
        self.os_o = p(f"SELECT o_id, o_carrier_id, o_entry_d FROM {S}orders WHERE o_w_id = ? AND o_d_id = ? "
                      "AND o_c_id = ? ORDER BY o_id DESC LIMIT 1").rows
        self.os_ol = p(f"SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM {S}order_line "
                       "WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?").rows
        # Delivery
        self.dl_no = p(f"SELECT no_o_id FROM {S}new_order WHERE no_w_id = ? AND no_d_id = ? "
                       "ORDER BY no_o_id LIMIT 1 FOR UPDATE").rows
        self.dl_no_del = p(f"DELETE FROM {S}new_order WHERE no_w_id = ? AND no_d_id = ? AND no_o_id = ?").rows
        self.dl_o = p(f"SELECT o_c_id FROM {S}orders WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?").rows
        self.dl_o_upd = p(f"UPDATE {S}orders SET o_carrier_id = ? WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?").rows
        self.dl_ol_upd = p(f"UPDATE {S}order_line SET ol_delivery_d = CURRENT_TIMESTAMP "
                           "WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?").rows
        self.dl_ol_sum = p(f"SELECT SUM(ol_amount) FROM {S}order_line WHERE ol_w_id = ? AND ol_d_id = ? "
                           "AND ol_o_id = ?").rows
        self.dl_c_upd = p(f"UPDATE {S}customer SET c_balance = c_balance + ?, c_delivery_cnt = c_delivery_cnt + 1 "
                          "WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?").rows
        # Stock-Level
        self.sl_d = p(f"SELECT d_next_o_id FROM {S}district WHERE d_w_id = ? AND d_id = ?").rows
        self.sl_count = p(f"SELECT COUNT(DISTINCT s_i_id) FROM {S}order_line, {S}stock WHERE ol_w_id = ? "
                          "AND ol_d_id = ? AND ol_o_id < ? AND ol_o_id >= ? AND s_w_id = ? AND s_i_id = ol_i_id "
                          "AND s_quantity < ?").rows
        self.runner = Runner(self.txn, Counter(), self.pause_ns if ctx.think else None)
        self.dispatch = {"new_order": self.new_order, "payment": self.payment, "order_status": self.order_status,
                         "delivery": self.delivery, "stock_level": self.stock_level}

    # -- choosing ----------------------------------------------------------------

    def choose(self) -> str:
        x = self.rnd() * 100
        if x < 45:
            return "new_order"
        if x < 88:
            return "payment"
        if x < 92:
            return "order_status"
        if x < 96:
            return "delivery"
        return "stock_level"

    def pause_ns(self) -> int:
        """Think time after the last transaction plus keying time of the next one."""
        self.next_type = self.choose()
        secs = self.prev_think + KEYING[self.next_type]
        self.prev_think = min(self.r.expovariate(1 / THINK[self.next_type]), 10 * THINK[self.next_type])
        return int(secs * 1e9)

    def txn(self) -> int:
        kind = self.next_type or self.choose()
        self.next_type = ""
        return self.dispatch[kind]()

    def _customer(self, d: int) -> int:
        return nurand(self.r, 1023, 1, self.z.customers, C_ID)

    def _remote_w(self) -> int:
        if self.z.warehouses == 1:
            return self.w
        w = self.r.randint(1, self.z.warehouses - 1)
        return w + 1 if w >= self.w else w

    # -- transactions (each returns the statements it sent) ------------------------

    def new_order(self) -> int:
        r, w, z = self.r, self.w, self.z
        d = r.randint(1, DISTRICTS)
        cid = self._customer(d)
        n_items = r.randint(5, 15)
        rollback = r.random() < 0.01
        lines = []
        for i in range(n_items):
            iid = nurand(r, 8191, 1, z.items, C_OL)
            supply = self._remote_w() if r.random() < 0.01 else w
            lines.append((iid, supply, r.randint(1, 10)))
        if rollback:
            lines[-1] = (z.items + 1, w, lines[-1][2])  # unused item id: the transaction must roll back
        lines.sort()  # lock stock rows in one order across clients
        all_local = int(all(s == w for _, s, _ in lines))
        c = self.c
        c.begin()
        self.no_cust((w, d, cid))
        dist = self.no_dist((w, d))
        o_id = int(dist[0][0])
        self.no_dist_upd((o_id + 1, w, d))
        self.no_ins_o((o_id, d, w, cid, len(lines), all_local))
        self.no_ins_no((o_id, d, w))
        q = 6
        stock_sel = self.no_stock[d - 1]
        for n, (iid, supply, qty) in enumerate(lines, 1):
            item = self.no_item((iid,))
            q += 1
            if not item:
                c.rollback()
                self.runner.extra["rollback"] += 1
                return q + 1
            price = float(item[0][0])
            st = stock_sel((iid, supply))
            s_qty = int(st[0][0])
            new_qty = s_qty - qty if s_qty >= qty + 10 else s_qty - qty + 91
            self.no_stock_upd((new_qty, qty, int(supply != w), iid, supply))
            self.no_ins_ol((o_id, d, w, n, iid, supply, qty, round(qty * price, 2), text(st[0][2])))
            q += 3
        c.commit()
        self.runner.extra["new_order"] += 1
        return q + 1

    def payment(self) -> int:
        r, w = self.r, self.w
        d = r.randint(1, DISTRICTS)
        if r.random() < 0.85 or self.z.warehouses == 1:
            cw, cd = w, d
        else:
            cw, cd = self._remote_w(), r.randint(1, DISTRICTS)
        amount = round(r.uniform(1, 5000), 2)
        c = self.c
        c.begin()
        self.pay_w_upd((amount, w))
        wh = self.pay_w((w,))
        self.pay_d_upd((amount, w, d))
        di = self.pay_d((w, d))
        q = 5
        cid = 0
        if r.random() < 0.6:
            ids = self.by_name((cw, cd, last_name(nurand(r, 255, 0, 999, C_LAST))))
            q += 1
            if ids:
                cid = int(ids[(len(ids) - 1) // 2][0])
        if not cid:
            cid = self._customer(cd)
        cust = self.pay_c((cw, cd, cid))
        q += 1
        if cust and text(cust[0][10]) == "BC":
            old = text(self.pay_c_data((cw, cd, cid))[0][0])
            new = f"{cid} {cd} {cw} {d} {w} {amount:.2f} | {old}"[:500]
            self.pay_c_upd_bc((amount, amount, new, cw, cd, cid))
            q += 2
        else:
            self.pay_c_upd((amount, amount, cw, cd, cid))
            q += 1
        h_data = (text(wh[0][0]) + "    " + text(di[0][0]))[:24]
        self.pay_h((cid, cd, cw, d, w, amount, h_data))
        c.commit()
        return q + 2

    def order_status(self) -> int:
        r, w = self.r, self.w
        d = r.randint(1, DISTRICTS)
        c = self.c
        c.begin()
        q = 1
        cid = 0
        if r.random() < 0.6:
            ids = self.by_name((w, d, last_name(nurand(r, 255, 0, 999, C_LAST))))
            q += 1
            if ids:
                cid = int(ids[(len(ids) - 1) // 2][0])
        if not cid:
            cid = self._customer(d)
        self.os_c((w, d, cid))
        o = self.os_o((w, d, cid))
        q += 2
        if o:
            self.os_ol((w, d, int(o[0][0])))
            q += 1
        c.commit()
        return q + 1

    def delivery(self) -> int:
        w = self.w
        carrier = self.r.randint(1, 10)
        c = self.c
        c.begin()
        q = 1
        for d in range(1, DISTRICTS + 1):
            no = self.dl_no((w, d))
            q += 1
            if not no:
                continue  # nothing to deliver in this district
            o_id = int(no[0][0])
            self.dl_no_del((w, d, o_id))
            cid = int(self.dl_o((w, d, o_id))[0][0])
            self.dl_o_upd((carrier, w, d, o_id))
            self.dl_ol_upd((w, d, o_id))
            total = self.dl_ol_sum((w, d, o_id))[0][0]
            self.dl_c_upd((float(total or 0), w, d, cid))
            q += 6
        c.commit()
        return q + 1

    def stock_level(self) -> int:
        r, w = self.r, self.w
        d = r.randint(1, DISTRICTS)
        threshold = r.randint(10, 20)
        c = self.c
        c.begin()
        nxt = int(self.sl_d((w, d))[0][0])
        self.sl_count((w, d, nxt, nxt - 20, w, threshold))
        c.commit()
        return 4


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
    few = min(clients)
    return (f"--think: TPC-C's keying and think times average {cycle:.0f} s per transaction and client, so a "
            f"{duration_s:g} s step measures about {per:.1f} transactions per client ({per * few:.0f} at "
            f"{few} client{'s' if few != 1 else ''}); use --duration {10 * cycle:.0f} or more, or many clients "
            f"(TPC-C runs 10 terminals per warehouse)")
