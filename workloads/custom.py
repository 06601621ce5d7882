r"""``custom``: a pgbench-like script file; one execution of the file is one transaction.

Format::

    -- comment
    \set aid random(1, 100000 * 10)
    \set delta random(-5000, 5000)
    BEGIN;
    UPDATE dbdiag.accounts SET balance = balance + :delta WHERE id = :aid;
    SELECT balance FROM dbdiag.accounts WHERE id = :aid;
    COMMIT;

``\set NAME EXPR``: EXPR uses integers, ``:var`` (or bare ``var``) references to
earlier ``\set`` names, ``+ - * / %`` (``/`` divides integers as pgbench does),
parentheses and the functions ``random(lo, hi)`` (inclusive, uniform), ``abs``,
``least``, ``greatest``. An SQL statement may span lines and ends with ``;`` at
the end of a line; ``:name`` in it becomes a bind parameter (``::type`` casts are
left alone). ``BEGIN``/``START TRANSACTION``/``COMMIT``/``END``/``ROLLBACK`` go
through the simple protocol; other statements are prepared with
``--protocol prepared``. Problems in the file are reported as ``FILE:LINE: what``
before any connection is made; SQL the server rejects is reported the same way
when the statements are prepared, before the first step.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diag.core.errors import DbError, UsageError
from workloads.base import ClientCtx, Runner, Workload
from workloads.clients.client import Client
from workloads.native.program import Param, Program, Unsupported, compile_expr
from workloads.clients.sql import Stmt

_VAR = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CONTROL = {"BEGIN", "START", "COMMIT", "END", "ROLLBACK"}
PREPARABLE = {"SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "VALUES", "REPLACE"}
# Anything else is almost surely a typo; checked before any connection is made.
KNOWN = CONTROL | PREPARABLE | {"SET", "LOCK", "CALL", "DO", "SAVEPOINT", "RELEASE", "TRUNCATE", "ANALYZE", "VACUUM",
                                "EXPLAIN", "SHOW", "CREATE", "DROP", "ALTER", "MERGE", "COPY", "TABLE", "SELECT",
                                "HANDLER", "CHECKPOINT", "DISCARD", "RESET", "NOTIFY", "LISTEN", "OPTIMIZE",
                                "PREPARE", "EXECUTE", "DEALLOCATE", "FLUSH", "KILL", "DECLARE", "FETCH", "CLOSE",
                                "MOVE", "REFRESH", "CLUSTER", "REINDEX", "COMMENT", "GRANT", "REVOKE", "XA"}
Env = dict[str, int]


@dataclass(frozen=True)
class SetCmd:
    line: int
    name: str
    src: str  # Python source over v_<name> locals (see _compile)

    def fn(self, env: Env, rnd: Any) -> int:
        """Evaluate once (tests; the run compiles the whole script into one function)."""
        return int(eval(self.src, {**_helpers(), "rnd": rnd}, {f"v_{k}": v for k, v in env.items()}))


@dataclass(frozen=True)
class SqlCmd:
    line: int
    stmt: Stmt
    params: tuple[str, ...]
    text: str

    @property
    def control(self) -> bool:
        return self.stmt.verb in CONTROL


def parse_script(path: str) -> list[SetCmd | SqlCmd]:
    """Parse a script file; UsageError ``FILE:LINE: problem`` on any mistake."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read script {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    return parse_text(text, str(path))


def parse_text(text: str, name: str = "<script>") -> list[SetCmd | SqlCmd]:
    cmds: list[SetCmd | SqlCmd] = []
    defined: set[str] = set()
    buf: list[str] = []
    buf_line = 0

    def fail(line: int, what: str) -> UsageError:
        return UsageError(f"{name}:{line}: {what}")

    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("--")):
            continue
        if not buf and line.startswith("\\"):
            parts = line[1:].split(None, 2)
            meta = parts[0].lower() if parts else ""
            if meta != "set":
                raise fail(no, f"unknown meta-command \\{meta} (only \\set is supported)")
            if len(parts) < 3 or not _NAME.match(parts[1]):
                raise fail(no, "expected \\set NAME EXPRESSION")
            src = _compile(parts[2], defined, functools.partial(fail, no))
            cmds.append(SetCmd(no, parts[1], src))
            defined.add(parts[1])
            continue
        if not buf:
            buf_line = no
        code = raw.split("--", 1)[0] if "'" not in raw else raw
        buf.append(code)
        if code.rstrip().endswith(";"):
            cmds.append(_sql_cmd("\n".join(buf).strip().rstrip(";").strip(), buf_line, defined, fail))
            buf = []
    if buf:
        raise fail(buf_line, "SQL statement not terminated by ';'")
    if not any(isinstance(c, SqlCmd) for c in cmds):
        raise UsageError(f"{name}: no SQL statement in the script")
    return cmds


