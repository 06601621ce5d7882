"""The checks the C loader (``verify`` in ``workloads/native/_native.c``) makes on a program, as ValueError here, before any
C call: every operand in range, the stack depth at each instruction, every jump to an instruction reached with an
empty stack, a statement's parameter an integer at every site or a string at every site."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workloads.native.opcodes import (BINARY_OPS, F_CENTS, F_INT, F_LIT, F_SREG, INT64, JUMPS, MAX_COLS, MAX_PARAMS,
                               MAX_PROG, MAX_SCALE, MAX_SREGS, MAX_STACK, MAX_STMTS, MAX_STR, MAX_TALLY, OP_ABS,
                               OP_COL, OP_CONST, OP_EXEC, OP_FMT, OP_GREATEST, OP_JMP, OP_JZ, OP_LEAST, OP_NEG,
                               OP_ROWS, OP_SCOL, OP_SEQ, OP_SIMPLE, OP_SORT, OP_STORE, OP_STOREX, OP_TALLY,
                               OP_VAR, OP_VARX, P_INT, P_SREG, width)

if TYPE_CHECKING:
    from workloads.native.program import Program


class Unsupported(ValueError):
    """The transaction cannot be said as a program (the Python loop runs it)."""


def check(prog: Program) -> None:
    """Unsupported (a ValueError) on the first problem the C loader would find in ``prog``."""
    w = prog.words
    if not w or len(w) > MAX_PROG or len(prog.stmts) > MAX_STMTS or len(prog.texts) > MAX_STMTS:
        raise Unsupported("empty program or too many words/statements")
    if any(not INT64[0] <= x <= INT64[1] for x in w):
        raise Unsupported("a constant does not fit in 64 bits")
    if any(len(t.encode()) > MAX_STR or "\0" in t for t in prog.texts):
        raise Unsupported("a text statement is longer than 1024 bytes")
    depth_at: dict[int, int] = {}
    classes: dict[tuple[int, int], bool] = {}
    depth, pc = 0, 0
    while pc < len(w):
        depth_at[pc] = depth
        depth = _step(prog, pc, depth, classes)
        if depth > MAX_STACK:
            raise Unsupported(f"stack overflow at {pc}")
        pc += width(w, pc)
    if depth:
        raise Unsupported("values left on the stack")
    depth_at[len(w)] = 0
    for pc in depth_at:
        if pc < len(w) and w[pc] in JUMPS and depth_at.get(w[pc + 1]) != 0:
            raise Unsupported(f"a jump at {pc} to a word that is not an instruction on an empty stack")


def _step(prog: Program, pc: int, depth: int, classes: dict[tuple[int, int], bool]) -> int:
    """The depth after the instruction at ``pc`` (``depth`` before it); Unsupported when it is malformed.
    Long because it is one branch per opcode, as the C loader's switch."""
    w, nv, npools = prog.words, len(prog.names), len(prog.pools)
    op = w[pc]

    def args(k: int) -> list[int]:
        if pc + k >= len(w):
            raise Unsupported(f"truncated at {pc}")
        return w[pc + 1: pc + 1 + k]

    def need(ok: bool, what: str) -> None:
        if not ok:
            raise Unsupported(f"{what} at {pc}")

    def var_ok(v: int) -> bool:
        return 0 <= v < nv

    def reg_ok(r: int) -> bool:
        return 0 <= r < MAX_SREGS

    if op in (OP_CONST, OP_VAR):
        (a,) = args(1)
        need(op == OP_CONST or var_ok(a), "bad variable")
        return depth + 1
    if op == OP_ROWS:
        return depth + 1
    if op == OP_SEQ:
        r, q = args(2)
        need(reg_ok(r) and 0 <= q < npools, "bad string comparison")
        return depth + 1
    if op in BINARY_OPS:
        need(depth >= 2, "stack underflow")
        return depth - 1
    if op in (OP_NEG, OP_ABS):
        need(depth >= 1, "stack underflow")
        return depth
    if op == OP_COL:
        c, scale = args(2)
        need(depth >= 1, "stack underflow")
        need(0 <= c < MAX_COLS and 0 <= scale <= MAX_SCALE, "bad column")
        return depth
    if op == OP_VARX:
        (base,) = args(1)
        need(depth >= 1, "stack underflow")
        need(var_ok(base), "bad variable")
        return depth
    if op in (OP_LEAST, OP_GREATEST):
        (k,) = args(1)
        need(1 <= k <= depth, "bad argument count")
        return depth - k + 1
    if op in (OP_STORE, OP_JZ, OP_SCOL, OP_SORT, OP_STOREX):
        av = args(2 if op in (OP_SCOL, OP_SORT) else 1)
        if op == OP_STORE or op == OP_STOREX:
            need(var_ok(av[0]), "bad variable")
        elif op == OP_SCOL:
            need(0 <= av[0] < MAX_COLS and reg_ok(av[1]), "bad column or register")
        elif op == OP_SORT:
            need(var_ok(av[0]) and 1 <= av[1] <= nv, "bad records")
        need(depth == (2 if op == OP_STOREX else 1), "bad number of values")
        return 0
    need(depth == 0, "values left on the stack")
    if op in (OP_JMP, OP_SIMPLE, OP_TALLY):
        (a,) = args(1)
        need(op == OP_JMP or (op == OP_SIMPLE and 0 <= a < len(prog.texts)) or (op == OP_TALLY and 0 <= a < MAX_TALLY),
             "bad operand")
        return 0
    if op == OP_EXEC:
        i, n = args(2)
        need(0 <= i < len(prog.stmts), "bad statement")
        need(n == prog.stmts[i].nparams and n <= MAX_PARAMS and pc + 3 + 2 * n <= len(w), "bad parameters")
        pairs = w[pc + 3: pc + 3 + 2 * n]
        for j, (kind, v) in enumerate(zip(pairs[0::2], pairs[1::2])):
            need(P_SREG <= kind <= npools and (reg_ok(v) if kind == P_SREG else var_ok(v)), "bad parameter")
            is_str = kind != P_INT
            need(classes.setdefault((i, j), is_str) == is_str, "a parameter both an integer and a string")
        return 0
    if op == OP_FMT:
        reg, mx, n = args(3)
        need(reg_ok(reg) and 0 <= mx <= MAX_STR and 0 <= n <= MAX_PARAMS and pc + 4 + 2 * n <= len(w), "bad format")
        pairs = w[pc + 4: pc + 4 + 2 * n]
        for kind, v in zip(pairs[0::2], pairs[1::2]):
            need(var_ok(v) if kind in (F_INT, F_CENTS) else reg_ok(v) if kind == F_SREG
                 else kind == F_LIT and 0 <= v < npools, "bad format part")
        return 0
    raise Unsupported(f"unknown op {op} at {pc}")
