"""Client-side TPC-C (``tpcc``, the default ``--tpcc-mode client``) as one :class:`~workloads.native.program.Program`:
the five transactions issued statement by statement, for the native executor, and through
:func:`~workloads.native.program.reference_txn` for the Python loop (the same program and generator on both, so the
same seed gives the same transactions).

The transaction type is the first draw (1..100: New-Order 45, Payment 43, Order-Status 4, Delivery 4,
Stock-Level 4), so --think's keying time can name the next type from the generator's state
(:func:`workloads.tpcc.tpcc_sp.next_kind`). Money is carried in cents: amounts are drawn as cents, prices and sums
are read from their decimal text as cents, and sent as decimals with two places. New-Order draws its 5-15
lines (item NURand, a 1% remote supply warehouse, quantity) and sorts them by item (stock rows lock in one
order across clients); 1% of New-Orders name an unused item as the last line and roll back when it is not
found. Payment and Order-Status pick the customer by last name 60% of the time (the middle row of the
matches, ``(n - 1) // 2``), else by number. Committed New-Orders and rollbacks are counted
(``new_order``, ``rollback``) for NOPM and TPM.
"""

from __future__ import annotations

from workloads.native.opcodes import F_CENTS, F_INT, F_LIT, F_SREG, OP_SEQ
from workloads.native.program import Param, Program
from workloads.tpcc.tpcc_data import C_ID, C_LAST, C_OL, DISTRICTS, Sizes, last_name

S = "dbdiag."
NO_CUST = (f"SELECT c_discount, c_last, c_credit, w_tax FROM {S}customer, {S}warehouse "
           "WHERE w_id = ? AND c_w_id = w_id AND c_d_id = ? AND c_id = ?")
NO_DIST = f"SELECT d_next_o_id, d_tax FROM {S}district WHERE d_w_id = ? AND d_id = ? FOR UPDATE"
NO_DIST_UPD = f"UPDATE {S}district SET d_next_o_id = ? WHERE d_w_id = ? AND d_id = ?"
NO_INS_O = (f"INSERT INTO {S}orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, "
            "o_all_local) VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP, NULL, ?, ?)")
NO_INS_NO = f"INSERT INTO {S}new_order (no_o_id, no_d_id, no_w_id) VALUES (?, ?, ?)"
NO_ITEM = f"SELECT i_price, i_name, i_data FROM {S}item WHERE i_id = ?"
NO_STOCK = [f"SELECT s_quantity, s_data, s_dist_{d:02d} FROM {S}stock WHERE s_i_id = ? AND s_w_id = ? FOR UPDATE"
            for d in range(1, DISTRICTS + 1)]
NO_STOCK_UPD = (f"UPDATE {S}stock SET s_quantity = ?, s_ytd = s_ytd + ?, s_order_cnt = s_order_cnt + 1, "
                "s_remote_cnt = s_remote_cnt + ? WHERE s_i_id = ? AND s_w_id = ?")
NO_INS_OL = (f"INSERT INTO {S}order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, "
             "ol_delivery_d, ol_quantity, ol_amount, ol_dist_info) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?)")
PAY_W_UPD = f"UPDATE {S}warehouse SET w_ytd = w_ytd + ? WHERE w_id = ?"
PAY_W = f"SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM {S}warehouse WHERE w_id = ?"
PAY_D_UPD = f"UPDATE {S}district SET d_ytd = d_ytd + ? WHERE d_w_id = ? AND d_id = ?"
PAY_D = (f"SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM {S}district "
         "WHERE d_w_id = ? AND d_id = ?")
BY_NAME = f"SELECT c_id FROM {S}customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first"
PAY_C = (f"SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, "
         f"c_since, c_credit, c_credit_lim, c_discount, c_balance FROM {S}customer "
         "WHERE c_w_id = ? AND c_d_id = ? AND c_id = ? FOR UPDATE")
PAY_C_DATA = f"SELECT c_data FROM {S}customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?"
PAY_C_UPD = (f"UPDATE {S}customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, "
             "c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?")
PAY_C_UPD_BC = (f"UPDATE {S}customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, "
                "c_payment_cnt = c_payment_cnt + 1, c_data = ? WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?")
