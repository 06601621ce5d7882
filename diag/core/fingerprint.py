"""Statement texts without their literals: what dbdiag stores of statements other sessions sent.

A blocker's statement from pg_stat_activity or the processlist, a digest's example text, a sampled
statement: their constants are other people's data (names, amounts, sometimes secrets). By default they
are stored as a fingerprint, the way pg_stat_statements and pt-query-digest show statements:

- string literals (``'...'`` with ``''`` inside, ``E'...'`` with backslash escapes, ``B'..'``, ``X'..'``,
  ``N'..'``, ``U&'..'``, PostgreSQL's dollar quoting ``$$..$$`` / ``$tag$..$tag$``; on MySQL ``"..."`` and
  backslash escapes in every string) become ``?``, and so does a string cut short by the server's text limit;
- numbers (``42``, ``-3.5e2`` after an operator, ``0x1F``, ``.5``) become ``?``; a digit inside a name
  (``t1``, ``sbtest1``, ``$1``) stays;
- comments are dropped (they can hold data too), runs of whitespace become one space;
- ``IN (?, ?, ?)`` collapses to ``IN (...)``; a VALUES list of several rows keeps its first row and ``...``.

Identifiers (``"quoted"`` on PostgreSQL, ```backticks``` on MySQL), keywords, placeholders (``?``, ``$1``,
``%s``) and casts (``'x'::int`` -> ``?::int``) stay. The fingerprint is for reading, not for running.
``dbdiag run --keep-literals`` stores the texts as sent.
"""

from __future__ import annotations

import re

PLACEHOLDER = "?"
# After one of these (or at the start) a "-" is a sign, not a subtraction: "= -5", "(-5", "VALUES (-5".
_SIGN_AFTER_WORDS = frozenset({"select", "where", "and", "or", "not", "values", "in", "between", "set", "then",
                               "else", "when", "return", "limit", "offset", "by", "like", "is", "case", "on",
                               "having", "as", "interval", "array"})
_SIGN_AFTER_CHARS = set("(,=<>+-*/%[|&^~!:")
_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_NUMBER = re.compile(r"0[xX][0-9A-Fa-f]+|0[bB][01]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_WORD_CHARS = re.compile(r"[A-Za-z0-9_$\x80-\U0010ffff]")
_STRING_PREFIX = re.compile(r"[eEbBxXnN]|_[A-Za-z0-9]+")  # E'..', X'..', _utf8mb4'..' (U&'..' apart)
_IN_LIST = re.compile(r"\b(IN)\s*\(\s*\?(?:\s*,\s*\?)*\s*\)", re.IGNORECASE)
_VALUES_ROWS = re.compile(r"\b(VALUES)\s*(\((?:[^()']|\([^()]*\))*\))(?:\s*,\s*\((?:[^()']|\([^()]*\))*\))+",
                          re.IGNORECASE)


def _quoted_end(text: str, i: int, quote: str, backslashes: bool) -> int:
    """Index just past the string opened by ``text[i] == quote`` (``len(text)`` when it is cut short)."""
    j = i + 1
    n = len(text)
    while j < n:
        c = text[j]
        if backslashes and c == "\\":
            j += 2
            continue
        if c == quote:
            if j + 1 < n and text[j + 1] == quote:  # '' inside a string
                j += 2
                continue
            return j + 1
        j += 1
    return n


def _sign_allowed(out: list[str]) -> bool:
    """Whether a "-" now would be a sign: at the start, after an operator, "(" or ",", or a keyword."""
    prev = "".join(out[-3:]).rstrip()
    if not prev or prev[-1] in _SIGN_AFTER_CHARS:
        return True
    m = re.search(r"([A-Za-z_]+)$", prev)
    return m is not None and m.group(1).lower() in _SIGN_AFTER_WORDS


def fingerprint(text: str, backslashes: bool = False) -> str:
    """``text`` with its literals replaced by ``?`` (see the module docstring). ``backslashes``: the server
    reads ``\\'`` inside a string as a quote (MySQL/MariaDB without NO_BACKSLASH_ESCAPES); it also reads
    ``"..."`` as a string there, where PostgreSQL reads a name."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c.isspace():
            j = i
            while j < n and text[j].isspace():
                j += 1
            if out and not out[-1].endswith(" "):
                out.append(" ")
            i = j
        elif (c == "-" and nxt == "-" and (not backslashes or text[i + 2:i + 3] in ("", " ", "\t", "\n", "\r"))
              or c == "#" and backslashes):  # a comment to the end of the line (MySQL: "-- " with its space)
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c == "/" and nxt == "*":  # a comment (MySQL's /*! ... */ too)
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            if out and not out[-1].endswith(" "):
                out.append(" ")
        elif c == "'" or (c == '"' and backslashes):
            escaped = backslashes
            if out and _STRING_PREFIX.fullmatch(out[-1]):  # E'..', X'..', N'..', _utf8mb4'..': one literal
                escaped = out.pop().lower() == "e" or escaped
            elif out[-2:] in (["U", "&"], ["u", "&"]):
                del out[-2:]
            i = _quoted_end(text, i, c, escaped)
            out.append(PLACEHOLDER)
        elif c in '"`':  # a quoted name: kept as it is
            j = _quoted_end(text, i, c, False)
            out.append(text[i:j])
            i = j
        elif c == "$" and (m := _DOLLAR_TAG.match(text, i)) and not (out and _WORD_CHARS.match(out[-1][-1:] or " ")):
            end = text.find(m.group(0), m.end())
            i = n if end < 0 else end + len(m.group(0))
            out.append(PLACEHOLDER)
        elif (c.isdigit() or (c == "." and nxt.isdigit())) and not (out and _WORD_CHARS.match(out[-1][-1:] or " ")):
            m = _NUMBER.match(text, i)
            assert m is not None  # a digit, or "." before one, always starts a number
            if out and out[-1] == "-" and _sign_allowed(out[:-1]):
                out.pop()
            out.append(PLACEHOLDER)
            i = m.end()
        elif _WORD_CHARS.match(c):
            j = i
            while j < n and _WORD_CHARS.match(text[j]):
                j += 1
            out.append(text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    joined = "".join(out).strip()
    joined = _IN_LIST.sub(r"\1 (...)", joined)
    return _VALUES_ROWS.sub(r"\1 \2, ...", joined)

