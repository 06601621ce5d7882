"""The reference: a :class:`~workloads.native.program.Program` run in Python through a workload client, with the same
generator as ``workloads/native/_native.c`` (splitmix64), so the same seed gives the same statements, parameters and
rows on both paths (tests compare them). It is also the Python loop of workloads whose transaction is only
said as a program (TPC-C), so the two loops cannot drift apart.

Values read from results follow the C side's rules: a number is the column's text read as an integer times
10**scale (``[+-]digits[.digits]``, truncated past the scale, at most 18 digits; NULL is 0); a text is the
column's text (NULL is ""), at most 1024 bytes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from diag.core.errors import DbError
from workloads.native.opcodes import (F_CENTS, F_INT, F_SREG, MAX_DIGITS, MAX_JUMPS, MAX_SREGS, MAX_STR, OP_ABS, OP_ADD,
                               OP_COL, OP_CONST, OP_DIV, OP_EQ, OP_EXEC, OP_FDIV, OP_FMT, OP_GREATEST, OP_JMP,
                               OP_JZ, OP_LEAST, OP_LT, OP_MOD, OP_MUL, OP_NEG, OP_OR, OP_RANDOM, OP_ROWS, OP_SCOL,
                               OP_SEQ, OP_SIMPLE, OP_SORT, OP_STORE, OP_STOREX, OP_SUB, OP_TALLY, OP_VAR, OP_VARX,
                               P_CENTS, P_INT, P_SREG, width)

if TYPE_CHECKING:
    from workloads.native.program import Program

MASK = (1 << 64) - 1
_NUM = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?")


def seed_state(seed: int) -> bytearray:
    """The generator's 8-byte state for ``seed`` (as workloads/native/_native.c reads it): splitmix64's output for
    ``seed``, not ``seed`` times its increment. Clients' seeds are consecutive (ClientCtx.key_seed) and the
    generator adds that increment at each draw, so with the plain product client i + 1 drew what client i drew one
    draw later: every client walked the same sequence, and a step touched about (draws per client + clients)
    distinct keys instead of draws per client times clients."""
    z = (seed * GOLDEN) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return bytearray((z ^ (z >> 31)).to_bytes(8, "little"))


def _wrap(v: int) -> int:
    """Two's-complement 64-bit wrap, as the C side's arithmetic."""
    v &= MASK
    return v - (1 << 64) if v >> 63 else v


class Draw:
    """splitmix64 and the multiply-shift reduction of ``workloads/native/_native.c``, in Python."""

    def __init__(self, state: bytearray) -> None:
        self.s = int.from_bytes(state, "little")

    def uniform(self, lo: int, hi: int) -> int:
        self.s = (self.s + 0x9E3779B97F4A7C15) & MASK
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        span = ((hi - lo) & MASK) + 1
        return _wrap(lo + ((z * span) >> 64))


def script_error(msg: str) -> DbError:
    """A program's own error (not the server's): code "script", as the C side's."""
    return DbError(msg, code="script", kind="other")