def _sql_cmd(sql: str, line: int, defined: set[str], fail: Callable[[int, str], UsageError]) -> SqlCmd:
    if not sql:
        raise fail(line, "empty SQL statement")
    if ";" in sql.replace("';'", ""):
        raise fail(line, "one statement per ';' (found a ';' inside the statement)")
    if "?" in _VAR.sub("", sql):
        raise fail(line, "use :name variables, not '?' placeholders")
    verb = sql.split(None, 1)[0].upper().strip("(")
    if verb not in KNOWN:
        raise fail(line, f"{verb!r} does not start an SQL statement I know (a typo?)")
    names: list[str] = []
    for m in _VAR.finditer(sql):
        if m.group(1) not in defined:
            raise fail(line, f"variable :{m.group(1)} is not set before this statement")
        names.append(m.group(1))
    parts = tuple(_VAR.split(sql)[0::2])
    return SqlCmd(line, Stmt(parts), tuple(names), sql)


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}
_CALL_OPS = {ast.Div: "_div", ast.FloorDiv: "_fdiv", ast.Mod: "_mod"}


def _compile(expr: str, defined: set[str], fail: Callable[[str], UsageError]) -> str:
    """Check an expression and turn it into Python source over ``v_<name>`` locals.

    Only integer literals, defined variables, ``+ - * / %``, unary minus and the
    whitelisted functions pass, so the generated source is safe to compile.
    """
    src = _VAR.sub(lambda m: m.group(1), expr.strip())
    try:
        tree = ast.parse(src, mode="eval").body
    except SyntaxError:
        raise fail(f"cannot parse expression {expr.strip()!r}") from None

    def gen(n: ast.AST) -> str:
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
            return str(n.value)
        if isinstance(n, ast.Name):
            if n.id not in defined:
                raise fail(f"variable :{n.id} is not set before this line")
            return f"v_{n.id}"
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            return f"(-{gen(n.operand)})" if isinstance(n.op, ast.USub) else gen(n.operand)
        if isinstance(n, ast.BinOp) and type(n.op) in _OPS:
            return f"({gen(n.left)} {_OPS[type(n.op)]} {gen(n.right)})"
        if isinstance(n, ast.BinOp) and type(n.op) in _CALL_OPS:
            return f"{_CALL_OPS[type(n.op)]}({gen(n.left)}, {gen(n.right)})"
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords:
            args = [gen(a) for a in n.args]
            fname = n.func.id.lower()
            if fname in ("random", "random_uniform"):
                if len(args) != 2:
                    raise fail("random(lo, hi) takes two arguments")
                return f"_uniform({args[0]}, {args[1]}, rnd)"
            if fname == "abs" and len(args) == 1:
                return f"abs({args[0]})"
            if fname in ("least", "greatest") and args:
                return f"{'min' if fname == 'least' else 'max'}(({', '.join(args)},))"
            raise fail(f"unknown function {n.func.id}() (use random, abs, least, greatest)")
        raise fail(f"unsupported expression {expr.strip()!r}")

    return gen(tree)


def _zero() -> int:
    raise DbError("division by zero in a \\set expression", code="script", kind="other")


def _div(a: int, b: int) -> int:
    """pgbench's integer division: truncates toward zero."""
    if not b:
        return _zero()
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _fdiv(a: int, b: int) -> int:
    return a // b if b else _zero()


def _mod(a: int, b: int) -> int:
    return a % b if b else _zero()


def _uniform(lo: int, hi: int, rnd: Any) -> int:
    if hi < lo:
        raise DbError(f"random({lo}, {hi}): the upper bound is below the lower one", code="script", kind="other")
    return lo + int(rnd() * (hi - lo + 1))


