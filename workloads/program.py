r"""A transaction as a small program, for the native executor (``workloads/_native.c``).

A :class:`Program` is what one transaction does, as data: variables set from expressions
(uniform integers in a range, pgbench's ``\set`` arithmetic), prepared statements whose
parameters are variables (an integer, or a string picked from a pool by the variable's value),
and text statements (BEGIN, COMMIT). A workload that can say its transaction this way gets it run
in C on a connection the C side owns (:mod:`workloads.native`); the Python loop stays the fallback
and the reference: :func:`reference_txn` runs the same program through a Python
:class:`~workloads.clientbase.Client` with the same generator (splitmix64, as the C side), so the
same seed gives the same statements, parameters and rows on both paths (tests compare them).

The words are checked here (:meth:`Program.check`) and again by the C loader, so a bad program is
a ValueError, never a crash.
"""

from __future__ import annotations

import ast
from array import array
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from diag.errors import DbError
from workloads.sql import Stmt

# Opcodes: the same numbers as workloads/_native.c (tests/unit/test_native_program.py compares them).
(OP_CONST, OP_VAR, OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_NEG, OP_ABS, OP_LEAST, OP_GREATEST,
 OP_RANDOM, OP_STORE, OP_EXEC, OP_SIMPLE) = range(1, 17)
WITH_ARG = frozenset({OP_CONST, OP_VAR, OP_LEAST, OP_GREATEST, OP_STORE, OP_SIMPLE})
BINARY = {ast.Add: OP_ADD, ast.Sub: OP_SUB, ast.Mult: OP_MUL}
# Limits of the C side (workloads/_native.c)
MAX_STR, MAX_VARS, MAX_STMTS, MAX_PARAMS, MAX_PROG, MAX_STACK = 1024, 256, 64, 32, 8192, 64
INT64 = (-(1 << 63), (1 << 63) - 1)
MASK = (1 << 64) - 1


class Unsupported(ValueError):
    """The transaction cannot be said as a program (the Python loop runs it)."""


@dataclass(frozen=True)
class Param:
    """A statement parameter: variable ``var``; ``pool`` -1 for the integer itself, else the string
    ``pools[pool][value mod len]``."""

    var: int
    pool: int = -1


