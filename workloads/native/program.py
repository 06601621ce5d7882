r"""A transaction as a small program, for the native executor (``workloads/native/_native.c``).

A :class:`Program` is what one transaction does, as data: variables set from expressions
(uniform integers in a range, pgbench's ``\set`` arithmetic), prepared statements whose
parameters are variables (an integer, or a string picked from a pool by the variable's value),
and text statements (BEGIN, COMMIT). A workload that can say its transaction this way gets it run
in C on a connection the C side owns (:mod:`workloads.native.native`); the Python loop stays the fallback
and the reference: :func:`reference_txn` runs the same program through a Python
:class:`~workloads.clients.clientbase.Client` with the same generator (splitmix64, as the C side), so the
same seed gives the same statements, parameters and rows on both paths (tests compare them).

Client-side TPC-C needs more than straight lines: jumps (:meth:`Program.label`, :meth:`Program.jump`),
values read from the last statement's result (its row count, a number, a text into a string register),
indexed variables and a sort (the order lines), string building and comparison (Payment's customer
data), and named outcome counters (:meth:`Program.tally`). The opcodes are listed in
:mod:`workloads.native.opcodes`; :func:`compile_py` turns a small Python expression into their words.

The words are checked here (:meth:`Program.check`, :mod:`workloads.native.progcheck`) and again by the C
loader, so a bad program is a ValueError, never a crash; the Python interpreter is
:mod:`workloads.native.progref`.
"""

from __future__ import annotations

import ast
from array import array
from array import array as Words  # for annotations inside Program, whose method ``array`` hides the class
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from workloads.native import progcheck
from workloads.native.opcodes import *  # noqa: F403 (the opcodes and limits are this module's names too)
from workloads.native.opcodes import (F_CENTS, F_INT, F_LIT, F_SREG, INT64, MAX_SREGS, MAX_STR, MAX_TALLY, MAX_VARS,
                               OP_ABS, OP_ADD, OP_COL, OP_CONST, OP_DIV, OP_EQ, OP_EXEC, OP_FDIV, OP_FMT,
                               OP_GREATEST, OP_JMP, OP_JZ, OP_LEAST, OP_LT, OP_MOD, OP_MUL, OP_NEG, OP_OR,
                               OP_RANDOM, OP_ROWS, OP_SCOL, OP_SIMPLE, OP_SORT, OP_STORE, OP_STOREX, OP_SUB,
                               OP_TALLY, OP_VAR, OP_VARX, JUMPS, width)
from workloads.native.progcheck import Unsupported
from workloads.native.progref import (GOLDEN, GOLDEN_INV, MASK, Draw, Tally, draw_at, draws_between, reference_txn,
                               seed_state, tallied)
from workloads.clients.sql import Stmt

__all__ = ["GOLDEN", "GOLDEN_INV", "MASK", "Draw", "Param", "Program", "Tally", "Unsupported", "compile_expr",
           "compile_py", "draw_at", "draws_between", "reference_txn", "seed_state", "tallied"]
BINARY = {ast.Add: OP_ADD, ast.Sub: OP_SUB, ast.Mult: OP_MUL}


@dataclass(frozen=True)
class Param:
    """A statement parameter: variable ``var``; ``pool`` -1 for the integer itself, else the string
    ``pools[pool][value mod len]``; :meth:`cents` and :meth:`sreg` for the other kinds (the word the C side
    reads is ``pool + 1``)."""

    var: int
    pool: int = -1

    @classmethod
    def cents(cls, var: int) -> "Param":
        """The integer in variable ``var`` sent as a decimal with two places (1234 -> "12.34")."""
        return cls(var, -2)

    @classmethod
    def sreg(cls, reg: int) -> "Param":
        """The text in string register ``reg``."""
        return cls(reg, -3)


