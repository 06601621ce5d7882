"""Other sessions' data out of the raw INNODB STATUS texts kept in the bundle (``--keep-literals`` keeps it).

INNODB STATUS quotes the statement each transaction runs (TRANSACTIONS, LATEST DETECTED DEADLOCK: the
lines after ``MySQL thread id ...``) and, with ``innodb_status_output_locks`` or in a deadlock, the
contents of locked records (`` 1: len 6; hex 00000000021e; asc     ;;``). The statements are stored as
their fingerprints (:func:`diag.core.fingerprint.fingerprint`, MySQL's quoting) and the record fields as their
length only; the counters the status collector reads are untouched.
"""

from __future__ import annotations

import re

from diag.core.fingerprint import fingerprint

_THREAD = re.compile(r"^MySQL thread id \d+")
# Lines that end a quoted statement: the transaction's next field, the next transaction or section.
_AFTER_STATEMENT = re.compile(r"^(?:---|\*\*\* |Trx read view|TABLE LOCK|RECORD LOCKS|Record lock|mysql tables in use|"
                              r"LOCK WAIT|\d+ lock struct|MySQL thread id|=====|-----|Trx #rec|TRANSACTION \d+|"
                              r"Foreign key constraint fails|Trying to |DATA TUPLE|PHYSICAL RECORD|But in parent)")
_FIELD = re.compile(r"^(\s*\d+: len \d+;) hex [0-9a-fA-F]*; asc .*;;(.*)$")
_SQL_NULL = re.compile(r"^(\s*\d+: SQL NULL;)")


def without_literals(text: str) -> str:
    """``text`` (one INNODB STATUS) with quoted statements as fingerprints and record contents left out."""
    out: list[str] = []
    statement: list[str] | None = None
    for line in text.split("\n"):
        if statement is not None and not _AFTER_STATEMENT.match(line):
            statement.append(line)
            continue
        if statement is not None:
            if any(s.strip() for s in statement):
                out.append(fingerprint("\n".join(statement), backslashes=True))
            statement = None
        m = _FIELD.match(line)
        if m:
            line = f"{m.group(1)} hex ?; asc ?;;{m.group(2)}"
        out.append(line)
        if _THREAD.match(line):
            statement = []
    if statement and any(s.strip() for s in statement):
        out.append(fingerprint("\n".join(statement), backslashes=True))
    return "\n".join(out)