@dataclass
class Program:
    """One transaction as words for the C loop; build it with the methods below."""

    stmts: list[Stmt] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    pools: list[tuple[str, ...]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # variable names, index = variable number
    words: list[int] = field(default_factory=list)

    # -- building -------------------------------------------------------------------

    def var(self, name: str) -> int:
        """The number of variable ``name`` (a new one the first time)."""
        if name not in self.names:
            if len(self.names) >= MAX_VARS:
                raise Unsupported(f"more than {MAX_VARS} variables")
            self.names.append(name)
        return self.names.index(name)

    def pool(self, strings: Sequence[str]) -> int:
        """Add a string pool; its number for :class:`Param`."""
        if not strings or any(len(s.encode()) > MAX_STR or "\0" in s for s in strings):
            raise Unsupported("a string pool must be non-empty, strings of at most 1024 bytes without NUL")
        self.pools.append(tuple(strings))
        return len(self.pools) - 1

    def uniform(self, name: str, lo: int, hi: int) -> int:
        """``name = random(lo, hi)`` (inclusive); the variable's number."""
        self.words += [OP_CONST, lo, OP_CONST, hi, OP_RANDOM, OP_STORE, self.var(name)]
        return self.var(name)

    def add(self, name: str, src: str, const: int) -> int:
        """``name = src + const``."""
        self.words += [OP_VAR, self.var(src), OP_CONST, const, OP_ADD, OP_STORE, self.var(name)]
        return self.var(name)

    def expr(self, name: str, ops: Sequence[int]) -> int:
        """``name = <ops>`` (expression words, e.g. from :func:`compile_expr`)."""
        self.words += [*ops, OP_STORE, self.var(name)]
        return self.var(name)

    def execute(self, sql: str | Stmt, params: Sequence[Param]) -> None:
        """Run a prepared statement (``?`` placeholders) with ``params``."""
        stmt = sql if isinstance(sql, Stmt) else Stmt.parse(sql)
        if stmt.nparams != len(params):
            raise Unsupported(f"{stmt.nparams} placeholders, {len(params)} parameters")
        if stmt not in self.stmts:
            self.stmts.append(stmt)
        self.words += [OP_EXEC, self.stmts.index(stmt), len(params)]
        for p in params:
            self.words += [p.pool + 1, p.var]

    def simple(self, sql: str) -> None:
        """Send ``sql`` as text (transaction control, statements without parameters)."""
        if sql not in self.texts:
            self.texts.append(sql)
        self.words += [OP_SIMPLE, self.texts.index(sql)]

    # -- reading --------------------------------------------------------------------

    @property
    def draws(self) -> int:
        """Uniform draws one transaction makes (every run makes them all: a program has no branches)."""
        return sum(1 for op, _ in self.ops() if op == OP_RANDOM)

    @property
    def statements(self) -> int:
        """Statements one transaction sends (what the Python loop's ``txn()`` returns)."""
        return sum(1 for op, _ in self.ops() if op in (OP_EXEC, OP_SIMPLE))

    def ops(self) -> list[tuple[int, int]]:
        """(opcode, word index) of each instruction."""
        out, pc, w = [], 0, self.words
        while pc < len(w):
            op = w[pc]
            out.append((op, pc))
            pc += 3 + 2 * w[pc + 2] if op == OP_EXEC else 2 if op in WITH_ARG else 1
        return out

    def check(self) -> None:
        """The checks the C loader makes, as Unsupported (ValueError) here, before any C call."""
        w, depth, pc = self.words, 0, 0
        if not w or len(w) > MAX_PROG or len(self.stmts) > MAX_STMTS or len(self.texts) > MAX_STMTS:
            raise Unsupported("empty program or too many words/statements")
        if any(not INT64[0] <= x <= INT64[1] for x in w):
            raise Unsupported("a constant does not fit in 64 bits")
        if any(len(t.encode()) > MAX_STR or "\0" in t for t in self.texts):
            raise Unsupported("a text statement is longer than 1024 bytes")
        while pc < len(w):
            op = w[pc]
            arg = w[pc + 1] if pc + 1 < len(w) else None
            if op in (OP_CONST, OP_VAR):
                if arg is None or (op == OP_VAR and not 0 <= arg < len(self.names)):
                    raise Unsupported(f"bad operand at {pc}")
                depth += 1
            elif op in (OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_RANDOM):
                if depth < 2:
                    raise Unsupported(f"stack underflow at {pc}")
                depth -= 1
            elif op in (OP_LEAST, OP_GREATEST):
                if arg is None or not 1 <= arg <= depth:
                    raise Unsupported(f"bad argument count at {pc}")
                depth -= arg - 1
            elif op == OP_STORE:
                if arg is None or depth != 1 or not 0 <= arg < len(self.names):
                    raise Unsupported(f"bad store at {pc}")
                depth = 0
            elif op == OP_EXEC:
                if depth or pc + 2 >= len(w) or not 0 <= w[pc + 1] < len(self.stmts):
                    raise Unsupported(f"bad statement at {pc}")
                n = w[pc + 2]
                if n != self.stmts[w[pc + 1]].nparams or n > MAX_PARAMS or pc + 3 + 2 * n > len(w):
                    raise Unsupported(f"bad parameters at {pc}")
                pairs = w[pc + 3: pc + 3 + 2 * n]
                if any(not 0 <= k <= len(self.pools) or not 0 <= v < len(self.names)
                       for k, v in zip(pairs[0::2], pairs[1::2])):
                    raise Unsupported(f"bad parameter at {pc}")
            elif op == OP_SIMPLE:
                if depth or arg is None or not 0 <= arg < len(self.texts):
                    raise Unsupported(f"bad text at {pc}")
            elif op in (OP_NEG, OP_ABS):
                if depth < 1:
                    raise Unsupported(f"stack underflow at {pc}")
            else:
                raise Unsupported(f"unknown op {op} at {pc}")
            if depth < 0 or depth > MAX_STACK:
                raise Unsupported(f"stack under- or overflow at {pc}")
            pc += 3 + 2 * w[pc + 2] if op == OP_EXEC else 2 if op in WITH_ARG else 1
        if depth:
            raise Unsupported("values left on the stack")

    def packed(self) -> array:
        return array("q", self.words)


# -- \set expressions (workloads.custom's compiled form) -----------------------------------

def compile_expr(src: str, var: Callable[[str], int]) -> list[int]:
    """Words of a ``\\set`` expression in :mod:`workloads.custom`'s compiled Python form (``v_<name>``,
    ``_uniform(a, b, rnd)``, ``_div``/``_fdiv``/``_mod``, ``abs``, ``min((...,))``/``max((...,))``);
    ``var(name)`` numbers a variable. Unsupported for anything else."""
    try:
        tree = ast.parse(src, mode="eval").body
    except SyntaxError:
        raise Unsupported(f"cannot parse {src!r}") from None
    out: list[int] = []
    calls = {"_div": OP_DIV, "_fdiv": OP_FDIV, "_mod": OP_MOD}

    def gen(n: ast.AST) -> None:
        if isinstance(n, ast.Constant) and type(n.value) is int:
            if not INT64[0] <= n.value <= INT64[1]:
                raise Unsupported("a constant does not fit in 64 bits")
            out.extend((OP_CONST, n.value))
        elif isinstance(n, ast.Name) and n.id.startswith("v_"):
            out.extend((OP_VAR, var(n.id[2:])))
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            gen(n.operand)
            out.append(OP_NEG)
        elif isinstance(n, ast.BinOp) and type(n.op) in BINARY:
            gen(n.left)
            gen(n.right)
            out.append(BINARY[type(n.op)])
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            name, args = n.func.id, n.args
            if name == "_uniform" and len(args) == 3:
                gen(args[0])
                gen(args[1])
                out.append(OP_RANDOM)
            elif name in calls and len(args) == 2:
                gen(args[0])
                gen(args[1])
                out.append(calls[name])
            elif name == "abs" and len(args) == 1:
                gen(args[0])
                out.append(OP_ABS)
            elif name in ("min", "max") and len(args) == 1 and isinstance(args[0], ast.Tuple) and args[0].elts:
                for a in args[0].elts:
                    gen(a)
                out.extend((OP_LEAST if name == "min" else OP_GREATEST, len(args[0].elts)))
            else:
                raise Unsupported(f"function {name}() in {src!r}")
        else:
            raise Unsupported(f"expression {src!r}")
    gen(tree)
    return out


# -- the reference: the same program through a Python client ----------------------------------

def seed_state(seed: int) -> bytearray:
    """The generator's 8-byte state for ``seed`` (as workloads/_native.c reads it)."""
    return bytearray(((seed * 0x9E3779B97F4A7C15) & MASK).to_bytes(8, "little"))


def _wrap(v: int) -> int:
    """Two's-complement 64-bit wrap, as the C side's arithmetic."""
    v &= MASK
    return v - (1 << 64) if v >> 63 else v


class Draw:
    """splitmix64 and the multiply-shift reduction of ``workloads/_native.c``, in Python."""

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


def _script_error(msg: str) -> DbError:
    return DbError(msg, code="script", kind="other")


def _arith(op: int, a: int, b: int) -> int:
    if op == OP_ADD:
        return _wrap(a + b)
    if op == OP_SUB:
        return _wrap(a - b)
    if op == OP_MUL:
        return _wrap(a * b)
    if b == 0:
        raise _script_error("division by zero in a \\set expression")
    if op == OP_DIV:  # truncates toward zero (pgbench, C)
        q = abs(a) // abs(b)
        return _wrap(q if (a >= 0) == (b > 0) else -q)
    return _wrap(a // b if op == OP_FDIV else a % b)


def reference_txn(prog: Program, run: Sequence[Callable[[Sequence[object]], int]],
                  execute: Callable[[str], object], draw: Draw, rows: list[int]) -> Callable[[], int]:
    """One transaction of ``prog`` in Python: ``run[i]`` runs prepared statement ``i`` (a Query's ``run``,
    returning its row count, added to ``rows[i]``), ``execute`` sends text. Returns a ``txn()`` like the
    workloads' (statements sent)."""
    ops = prog.ops()
    w, texts = prog.words, prog.texts
    pools = prog.pools
    vars_ = [0] * max(len(prog.names), 1)

    def txn() -> int:
        stack: list[int] = []
        sent = 0
        for op, pc in ops:
            if op == OP_CONST:
                stack.append(w[pc + 1])
            elif op == OP_VAR:
                stack.append(vars_[w[pc + 1]])
            elif op == OP_STORE:
                vars_[w[pc + 1]] = stack.pop()
            elif op == OP_RANDOM:
                hi, lo = stack.pop(), stack.pop()
                if hi < lo:
                    raise _script_error("random(lo, hi): the upper bound is below the lower one")
                stack.append(draw.uniform(lo, hi))
            elif op in (OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD):
                b, a = stack.pop(), stack.pop()
                stack.append(_arith(op, a, b))
            elif op == OP_NEG:
                stack.append(_wrap(-stack.pop()))
            elif op == OP_ABS:
                stack.append(_wrap(abs(stack.pop())))
            elif op in (OP_LEAST, OP_GREATEST):
                k = w[pc + 1]
                vals = stack[-k:]
                del stack[-k:]
                stack.append(min(vals) if op == OP_LEAST else max(vals))
            elif op == OP_EXEC:
                i, n = w[pc + 1], w[pc + 2]
                args: list[object] = []
                for k, v in zip(w[pc + 3: pc + 3 + 2 * n: 2], w[pc + 4: pc + 4 + 2 * n: 2]):
                    val = vars_[v]
                    args.append(val if k == 0 else pools[k - 1][val % len(pools[k - 1])])
                rows[i] += run[i](args)
                sent += 1
            elif op == OP_SIMPLE:
                execute(texts[w[pc + 1]])
                sent += 1
        return sent
    return txn


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
