"""Portable statements: SQL text with ``?`` placeholders, rendered per engine and protocol.

A statement is kept as text fragments between parameters, so each form is built
once: ``$1, $2`` for a PostgreSQL prepared statement, ``?`` for a MySQL one, and a
``%s`` template into which literals are spliced for the simple (text) protocol.
Parameter values are numbers or strings the workload made itself (or numbers from
a custom script's ``\\set``), never user-supplied text.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class Stmt:
    """One SQL statement with ``nparams`` positional parameters."""

    parts: tuple[str, ...]  # len(parts) == nparams + 1

    @classmethod
    def parse(cls, sql: str) -> "Stmt":
        """Split on ``?``; our own SQL never has a ``?`` inside a literal."""
        return cls(tuple(sql.split("?")))

    @property
    def nparams(self) -> int:
        return len(self.parts) - 1

    def numbered(self) -> str:
        """PostgreSQL form: ``$1``, ``$2``..."""
        out = [self.parts[0]]
        for i, p in enumerate(self.parts[1:], 1):
            out.append(f"${i}{p}")
        return "".join(out)

    def qmarks(self) -> str:
        """MySQL prepared form: ``?``."""
        return "?".join(self.parts)

    def template(self) -> str:
        """``%``-template for literals (``%`` in the text doubled)."""
        return "%s".join(p.replace("%", "%%") for p in self.parts)

    @property
    def verb(self) -> str:
        """First keyword, upper-case (SELECT, INSERT, BEGIN...)."""
        words = self.parts[0].split(None, 1)
        return words[0].upper().rstrip(";") if words else ""


def pg_literal(v: object) -> str:
    """A PostgreSQL literal (standard_conforming_strings on, the default since 9.1)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, Decimal)):
        return str(v)
    return "'" + str(v).replace("'", "''") + "'"


def my_literal(v: object) -> str:
    """A MySQL/MariaDB literal (backslash is an escape there)."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (int, float, Decimal)):
        return str(v)
    return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"
