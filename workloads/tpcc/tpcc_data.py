"""The nine TPC-C tables of the ``tpcc`` workload (:mod:`workloads.tpcc.tpcc`) and their rows at load time.

Sizes follow the specification per warehouse (100,000 items, 10 districts of 3,000
customers, 900 new orders per district); a fractional scale (tests) shrinks one
warehouse. Every generator is seeded, so a load gives the same rows each time.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

from workloads.load import Dataset, Table

DISTRICTS = 10
SYLLABLES = ("BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING")
LOAD_TS = "2026-01-01 00:00:00"
C_LAST, C_ID, C_OL = 157, 259, 7911  # NURand run-time constants (fixed: data and run agree)


@dataclass(frozen=True)
class Sizes:
    warehouses: int
    items: int
    customers: int  # per district
    new_from: int   # first o_id that is still a new order

    @classmethod
    def of(cls, scale: float) -> "Sizes":
        if scale >= 1:
            return cls(int(scale), 100_000, 3000, 2101)
        f = max(scale, 0.01)
        cust = max(int(3000 * f), 30)
        return cls(1, max(int(100_000 * f), 1000), cust, cust - cust * 900 // 3000 + 1)


def last_name(n: int) -> str:
    return SYLLABLES[n // 100] + SYLLABLES[(n // 10) % 10] + SYLLABLES[n % 10]


def nurand(rnd: random.Random, a: int, x: int, y: int, c: int) -> int:
    return (((rnd.randint(0, a) | rnd.randint(x, y)) + c) % (y - x + 1)) + x


def _astr(rng: random.Random, lo: int, hi: int) -> str:
    return "".join(rng.choice(string.ascii_letters) for _ in range(rng.randint(lo, hi)))


def _nstr(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


def _data_pool(rng: random.Random, lo: int, hi: int, size: int = 211) -> list[str]:
    """Random strings, 10% with ORIGINAL in them (item and stock data)."""
    out = []
    for i in range(size):
        s = _astr(rng, lo, hi)
        if i % 10 == 0:
            p = rng.randint(0, len(s) - 8)
            s = s[:p] + "ORIGINAL" + s[p + 8:]
        out.append(s)
    return out


def _ol_counts(w: int, d: int, n: int) -> list[int]:
    r = random.Random(w * 1000 + d)
    return [r.randint(5, 15) for _ in range(n)]


# Row generators of the nine tables, each in its primary-key order, deterministic (fixed seeds).

def _warehouse_rows(z: Sizes) -> Iterator[tuple]:
    W = z.warehouses
    r = random.Random(1)
    for w in range(1, W + 1):
        yield (w, _astr(r, 6, 10), _astr(r, 10, 20), _astr(r, 10, 20), _astr(r, 10, 20), _astr(r, 2, 2),
               _nstr(r, 4) + "11111", round(r.uniform(0, 0.2), 4), "300000.00")


def _district_rows(z: Sizes) -> Iterator[tuple]:
    W, N = z.warehouses, z.customers
    r = random.Random(2)
    for w in range(1, W + 1):
        for d in range(1, DISTRICTS + 1):
            yield (d, w, _astr(r, 6, 10), _astr(r, 10, 20), _astr(r, 10, 20), _astr(r, 10, 20), _astr(r, 2, 2),
                   _nstr(r, 4) + "11111", round(r.uniform(0, 0.2), 4), "30000.00", N + 1)


def _customer_rows(z: Sizes) -> Iterator[tuple]:
    W, N = z.warehouses, z.customers
    r = random.Random(3)
    pool = [_astr(r, 300, 500) for _ in range(97)]
    words = [_astr(r, 10, 20) for _ in range(101)]
    firsts = [_astr(r, 8, 16) for _ in range(101)]
    k = 0
    for w in range(1, W + 1):
        for d in range(1, DISTRICTS + 1):
            for c in range(1, N + 1):
                k += 1
                last = last_name(c - 1 if c <= 1000 else nurand(r, 255, 0, 999, C_LAST))
                yield (c, d, w, firsts[k % 101], "OE", last, words[k % 101], words[(k + 1) % 101],
                       words[(k + 2) % 101], "ST", _nstr(r, 4) + "11111", _nstr(r, 16), LOAD_TS,
                       "BC" if r.random() < 0.1 else "GC", "50000.00", round(r.uniform(0, 0.5), 4), "-10.00",
                       "10.00", 1, 0, pool[k % 97])


def _history_rows(z: Sizes) -> Iterator[tuple]:
    W, N = z.warehouses, z.customers
    for w in range(1, W + 1):
        for d in range(1, DISTRICTS + 1):
            for c in range(1, N + 1):
                yield (c, d, w, d, w, LOAD_TS, "10.00", "history-at-load")


def _orders_rows(z: Sizes) -> Iterator[tuple]:
    W, N = z.warehouses, z.customers
    r = random.Random(4)
    for w in range(1, W + 1):
        for d in range(1, DISTRICTS + 1):
            perm = list(range(1, N + 1))
            r.shuffle(perm)
            counts = _ol_counts(w, d, N)
            for o in range(1, N + 1):
                yield (o, d, w, perm[o - 1], LOAD_TS, r.randint(1, 10) if o < z.new_from else None,
                       counts[o - 1], 1)


def _new_order_rows(z: Sizes) -> Iterator[tuple]:
    W, N = z.warehouses, z.customers
    for w in range(1, W + 1):
        for d in range(1, DISTRICTS + 1):
            for o in range(z.new_from, N + 1):
                yield (o, d, w)


def _order_line_rows(z: Sizes) -> Iterator[tuple]:
    W, N = z.warehouses, z.customers
    r = random.Random(5)
    dist = [_astr(r, 24, 24) for _ in range(53)]
    rnd, items = r.random, z.items
    for w in range(1, W + 1):
        for d in range(1, DISTRICTS + 1):
            counts = _ol_counts(w, d, N)
            for o in range(1, N + 1):
                old = o < z.new_from
                for n in range(1, counts[o - 1] + 1):
                    yield (o, d, w, n, int(rnd() * items) + 1, w, LOAD_TS if old else None, 5,
                           "0.00" if old else f"{rnd() * 9999.98 + 0.01:.2f}", dist[(o + n) % 53])


def _item_rows(z: Sizes) -> Iterator[tuple]:
    r = random.Random(6)
    names = [_astr(r, 14, 24) for _ in range(103)]
    data = _data_pool(r, 26, 50)
    rnd = r.random
    for i in range(1, z.items + 1):
        yield (i, int(rnd() * 10000) + 1, names[i % 103], f"{rnd() * 99 + 1:.2f}", data[i % 211])


def _stock_rows(z: Sizes) -> Iterator[tuple]:
    W = z.warehouses
    r = random.Random(7)
    dist = [_astr(r, 24, 24) for _ in range(59)]
    data = _data_pool(r, 26, 50)
    rnd = r.random
    for w in range(1, W + 1):
        for i in range(1, z.items + 1):
            yield (i, w, int(rnd() * 91) + 10, *[dist[(i + k) % 59] for k in range(DISTRICTS)], 0, 0, 0,
                   data[(i * 3) % 211])


def tpcc_dataset(scale: float) -> Dataset:
    """The nine tables at ``scale`` warehouses (fractional: one, shrunk; see the module docstring)."""
    z = Sizes.of(scale)
    W, N = z.warehouses, z.customers
    addr = "{p}_street_1 varchar(20), {p}_street_2 varchar(20), {p}_city varchar(20), {p}_state char(2), {p}_zip char(9)"
    ol_total = sum(sum(_ol_counts(w, d, N)) for w in range(1, W + 1) for d in range(1, DISTRICTS + 1))
    tables = [
        Table("warehouse", "w_id integer NOT NULL, w_name varchar(10), " + addr.format(p="w") +
              ", w_tax decimal(4,4), w_ytd decimal(12,2)", "w_id", (), partial(_warehouse_rows, z), W),
        Table("district", "d_id integer NOT NULL, d_w_id integer NOT NULL, d_name varchar(10), " +
              addr.format(p="d") + ", d_tax decimal(4,4), d_ytd decimal(12,2), d_next_o_id integer",
              "d_w_id, d_id", (), partial(_district_rows, z), W * DISTRICTS),
        Table("customer", "c_id integer NOT NULL, c_d_id integer NOT NULL, c_w_id integer NOT NULL, "
              "c_first varchar(16), c_middle char(2), c_last varchar(16), " + addr.format(p="c") +
              ", c_phone char(16), c_since {ts}, c_credit char(2), c_credit_lim decimal(12,2), "
              "c_discount decimal(4,4), c_balance decimal(12,2), c_ytd_payment decimal(12,2), "
              "c_payment_cnt integer, c_delivery_cnt integer, c_data varchar(500)",
              "c_w_id, c_d_id, c_id", (("idx_customer_name", "c_w_id, c_d_id, c_last, c_first"),),
              partial(_customer_rows, z), W * DISTRICTS * N),
        Table("history", "h_c_id integer, h_c_d_id integer, h_c_w_id integer, h_d_id integer, h_w_id integer, "
              "h_date {ts}, h_amount decimal(6,2), h_data varchar(24)", "", (), partial(_history_rows, z),
              W * DISTRICTS * N),
        Table("orders", "o_id integer NOT NULL, o_d_id integer NOT NULL, o_w_id integer NOT NULL, o_c_id integer, "
              "o_entry_d {ts}, o_carrier_id integer, o_ol_cnt integer, o_all_local integer",
              "o_w_id, o_d_id, o_id", (("idx_orders_customer", "o_w_id, o_d_id, o_c_id, o_id"),),
              partial(_orders_rows, z), W * DISTRICTS * N),
        Table("new_order", "no_o_id integer NOT NULL, no_d_id integer NOT NULL, no_w_id integer NOT NULL",
              "no_w_id, no_d_id, no_o_id", (), partial(_new_order_rows, z),
              W * DISTRICTS * (N - z.new_from + 1)),
        Table("order_line", "ol_o_id integer NOT NULL, ol_d_id integer NOT NULL, ol_w_id integer NOT NULL, "
              "ol_number integer NOT NULL, ol_i_id integer, ol_supply_w_id integer, ol_delivery_d {ts}, "
              "ol_quantity integer, ol_amount decimal(6,2), ol_dist_info char(24)",
              "ol_w_id, ol_d_id, ol_o_id, ol_number", (), partial(_order_line_rows, z), ol_total),
        Table("item", "i_id integer NOT NULL, i_im_id integer, i_name varchar(24), i_price decimal(5,2), "
              "i_data varchar(50)", "i_id", (), partial(_item_rows, z), z.items),
        Table("stock", "s_i_id integer NOT NULL, s_w_id integer NOT NULL, s_quantity integer, " +
              ", ".join(f"s_dist_{d:02d} char(24)" for d in range(1, DISTRICTS + 1)) +
              ", s_ytd integer, s_order_cnt integer, s_remote_cnt integer, s_data varchar(50)",
              "s_w_id, s_i_id", (), partial(_stock_rows, z), W * z.items),
    ]
    return Dataset("tpcc", 2, scale, tables)