PAY_H = (f"INSERT INTO {S}history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data) "
         "VALUES (?, ?, ?, ?, ?, CURRENT_TIMESTAMP, ?, ?)")
OS_C = f"SELECT c_balance, c_first, c_middle, c_last FROM {S}customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?"
OS_O = (f"SELECT o_id, o_carrier_id, o_entry_d FROM {S}orders WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ? "
        "ORDER BY o_id DESC LIMIT 1")
OS_OL = (f"SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM {S}order_line "
         "WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?")
DL_NO = f"SELECT no_o_id FROM {S}new_order WHERE no_w_id = ? AND no_d_id = ? ORDER BY no_o_id LIMIT 1 FOR UPDATE"
DL_NO_DEL = f"DELETE FROM {S}new_order WHERE no_w_id = ? AND no_d_id = ? AND no_o_id = ?"
DL_O = f"SELECT o_c_id FROM {S}orders WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?"
DL_O_UPD = f"UPDATE {S}orders SET o_carrier_id = ? WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?"
DL_OL_UPD = (f"UPDATE {S}order_line SET ol_delivery_d = CURRENT_TIMESTAMP "
             "WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?")
DL_OL_SUM = f"SELECT SUM(ol_amount) FROM {S}order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?"
DL_C_UPD = (f"UPDATE {S}customer SET c_balance = c_balance + ?, c_delivery_cnt = c_delivery_cnt + 1 "
            "WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?")
SL_D = f"SELECT d_next_o_id FROM {S}district WHERE d_w_id = ? AND d_id = ?"
SL_COUNT = (f"SELECT COUNT(DISTINCT s_i_id) FROM {S}order_line, {S}stock WHERE ol_w_id = ? AND ol_d_id = ? "
            "AND ol_o_id < ? AND ol_o_id >= ? AND s_w_id = ? AND s_i_id = ol_i_id AND s_quantity < ?")

MAX_LINES = 15
# String registers
R_DIST, R_W_NAME, R_D_NAME, R_CREDIT, R_DATA, R_NEW_DATA, R_H_DATA = range(7)


def nurand(a: int, x: int, y: int, c: int) -> str:
    """TPC-C's NURand(A, x, y) with run-time constant c, as an expression (two uniform draws)."""
    return f"((rnd(0, {a}) | rnd({x}, {y})) + {c}) % {y - x + 1} + {x}"