def _arith(op: int, a: int, b: int) -> int:
    if op == OP_ADD:
        return _wrap(a + b)
    if op == OP_SUB:
        return _wrap(a - b)
    if op == OP_MUL:
        return _wrap(a * b)
    if op == OP_LT:
        return int(a < b)
    if op == OP_EQ:
        return int(a == b)
    if op == OP_OR:
        return a | b
    if b == 0:
        raise script_error("division by zero in a \\set expression")
    if op == OP_DIV:  # truncates toward zero (pgbench, C)
        q = abs(a) // abs(b)
        return _wrap(q if (a >= 0) == (b > 0) else -q)
    return _wrap(a // b if op == OP_FDIV else a % b)


def _text(v: object) -> str:
    return bytes(v).decode() if isinstance(v, (bytes, bytearray, memoryview)) else str(v)


def parse_scaled(v: object, scale: int) -> int:
    """A result value as the C side reads it for OP_COL: its text as an integer times 10**scale; NULL 0."""
    if v is None:
        return 0
    m = _NUM.fullmatch(_text(v))
    if m is None or not (m[2] or m[3]):
        raise script_error("a result value the program reads as a number is not one")
    digits = (m[2] + ((m[3] or "") + "0" * scale)[:scale]).lstrip("0")
    if len(digits) > MAX_DIGITS:
        raise script_error("a result value the program reads as a number is not one")
    x = int(digits or "0")
    return -x if m[1] == "-" else x


def cents(v: int) -> str:
    """An integer number of cents as the decimal the C side sends (``-1234`` -> ``"-12.34"``)."""
    a = abs(v)
    return f"{'-' if v < 0 else ''}{a // 100}.{a % 100:02d}"


class _State:
    """One client's interpreter state: variables (kept across transactions, as in a C batch), string registers,
    the last statement's result."""

    def __init__(self, nvars: int) -> None:
        self.vars = [0] * max(nvars, 1)
        self.sregs = [""] * MAX_SREGS
        self.last: Sequence[Sequence[Any]] | None = None
        self.nrows = 0

    def cell(self, row: int, col: int) -> object:
        if self.last is None:
            raise script_error("the program reads a result before any statement")
        if not 0 <= row < self.nrows:
            raise script_error("the program reads a row past its result")
        if len(self.last) != self.nrows:
            raise script_error("the reference ran a statement without its rows that the program reads")
        r = self.last[row]
        if col >= len(r):
            raise script_error("the program reads a column past its result")
        return r[col]


def reference_txn(prog: Program, run: Sequence[Callable[[Sequence[object]], Any]],
                  execute: Callable[[str], object], draw: Draw, rows: list[int],
                  extra: Counter[str] | None = None) -> Callable[[], int]:
    """One transaction of ``prog`` in Python: ``run[i]`` runs prepared statement ``i`` (a Query's ``run``,
    returning its row count, or its ``rows``, returning the rows a program can read), its row count added
    to ``rows[i]``; ``execute`` sends text; ``extra`` counts the program's tallies. Returns a ``txn()``
    like the workloads' (statements sent). Long because its inner txn() is one branch per opcode."""
    w, texts, pools = prog.words, prog.texts, prog.pools
    st = _State(len(prog.names))
    vars_, sregs = st.vars, st.sregs
    nv, end = len(prog.names), len(w)
    steps = {pc: width(w, pc) for pc in _starts(w)}

    def txn() -> int:
        """One transaction; the statements it sent. Long because it is one branch per opcode, as the C loop."""
        stack: list[int] = []
        push, pop = stack.append, stack.pop
        sent = jumps = 0
        tallies: list[int] = []
        st.last, st.nrows = None, 0
        pc = 0
        while pc < end:
            op = w[pc]
            nxt = pc + steps[pc]
            if op == OP_CONST:
                push(w[pc + 1])
            elif op == OP_VAR:
                push(vars_[w[pc + 1]])
            elif op == OP_STORE:
                vars_[w[pc + 1]] = pop()
            elif op == OP_RANDOM:
                hi, lo = pop(), pop()
                if hi < lo:
                    raise script_error("random(lo, hi): the upper bound is below the lower one")
                push(draw.uniform(lo, hi))
            elif OP_ADD <= op <= OP_MOD or OP_LT <= op <= OP_OR:
                b, a = pop(), pop()
                push(_arith(op, a, b))
            elif op == OP_JZ or op == OP_JMP:
                if op == OP_JMP or pop() == 0:
                    jumps += 1
                    if jumps > MAX_JUMPS:
                        raise script_error("the program took more than 100000 jumps in one transaction")
                    nxt = w[pc + 1]
            elif op == OP_EXEC:
                i, n = w[pc + 1], w[pc + 2]
                args: list[object] = []
                for k, v in zip(w[pc + 3: pc + 3 + 2 * n: 2], w[pc + 4: pc + 4 + 2 * n: 2]):
                    args.append(vars_[v] if k == P_INT else cents(vars_[v]) if k == P_CENTS
                                else sregs[v] if k == P_SREG else pools[k - 1][vars_[v] % len(pools[k - 1])])
                res = run[i](args)
                if isinstance(res, int):
                    st.last, st.nrows = (), res
                else:
                    st.last, st.nrows = res, len(res)
                rows[i] += st.nrows
                sent += 1
            elif op == OP_SIMPLE:
                execute(texts[w[pc + 1]])
                sent += 1
            elif op == OP_ROWS:
                push(st.nrows if st.last is not None else 0)
            elif op == OP_COL:
                push(parse_scaled(st.cell(pop(), w[pc + 1]), w[pc + 2]))
            elif op == OP_SCOL:
                cell = st.cell(pop(), w[pc + 1])
                s = "" if cell is None else _text(cell)
                if len(s.encode()) > MAX_STR:
                    raise script_error("a result value is longer than 1024 bytes")
                sregs[w[pc + 2]] = s
            elif op == OP_VARX or op == OP_STOREX:
                val = pop() if op == OP_STOREX else 0
                i, base = pop(), w[pc + 1]
                if not 0 <= i < nv - base:
                    raise script_error("the program indexes a variable past the last one")
                if op == OP_VARX:
                    push(vars_[base + i])
                else:
                    vars_[base + i] = val
            elif op == OP_SORT:
                _sort(vars_, pop(), w[pc + 1], w[pc + 2], nv)
            elif op == OP_SEQ:
                push(int(sregs[w[pc + 1]] == pools[w[pc + 2]][0]))
            elif op == OP_FMT:
                sregs[w[pc + 1]] = _fmt(w, pc, vars_, sregs, pools)
            elif op == OP_TALLY:
                tallies.append(w[pc + 1])
            elif op == OP_NEG:
                push(_wrap(-pop()))
            elif op == OP_ABS:
                push(_wrap(abs(pop())))
            elif op in (OP_LEAST, OP_GREATEST):
                k = w[pc + 1]
                vals = stack[-k:]
                del stack[-k:]
                push(min(vals) if op == OP_LEAST else max(vals))
            pc = nxt
        if extra is not None:
            for k in tallies:
                extra[prog.tallies[k]] += 1
        return sent
    return txn


def _starts(w: list[int]) -> list[int]:
    out, pc = [], 0
    while pc < len(w):
        out.append(pc)
        pc += width(w, pc)
    return out


def _sort(vars_: list[int], k: int, base: int, stride: int, nv: int) -> None:
    if not 0 <= k <= (nv - base) // stride:
        raise script_error("the program sorts records past the last variable")
    recs = sorted(vars_[base + i * stride: base + (i + 1) * stride] for i in range(k))
    vars_[base: base + k * stride] = [x for r in recs for x in r]


def _fmt(w: list[int], pc: int, vars_: list[int], sregs: list[str], pools: list[tuple[str, ...]]) -> str:
    mx, n = w[pc + 2], w[pc + 3]
    parts = []
    for kind, v in zip(w[pc + 4: pc + 4 + 2 * n: 2], w[pc + 5: pc + 5 + 2 * n: 2]):
        parts.append(str(vars_[v]) if kind == F_INT else cents(vars_[v]) if kind == F_CENTS
                     else sregs[v] if kind == F_SREG else pools[v][0])
    s = "".join(parts)
    b = s.encode()
    return b[:mx].decode(errors="ignore") if len(b) > mx else s


# -- replaying a program's draws -------------------------------------------------------------

GOLDEN = 0x9E3779B97F4A7C15  # splitmix64's step: each draw adds it to the state
GOLDEN_INV = pow(GOLDEN, -1, 1 << 64)


def draw_at(state: int, k: int, lo: int, hi: int) -> int:
    """Draw ``k`` (0-based) from generator state ``state``, as :meth:`Draw.uniform` would give it after
    ``k`` earlier draws: splitmix64 advances its state by a constant, so any draw is reached at once."""
    d = Draw(bytearray(((state + k * GOLDEN) & MASK).to_bytes(8, "little")))
    return d.uniform(lo, hi)


def draws_between(before: int, after: int) -> int:
    """How many draws took the generator from state ``before`` to ``after``."""
    return ((after - before) & MASK) * GOLDEN_INV & MASK


# tally(state before, state after, whether the last run failed, counters): a workload's named outcomes of the
# runs between two generator states (workloads whose outcomes follow from their draws: TPC-C's stored procedures).
Tally = Callable[[int, int, bool, "Counter[str]"], None]


def tallied(run: Callable[[], int], state: Callable[[], int], tally: Tally, extra: Counter[str]) -> Callable[[], int]:
    """``run`` (one transaction) with its outcome tallied from the generator's ``state()`` around it."""
    def txn() -> int:
        s0 = state()
        try:
            n = run()
        except DbError:
            tally(s0, state(), True, extra)
            raise
        tally(s0, state(), False, extra)
        return n
    return txn
