"""diag.core.fingerprint: statement texts with their literals replaced, on inputs that trip naive scrubbers."""

from __future__ import annotations

import pytest

from diag.core.fingerprint import fingerprint

PG = [
    ("SELECT * FROM t1 WHERE id = 42 AND name = 'O''Brien'", "SELECT * FROM t1 WHERE id = ? AND name = ?"),
    ("UPDATE sbtest1 SET c='SECRET-LITERAL-42' WHERE id=-5", "UPDATE sbtest1 SET c=? WHERE id=?"),
    # E'' strings read backslash escapes; standard strings do not (standard_conforming_strings)
    ("SELECT E'it\\'s', 'C:\\dir\\', x FROM t", "SELECT ?, ?, x FROM t"),
    ("SELECT e'a\\\\', 'b' FROM t", "SELECT ?, ? FROM t"),
    ("SELECT $$a 'quoted' $$, $fn$ it's $$ $fn$ FROM t WHERE a = $1 AND b = $2",
     "SELECT ?, ? FROM t WHERE a = $1 AND b = $2"),
    ("SELECT 'x'::int, CAST('2024-01-01' AS date), '{1,2}'::int[]", "SELECT ?::int, CAST(? AS date), ?::int[]"),
    ("SELECT 3.5e-2, .5, 1e10, 0x1F, X'ff', B'0101', U&'d\\0061t', N'abc'", "SELECT ?, ?, ?, ?, ?, ?, ?, ?"),
    ("SELECT a -- it's a 'comment' 42\nFROM t /* 'x' 7 */ WHERE b = 1", "SELECT a FROM t WHERE b = ?"),
    ("SELECT a-1, b - 2, c*-3, (-4), f(-5) FROM t", "SELECT a-?, b - ?, c*?, (?), f(?) FROM t"),
    ("SELECT col2, t1.c3, sbtest10.k FROM t1 JOIN sbtest10 USING (k)",
     "SELECT col2, t1.c3, sbtest10.k FROM t1 JOIN sbtest10 USING (k)"),
    ('SELECT "Col 1", "it\'s" FROM "Table9"', 'SELECT "Col 1", "it\'s" FROM "Table9"'),
    ("SELECT * FROM t WHERE id IN (1, 2, 3) AND k IN ('a','b') AND z IN (SELECT 1)",
     "SELECT * FROM t WHERE id IN (...) AND k IN (...) AND z IN (SELECT ?)"),
    ("INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y'), (3, now())", "INSERT INTO t (a, b) VALUES (?, ?), ..."),
    ("UPDATE t SET c = 'cut short by the server's text lim", "UPDATE t SET c = ?s text lim"),
    ("UPDATE t SET c = 'cut short by the server", "UPDATE t SET c = ?"),
    ("SELECT a FROM t LIMIT 10 OFFSET -3", "SELECT a FROM t LIMIT ? OFFSET ?"),
    ("SELECT   a,\n\t b\nFROM t", "SELECT a, b FROM t"),
    ("ALTER ROLE bob PASSWORD 'hunter2'", "ALTER ROLE bob PASSWORD ?"),
    ("SELECT c FROM sbtest1 WHERE id=$1", "SELECT c FROM sbtest1 WHERE id=$1"),
    ("", ""),
]

MY = [
    ("SELECT 'it\\'s', \"dq \\\" str\", `col1` FROM `t2` WHERE a = 'x''y'",
     "SELECT ?, ?, `col1` FROM `t2` WHERE a = ?"),
    ("SELECT a # comment 'x\n, 5 FROM t", "SELECT a , ? FROM t"),
    ("SELECT a--1 FROM t", "SELECT a-? FROM t"),  # MySQL: "--" starts a comment only before a space
    ("SELECT a -- c 'x\n FROM t", "SELECT a FROM t"),
    ("SELECT _utf8mb4'abc', X'0F', 0b101 FROM t", "SELECT ?, ?, ? FROM t"),
    ("SELECT /*!40001 SQL_NO_CACHE */ c FROM sbtest1 WHERE id IN (5,6,7)", "SELECT c FROM sbtest1 WHERE id IN (...)"),
    ("SELECT c FROM sbtest1 WHERE id = ?", "SELECT c FROM sbtest1 WHERE id = ?"),
]


@pytest.mark.parametrize("text,want", PG, ids=[t for t, _ in PG])
def test_postgres(text: str, want: str) -> None:
    assert fingerprint(text) == want


@pytest.mark.parametrize("text,want", MY, ids=[t for t, _ in MY])
def test_mysql(text: str, want: str) -> None:
    assert fingerprint(text, backslashes=True) == want


@pytest.mark.parametrize("text", [t for t, _ in PG + MY])
def test_idempotent(text: str) -> None:
    """A fingerprint of a fingerprint changes nothing (digest texts from the server are fingerprints already)."""
    for bs in (False, True):
        once = fingerprint(text, bs)
        assert fingerprint(once, bs) == once