class _Builder:
    """The program of one client (home warehouse ``w``) at sizes ``z``."""

    def __init__(self, z: Sizes, w: int) -> None:
        self.p, self.z = Program(), z
        self.names = self.p.pool([last_name(n) for n in range(1000)])

    def run(self, sql: str, args: str) -> None:
        """``sql`` with parameters named in ``args``: a variable, ``$v`` its cents, ``&r`` string register r,
        ``@v`` the last name numbered v."""
        p, params = self.p, []
        for a in args.split():
            if a[0] == "$":
                params.append(Param.cents(p.var(a[1:])))
            elif a[0] == "&":
                params.append(Param.sreg(int(a[1:])))
            elif a[0] == "@":
                params.append(Param(p.var(a[1:]), self.names))
            else:
                params.append(Param(p.var(a)))
        p.execute(sql, params)

    def remote_w(self, dst: str) -> None:
        """``dst`` = a warehouse other than the home one, uniform (there are at least two)."""
        self.p.let("rw", f"rnd(1, {self.z.warehouses - 1})")
        self.p.let(dst, "rw + (rw >= w)")

    def customer(self, tag: str, cw: str, cd: str) -> None:
        """``cid``: by last name 60% of the time (the middle of the matching rows), else (or when no row
        matches) by NURand number."""
        p = self.p
        p.let("cid", "0")
        p.jump_unless("rnd(1, 100) <= 60", f"{tag}_by_id")
        p.let("ln", nurand(255, 0, 999, C_LAST))
        self.run(BY_NAME, f"{cw} {cd} @ln")
        p.jump_unless("rows()", f"{tag}_by_id")
        p.read("cid", 0, row="(rows() - 1) // 2")
        p.label(f"{tag}_by_id")
        p.jump_unless("cid == 0", f"{tag}_have")
        p.let("cid", nurand(1023, 1, self.z.customers, C_ID))
        p.label(f"{tag}_have")

    def new_order(self) -> None:
        p, z = self.p, self.z
        p.label("new_order")
        p.let("d", f"rnd(1, {DISTRICTS})")
        p.let("cid", nurand(1023, 1, z.customers, C_ID))
        p.let("n", f"rnd(5, {MAX_LINES})")
        p.let("rb", "rnd(1, 100) == 1")
        p.array("L", 3 * MAX_LINES)  # (item, supply warehouse, quantity) per line
        p.let("i", "0")
        p.label("no_draw")
        p.store_at("L", "3 * i", nurand(8191, 1, z.items, C_OL))
        p.let("sup", "w")
        if z.warehouses > 1:
            p.jump_unless("rnd(1, 100) == 1", "no_home")
            self.remote_w("sup")
            p.label("no_home")
        p.store_at("L", "3 * i + 1", "sup")
        p.store_at("L", "3 * i + 2", "rnd(1, 10)")
        p.let("i", "i + 1")
        p.jump_unless("i == n", "no_draw")
        p.jump_unless("rb", "no_sort")
        p.store_at("L", "3 * n - 3", str(z.items + 1))  # an unused item: the transaction must roll back
        p.label("no_sort")
        p.sort("L", 3, "n")
        p.let("all_local", "1")
        if z.warehouses > 1:
            p.let("i", "0")
            p.label("no_local")
            p.let("all_local", "all_local * (at(L, 3 * i + 1) == w)")
            p.let("i", "i + 1")
            p.jump_unless("i == n", "no_local")
        p.simple("BEGIN")
        self.run(NO_CUST, "w d cid")
        self.run(NO_DIST, "w d")
        p.read("o_id", 0)
        p.let("o_next", "o_id + 1")
        self.run(NO_DIST_UPD, "o_next w d")
        self.run(NO_INS_O, "o_id d w cid n all_local")
        self.run(NO_INS_NO, "o_id d w")
        # one copy of the line loop per district: each reads its own s_dist_NN column
        for dd in range(1, DISTRICTS + 1):
            if dd < DISTRICTS:
                p.jump_unless(f"d == {dd}", f"no_d{dd + 1}")
            p.let("i", "0")
            p.label(f"no_line{dd}")
            p.let("iid", "at(L, 3 * i)")
            p.let("sup", "at(L, 3 * i + 1)")
            p.let("qty", "at(L, 3 * i + 2)")
            self.run(NO_ITEM, "iid")
            p.jump_unless("rows()", "no_rollback")
            p.read("price", 0, scale=2)
            self.run(NO_STOCK[dd - 1], "iid sup")
            p.read("s_qty", 0)
            p.read_text(R_DIST, 2)
            p.let("new_qty", "s_qty - qty + 91 * (s_qty < qty + 10)")
            p.let("remote", "sup != w")
            self.run(NO_STOCK_UPD, "new_qty qty remote iid sup")
            p.let("amount", "qty * price")
            p.let("ol", "i + 1")
            self.run(NO_INS_OL, f"o_id d w ol iid sup qty $amount &{R_DIST}")
            p.let("i", "i + 1")
            p.jump_unless("i == n", f"no_line{dd}")
            p.jump("no_commit")
            if dd < DISTRICTS:
                p.label(f"no_d{dd + 1}")
        p.label("no_commit")
        p.simple("COMMIT")
        p.tally("new_order")
        p.jump("end")
        p.label("no_rollback")
        p.simple("ROLLBACK")
        p.tally("rollback")
        p.jump("end")

    def payment(self) -> None:
        p = self.p
        p.label("payment")
        p.let("d", f"rnd(1, {DISTRICTS})")
        p.let("cw", "w")
        p.let("cd", "d")
        if self.z.warehouses > 1:
            p.jump_unless("rnd(1, 100) > 85", "pay_home")
            self.remote_w("cw")
            p.let("cd", f"rnd(1, {DISTRICTS})")
            p.label("pay_home")
        p.let("amount", "rnd(100, 500000)")  # cents: 1.00 to 5,000.00
        p.simple("BEGIN")
        self.run(PAY_W_UPD, "$amount w")
        self.run(PAY_W, "w")
        p.read_text(R_W_NAME, 0)
        self.run(PAY_D_UPD, "$amount w d")
        self.run(PAY_D, "w d")
        p.read_text(R_D_NAME, 0)
        self.customer("pay", "cw", "cd")
        self.run(PAY_C, "cw cd cid")
        p.let("bc", "0")
        p.jump_unless("rows()", "pay_credit")
        p.read_text(R_CREDIT, 10)
        p.expr("bc", [OP_SEQ, R_CREDIT, p.literal("BC")])
        p.label("pay_credit")
        p.jump_unless("bc", "pay_good")
        self.run(PAY_C_DATA, "cw cd cid")
        p.read_text(R_DATA, 0)
        sp = (F_LIT, " ")
        p.fmt(R_NEW_DATA, 500, [(F_INT, "cid"), sp, (F_INT, "cd"), sp, (F_INT, "cw"), sp, (F_INT, "d"), sp,
                                (F_INT, "w"), sp, (F_CENTS, "amount"), (F_LIT, " | "), (F_SREG, R_DATA)])
        self.run(PAY_C_UPD_BC, f"$amount $amount &{R_NEW_DATA} cw cd cid")
        p.jump("pay_history")
        p.label("pay_good")
        self.run(PAY_C_UPD, "$amount $amount cw cd cid")
        p.label("pay_history")
        p.fmt(R_H_DATA, 24, [(F_SREG, R_W_NAME), (F_LIT, "    "), (F_SREG, R_D_NAME)])
        self.run(PAY_H, f"cid cd cw d w $amount &{R_H_DATA}")
        p.simple("COMMIT")
        p.jump("end")

    def order_status(self) -> None:
        p = self.p
        p.label("order_status")
        p.let("d", f"rnd(1, {DISTRICTS})")
        p.simple("BEGIN")
        self.customer("os", "w", "d")
        self.run(OS_C, "w d cid")
        self.run(OS_O, "w d cid")
        p.jump_unless("rows()", "os_done")
        p.read("oid", 0)
        self.run(OS_OL, "w d oid")
        p.label("os_done")
        p.simple("COMMIT")
        p.jump("end")

    def delivery(self) -> None:
        p = self.p
        p.label("delivery")
        p.let("carrier", "rnd(1, 10)")
        p.simple("BEGIN")
        p.let("d", "1")
        p.label("dl_district")
        self.run(DL_NO, "w d")
        p.jump_unless("rows()", "dl_next")  # nothing to deliver in this district
        p.read("o_id", 0)
        self.run(DL_NO_DEL, "w d o_id")
        self.run(DL_O, "w d o_id")
        p.read("cid", 0)
        self.run(DL_O_UPD, "carrier w d o_id")
        self.run(DL_OL_UPD, "w d o_id")
        self.run(DL_OL_SUM, "w d o_id")
        p.read("total", 0, scale=2)
        self.run(DL_C_UPD, "$total w d cid")
        p.label("dl_next")
        p.let("d", "d + 1")
        p.jump_unless(f"d == {DISTRICTS + 1}", "dl_district")
        p.simple("COMMIT")
        p.jump("end")

    def stock_level(self) -> None:
        p = self.p
        p.label("stock_level")
        p.let("d", f"rnd(1, {DISTRICTS})")
        p.let("threshold", "rnd(10, 20)")
        p.simple("BEGIN")
        self.run(SL_D, "w d")
        p.read("nxt", 0)
        p.let("low", "nxt - 20")
        self.run(SL_COUNT, "w d nxt low w threshold")
        p.simple("COMMIT")


def program(scale: float, index: int) -> Program:
    """Client ``index``'s transaction (home warehouse ``index mod W + 1``) at ``scale``."""
    z = Sizes.of(scale)
    b = _Builder(z, index % z.warehouses + 1)
    p = b.p
    p.let("w", str(index % z.warehouses + 1))
    p.let("kind", "rnd(1, 100)")  # the first draw: tpcc_sp.next_kind reads it
    p.jump_unless("kind > 45", "new_order")
    p.jump_unless("kind > 88", "payment")
    p.jump_unless("kind > 92", "order_status")
    p.jump_unless("kind > 96", "delivery")
    p.jump("stock_level")
    b.new_order()
    b.payment()
    b.order_status()
    b.delivery()
    b.stock_level()
    p.label("end")
    p.check()
    return p
