"""Which statement texts read from a server dbdiag may plan, and the bounds every such plan runs under.

A statement text read from pg_stat_statements or performance_schema was written by
whoever ran it. Planning it runs code: PostgreSQL's planner evaluates IMMUTABLE
functions with constant arguments (a zero-argument one even in a generic plan,
and any called by a view), and MariaDB's EXPLAIN runs stored functions whose
value it needs (a constant lookup, a constant subquery, a derived table). So a plan
is made only of a text that is one plain statement (:func:`plan_refusal`), in a
transaction that is rolled back, under a statement timeout of
:data:`PLAN_TIMEOUT_MS`; whose privileges it runs with is the engines' part
(:mod:`collectors.pg.statements`, :mod:`collectors.mysql.statements`).
"""

from __future__ import annotations

import re

from diag.core.errors import DiagError

PLAN_TIMEOUT_MS = 2000  # a plan takes milliseconds; a text that plans for longer is not worth the server's time
PLANNED_KINDS = ("select", "insert", "update", "delete", "with")
PLAN_OTHERS_OPTION = "--plan-others"


class PlanNotMade(DiagError):
    """dbdiag declined to plan a statement; the message says why (whose statement, what is missing)."""


def _skip_quoted(text: str, i: int, quote: str, backslash: bool) -> int:
    """The index after the quoted run that starts at ``text[i]`` (a doubled quote stays inside); len(text)
    when it is not closed."""
    i += 1
    while i < len(text):
        c = text[i]
        if backslash and c == "\\":
            i += 2
            continue
        if c == quote:
            if i + 1 < len(text) and text[i + 1] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    return len(text)


def _skip_block_comment(text: str, i: int, nested: bool) -> int:
    """The index after the ``/* ... */`` comment that starts at ``text[i]`` (PostgreSQL nests them)."""
    depth, i = 1, i + 2
    while i < len(text) and depth:
        if nested and text.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif text.startswith("*/", i):
            depth, i = depth - 1, i + 2
        else:
            i += 1
    return i


def _word_char(c: str) -> bool:
    """Whether ``c`` may precede ``$`` inside one PostgreSQL word (``a$b`` is a name, not a dollar quote)."""
    return bool(c) and (c.isalnum() or c in "_$")


def _dollar_tag(text: str, i: int) -> str:
    """The ``$tag$`` opening a PostgreSQL dollar-quoted string at ``text[i]``, or "" (``$1`` is a parameter)."""
    j = i + 1
    while j < len(text) and (text[j].isalnum() or text[j] == "_"):
        j += 1
    tag = text[i:j + 1]
    if j < len(text) and text[j] == "$" and not tag[1:2].isdigit():
        return tag
    return ""


def code_of(text: str, mysql: bool, escapes: bool) -> tuple[str, str]:
    """(``text`` with comments and quoted strings and names blanked out, why it cannot be read or "").

    ``escapes``: a backslash escapes the next character in every string (PostgreSQL with
    standard_conforming_strings off; MySQL without NO_BACKSLASH_ESCAPES), else only in PostgreSQL's ``E'...'``.
    MySQL runs the inside of ``/*! ... */`` and ``/*M! ... */`` comments, so a text with one is refused
    rather than read.
    """
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if text.startswith("/*", i):
            if mysql and (text.startswith("/*!", i) or text.startswith("/*M!", i)):
                return "", "the text holds a MySQL executable comment (/*! ... */)"
            i = _skip_block_comment(text, i, nested=not mysql)
            out.append(" ")
        elif text.startswith("--", i) and (not mysql or text[i + 2:i + 3] in (" ", "\t", "\n", "")):
            j = text.find("\n", i)
            i = len(text) if j < 0 else j
        elif mysql and c == "#":
            j = text.find("\n", i)
            i = len(text) if j < 0 else j
        elif c in "'\"`":
            backslash = c != "`" and (mysql or c == "'") and escapes or \
                (not mysql and c == "'" and text[i - 1:i] in ("E", "e"))
            i = _skip_quoted(text, i, c, backslash)
            out.append(" x ")
        elif not mysql and c == "$" and not _word_char(text[i - 1:i]) and _dollar_tag(text, i):
            tag = _dollar_tag(text, i)
            j = text.find(tag, i + len(tag))
            i = len(text) if j < 0 else j + len(tag)
            out.append(" x ")
        else:
            out.append(c)
            i += 1
    return "".join(out), ""


def plan_refusal(text: str, mysql: bool) -> str:
    """Why dbdiag will not plan ``text`` ("" when it is one plain SELECT, INSERT, UPDATE, DELETE or WITH).

    One statement only: a ``;`` outside strings, names and comments may only end the text, read with and
    without backslash escapes (dbdiag does not know the session's string mode; a text whose two readings
    differ is refused). Comments and leading parentheses are ignored before the first word is read.
    """
    body = ""
    for escapes in (False, True):
        code, why = code_of(text, mysql, escapes)
        if why:
            return why
        body = code.strip()
        while body.endswith(";"):
            body = body[:-1].rstrip()
        if ";" in body:
            return "the text holds more than one statement"
    m = re.match(r"[A-Za-z_]+", body.lstrip("( \n\t\r"))
    first = m.group(0).lower() if m else ""
    if first not in PLANNED_KINDS:
        return f"only SELECT, INSERT, UPDATE, DELETE and WITH statements are planned, not {first.upper() or 'this'}"
    return ""
