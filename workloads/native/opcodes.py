"""The words of a transaction program (:mod:`workloads.native.program`): opcodes, limits, instruction widths.

The same numbers as ``workloads/native/_native.c`` (tests/unit/test_native_program.py compares them). Kept apart so
the checker (:mod:`workloads.native.progcheck`) and the Python interpreter (:mod:`workloads.native.progref`) share them with
the builder without importing it.

Stack effects (depth before -> after) and operands:

- ``CONST k``, ``VAR v``, ``ROWS`` (row count of the last statement's result), ``SEQ reg pool`` (1 when string
  register ``reg`` equals ``pools[pool][0]``): push one value.
- ``ADD SUB MUL DIV FDIV MOD RANDOM LT EQ OR``: two values -> one. ``NEG ABS``: one -> one.
  ``LEAST/GREATEST k``: k -> one.
- ``COL col scale``: a row number -> the value at (row, col) of the last result as an integer times
  10**scale (NULL: 0). ``VARX base``: an index i -> variable base + i.
- ``STORE v``, ``SCOL col reg`` (the text at (row, col) into string register ``reg``), ``SORT base stride``
  (sort that many records of ``stride`` variables from ``base``), ``JZ target``: exactly one value -> empty.
  ``STOREX base``: (index, value) -> empty.
- ``EXEC stmt n (kind var)*``, ``SIMPLE text``, ``JMP target``, ``FMT reg max n (kind val)*``,
  ``TALLY k``: on an empty stack. Parameter kinds of EXEC: :data:`P_INT`, a pool number + 1, :data:`P_CENTS`
  (the integer as a decimal with two places), :data:`P_SREG` (string register ``var``). Part kinds of FMT: the
  ``F_*`` constants.
"""

from __future__ import annotations

(OP_CONST, OP_VAR, OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_NEG, OP_ABS, OP_LEAST, OP_GREATEST,
 OP_RANDOM, OP_STORE, OP_EXEC, OP_SIMPLE,
 OP_JMP, OP_JZ, OP_LT, OP_EQ, OP_OR, OP_ROWS, OP_COL, OP_SCOL, OP_VARX, OP_STOREX, OP_SORT, OP_SEQ, OP_FMT,
 OP_TALLY) = range(1, 31)
ONE_ARG = frozenset({OP_CONST, OP_VAR, OP_LEAST, OP_GREATEST, OP_STORE, OP_SIMPLE, OP_JMP, OP_JZ, OP_VARX,
                     OP_STOREX, OP_TALLY})
TWO_ARGS = frozenset({OP_COL, OP_SCOL, OP_SORT, OP_SEQ})
WITH_ARG = ONE_ARG  # the name the first programs' code used
BINARY_OPS = frozenset({OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FDIV, OP_MOD, OP_RANDOM, OP_LT, OP_EQ, OP_OR})
JUMPS = frozenset({OP_JMP, OP_JZ})
P_INT, P_CENTS, P_SREG = 0, -1, -2          # EXEC parameter kinds besides pools (pool p is p + 1)
F_INT, F_CENTS, F_SREG, F_LIT = 0, 1, 2, 3  # FMT parts: a variable, as cents, a string register, pools[val][0]

# Limits of the C side (workloads/native/_native.c)
MAX_STR, MAX_VARS, MAX_STMTS, MAX_PARAMS, MAX_PROG, MAX_STACK = 1024, 256, 64, 32, 8192, 64
MAX_COLS, MAX_SREGS, MAX_TALLY, MAX_SCALE, MAX_JUMPS = 32, 8, 8, 18, 100_000
MAX_DIGITS = 18  # a result value read as an integer: at most this many digits (with its scale), else an error
INT64 = (-(1 << 63), (1 << 63) - 1)


def width(words: list[int], pc: int) -> int:
    """Words of the instruction at ``pc`` (at least 1; an operand count past the end gives a width past it)."""
    op = words[pc]
    if op == OP_EXEC:
        return 3 + 2 * max(words[pc + 2], 0) if pc + 2 < len(words) else 3
    if op == OP_FMT:
        return 4 + 2 * max(words[pc + 3], 0) if pc + 3 < len(words) else 4
    return 2 if op in ONE_ARG else 3 if op in TWO_ARGS else 1