class Custom(Workload):
    name = "custom"
    description = "a pgbench-like script (--script FILE); one execution of the file is one transaction"
    needs_script = True

    def __init__(self, path: str) -> None:
        self.path = path
        self.cmds = parse_script(path) if path else []

    def check(self, c: Client) -> None:
        """Prepare every statement once so SQL the server rejects is reported as FILE:LINE."""
        for cmd in self.cmds:
            if isinstance(cmd, SqlCmd) and not cmd.control and cmd.stmt.verb in PREPARABLE:
                try:
                    c.prepare(cmd.stmt)
                except DbError as e:
                    raise UsageError(f"{self.path}:{cmd.line}: {e}") from None

    def keyed_shape(self) -> tuple[int, int, SqlCmd] | None:
        """(lo, hi, statement) when the script is pgbench -S's shape: ``\\set x random(lo, hi)`` with
        constant bounds, then one preparable statement using ``:x`` once; else None."""
        if len(self.cmds) != 2 or not isinstance(self.cmds[0], SetCmd) or not isinstance(self.cmds[1], SqlCmd):
            return None
        var, sql = self.cmds
        assert isinstance(var, SetCmd) and isinstance(sql, SqlCmd)  # checked above; says so to the type checker
        m = re.fullmatch(r"_uniform\((.*), rnd\)", var.src)
        if not m or "v_" in m.group(1) or "rnd" in m.group(1) or sql.control or sql.stmt.verb not in PREPARABLE or sql.params != (var.name,):
            return None
        lo, hi = eval(f"({m.group(1)},)", _helpers())  # constant arithmetic, checked by _compile
        return (lo, hi, sql) if lo <= hi else None

    def program(self, ctx: ClientCtx) -> Program | None:
        """The script for the native executor: every ``\\set`` expression, control statement and preparable
        statement (pgbench -S's shape too). Unsupported (the Python loop runs the script) for a utility
        statement with variables (spliced as literals in Python)."""
        p = Program()
        for cmd in self.cmds:
            if isinstance(cmd, SetCmd):
                p.expr(cmd.name, compile_expr(cmd.src, p.var))
            elif cmd.control or (cmd.stmt.verb not in PREPARABLE and not cmd.params):
                p.simple(cmd.text)
            elif cmd.stmt.verb in PREPARABLE:
                p.execute(cmd.stmt, [Param(p.var(n)) for n in cmd.params])
            else:
                raise Unsupported(f"{self.path}:{cmd.line}: a utility statement with variables")
        return p

    def client(self, c: Client, ctx: ClientCtx) -> Runner:
        """Compile the script into one Python function: no interpretation on the query loop."""
        shape = self.keyed_shape()
        if shape is not None:  # the driver's point-lookup path: what the built-in point-select runs
            lo, hi, sql = shape
            return Runner(c.keyed_txn(c.prepare(sql.stmt), lo, hi, ctx.rng().random))
        ns: dict[str, Any] = {**_helpers(), "rnd": ctx.rng().random}
        body: list[str] = []
        nsql = 0
        for i, cmd in enumerate(self.cmds):
            if isinstance(cmd, SetCmd):
                body.append(f"v_{cmd.name} = {cmd.src}")
                continue
            nsql += 1
            if cmd.control:
                ns[f"x{i}"], ns[f"t{i}"] = c.execute, cmd.text
                body.append(f"x{i}(t{i})")
            elif cmd.stmt.verb in PREPARABLE:
                ns[f"q{i}"] = c.prepare(cmd.stmt).run
                body.append(f"q{i}((" + "".join(f"v_{n}, " for n in cmd.params) + "))")
            elif cmd.params:  # utility statements (SET, LOCK...) are not preparable everywhere: literals
                ns[f"x{i}"], ns[f"t{i}"] = c.execute, cmd.stmt.template()
                body.append(f"x{i}(t{i} % (" + "".join(f"int(v_{n}), " for n in cmd.params) + "))")
            else:
                ns[f"x{i}"], ns[f"t{i}"] = c.execute, cmd.text
                body.append(f"x{i}(t{i})")
        src = "def txn():\n" + "".join(f"    {line}\n" for line in body) + f"    return {nsql}\n"
        exec(compile(src, f"<script {self.path}>", "exec"), ns)
        return Runner(ns["txn"])


def _helpers() -> dict[str, Any]:
    return {"_uniform": _uniform, "_div": _div, "_fdiv": _fdiv, "_mod": _mod, "__builtins__": {
        "abs": abs, "min": min, "max": max, "int": int}}