@dataclass
class Program:
    """One transaction as words for the C loop; build it with the methods below."""

    stmts: list[Stmt] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    pools: list[tuple[str, ...]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # variable names, index = variable number
    words: list[int] = field(default_factory=list)
    tallies: list[str] = field(default_factory=list)  # OP_TALLY k counts tallies[k] (Runner.extra)
    labels: dict[str, int] = field(default_factory=dict, repr=False)
    fixups: dict[str, list[int]] = field(default_factory=dict, repr=False)  # words waiting for a label

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

    # -- control flow and results ----------------------------------------------------

    def emit(self, *words: int) -> None:
        """Raw words (expressions from :func:`compile_py`)."""
        self.words += words

    def let(self, name: str, src: str) -> int:
        """``name = src``, a :func:`compile_py` expression."""
        return self.expr(name, compile_py(src, self.var))

    def label(self, name: str) -> None:
        """Mark the next instruction as ``name`` (the jumps to it, before and after, get its word index)."""
        if name in self.labels:
            raise Unsupported(f"label {name} twice")
        self.labels[name] = len(self.words)
        for at in self.fixups.pop(name, []):
            self.words[at] = len(self.words)

    def _target(self, name: str) -> int:
        if name in self.labels:
            return self.labels[name]
        self.fixups.setdefault(name, []).append(len(self.words) + 1)
        return -1

    def jump(self, name: str) -> None:
        self.words += [OP_JMP, self._target(name)]

    def jump_unless(self, src: str, name: str) -> None:
        """Go to ``name`` when ``src`` (a :func:`compile_py` expression) is 0."""
        self.words += compile_py(src, self.var)
        self.words += [OP_JZ, self._target(name)]

    def read(self, name: str, col: int, row: str = "0", scale: int = 0) -> int:
        """``name`` = column ``col`` of row ``row`` (an expression) of the last result, times 10**scale."""
        return self.expr(name, [*compile_py(row, self.var), OP_COL, col, scale])

    def read_text(self, reg: int, col: int, row: str = "0") -> None:
        """String register ``reg`` = the text of column ``col`` of row ``row`` of the last result."""
        self.words += [*compile_py(row, self.var), OP_SCOL, col, reg]

    def store_at(self, base: str, index: str, src: str) -> None:
        """Variable ``base`` + ``index`` = ``src`` (an array of variables from ``base``: :meth:`array`)."""
        self.words += [*compile_py(index, self.var), *compile_py(src, self.var), OP_STOREX, self.var(base)]

    def array(self, base: str, size: int) -> int:
        """``size`` consecutive variables ``base``, ``base.1``, ...; the first's number."""
        first = self.var(base)
        for i in range(1, size):
            self.var(f"{base}.{i}")
        if self.names.index(f"{base}.{size - 1}" if size > 1 else base) != first + size - 1:
            raise Unsupported(f"array {base} is not consecutive")
        return first

    def sort(self, base: str, stride: int, count: str) -> None:
        """Sort ``count`` records of ``stride`` variables from ``base``, lexicographically."""
        self.words += [*compile_py(count, self.var), OP_SORT, self.var(base), stride]

    def fmt(self, reg: int, max_bytes: int, parts: Sequence[tuple[int, int | str]]) -> None:
        """String register ``reg`` = the parts joined, cut at ``max_bytes``: (F_INT or F_CENTS, variable name),
        (F_SREG, register), (F_LIT, text)."""
        words = [OP_FMT, reg, max_bytes, len(parts)]
        for kind, v in parts:
            if kind == F_LIT:
                words += [kind, self.literal(str(v))]
            elif kind == F_SREG:
                words += [kind, int(v)]
            else:
                words += [kind, self.var(str(v))]
        self.words += words

    def literal(self, text: str) -> int:
        """A one-string pool (for :meth:`fmt` and OP_SEQ), shared by equal texts."""
        if (text,) in self.pools:
            return self.pools.index((text,))
        return self.pool([text])

    def tally(self, name: str) -> None:
        """Count outcome ``name`` (into the runner's ``extra``) when the transaction ends without an error."""
        if name not in self.tallies:
            if len(self.tallies) >= MAX_TALLY:
                raise Unsupported(f"more than {MAX_TALLY} tallies")
            self.tallies.append(name)
        self.words += [OP_TALLY, self.tallies.index(name)]

    def simple(self, sql: str) -> None:
        """Send ``sql`` as text (transaction control, statements without parameters)."""
        if sql not in self.texts:
            self.texts.append(sql)
        self.words += [OP_SIMPLE, self.texts.index(sql)]

    # -- reading --------------------------------------------------------------------

    @property
    def branches(self) -> bool:
        """Whether the program jumps (then its draws and statements differ between transactions)."""
        return any(op in JUMPS for op, _ in self.ops())

    @property
    def draws(self) -> int:
        """Uniform draws one transaction makes (every run makes them all when the program has no branches)."""
        return sum(1 for op, _ in self.ops() if op == OP_RANDOM)

    @property
    def statements(self) -> int:
        """Statements one transaction sends (what the Python loop's ``txn()`` returns) when the program has no
        branches; with branches, the statements in its text (the C side counts those sent)."""
        return sum(1 for op, _ in self.ops() if op in (OP_EXEC, OP_SIMPLE))

    def ops(self) -> list[tuple[int, int]]:
        """(opcode, word index) of each instruction."""
        out, pc, w = [], 0, self.words
        while pc < len(w):
            out.append((w[pc], pc))
            pc += width(w, pc)
        return out

    def check(self) -> None:
        """The checks the C loader makes, as Unsupported (ValueError) here, before any C call."""
        if self.fixups:
            raise Unsupported(f"jumps to labels never placed: {', '.join(sorted(self.fixups))}")
        progcheck.check(self)

    def packed(self) -> Words[int]:
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




# -- small Python expressions (the built-in programs' own) ------------------------------------

_PY_BINARY = {ast.Add: OP_ADD, ast.Sub: OP_SUB, ast.Mult: OP_MUL, ast.FloorDiv: OP_FDIV, ast.Mod: OP_MOD,
              ast.BitOr: OP_OR}


def compile_py(src: str, var: Callable[[str], int]) -> list[int]:
    """Words of an integer expression in Python syntax: names are variables (``var(name)`` numbers them),
    ``+ - * // % |`` and one comparison (``< <= > >= == !=``, 1 or 0) with Python's meaning, ``rnd(lo, hi)``
    (uniform, inclusive), ``rows()`` (the last result's row count), ``at(base, i)`` (variable base + i),
    ``min``/``max``, ``abs``. Unsupported for anything else."""
    try:
        tree = ast.parse(src, mode="eval").body
    except SyntaxError:
        raise Unsupported(f"cannot parse {src!r}") from None
    out: list[int] = []

    def gen(n: ast.AST) -> None:
        if isinstance(n, ast.Constant) and type(n.value) is int:
            if not INT64[0] <= n.value <= INT64[1]:
                raise Unsupported("a constant does not fit in 64 bits")
            out.extend((OP_CONST, n.value))
        elif isinstance(n, ast.Name):
            out.extend((OP_VAR, var(n.id)))
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            gen(n.operand)
            out.append(OP_NEG)
        elif isinstance(n, ast.BinOp) and type(n.op) in _PY_BINARY:
            gen(n.left)
            gen(n.right)
            out.append(_PY_BINARY[type(n.op)])
        elif isinstance(n, ast.Compare) and len(n.ops) == 1:
            _compare(n.left, n.ops[0], n.comparators[0])
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            _call(n.func.id, n.args)
        else:
            raise Unsupported(f"expression {src!r}")

    def _compare(a: ast.AST, op: ast.cmpop, b: ast.AST) -> None:
        # a < b: LT; a > b: b < a; a <= b: not (b < a); a >= b: not (a < b); != : not ==
        swap = isinstance(op, (ast.Gt, ast.LtE))
        gen(b if swap else a)
        gen(a if swap else b)
        if isinstance(op, (ast.Eq, ast.NotEq)):
            out.append(OP_EQ)
        elif isinstance(op, (ast.Lt, ast.Gt, ast.LtE, ast.GtE)):
            out.append(OP_LT)
        else:
            raise Unsupported(f"comparison in {src!r}")
        if isinstance(op, (ast.NotEq, ast.LtE, ast.GtE)):
            out.extend((OP_CONST, 0, OP_EQ))

    def _call(name: str, args: list[ast.expr]) -> None:
        if name == "rnd" and len(args) == 2:
            gen(args[0])
            gen(args[1])
            out.append(OP_RANDOM)
        elif name == "rows" and not args:
            out.append(OP_ROWS)
        elif name == "at" and len(args) == 2 and isinstance(args[0], ast.Name):
            gen(args[1])
            out.extend((OP_VARX, var(args[0].id)))
        elif name == "abs" and len(args) == 1:
            gen(args[0])
            out.append(OP_ABS)
        elif name in ("min", "max") and args:
            for a in args:
                gen(a)
            out.extend((OP_LEAST if name == "min" else OP_GREATEST, len(args)))
        else:
            raise Unsupported(f"function {name}() in {src!r}")
    gen(tree)
    return out
