"""The one place that picks version-specific SQL for the PostgreSQL collectors.

Each query lives in ``sql/<name>.<oldest>.sql``, ``oldest`` being the oldest
server version the file works on, in ``server_version_num`` form (``140000`` =
14.0). For a server, the newest file whose ``oldest`` is <= its version wins,
so a query that did not change since 13 has one file, and a view that changed
in 17 gets a second file named ``.170000.sql``.

A file opens with ``--`` comment lines saying what it reads and why; the text
returned is the statement without them, with the ``/* dbdiag */`` marker put
right after its first keyword. Inside the statement, because
pg_stat_statements keeps a statement's own comments but drops the ones before
it: the marker is how our catalog queries are told apart from the workload's.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from diag.errors import DiagError

SQL_DIR = Path(__file__).with_name("sql")
MARKER = "/* dbdiag */"
OLDEST_SUPPORTED = 130000
_FILE_RE = re.compile(r"^(?P<name>[a-z0-9_]+)\.(?P<version>\d{5,6})\.sql$")
_FIRST_WORD = re.compile(r"^(\w+)")


class SqlUnavailable(DiagError):
    """No SQL file fits this server: the feature needs a newer server."""


def version_text(version_num: int) -> str:
    """``150020`` -> ``"15.20"``, ``180000`` -> ``"18.0"`` (PostgreSQL 10+ numbering)."""
    return f"{version_num // 10000}.{version_num % 10000}"


@functools.lru_cache(maxsize=4)
def _index(sql_dir: Path) -> dict[str, list[tuple[int, Path]]]:
    """name -> [(oldest version, path)], newest first."""
    out: dict[str, list[tuple[int, Path]]] = {}
    for p in sql_dir.glob("*.sql"):
        m = _FILE_RE.match(p.name)
        if m is None:
            raise DiagError(f"SQL file {p.name} is not named <name>.<oldest server_version_num>.sql")
        out.setdefault(m["name"], []).append((int(m["version"]), p))
    for files in out.values():
        files.sort(key=lambda f: f[0], reverse=True)
    return out


def statement_text(file_text: str) -> str:
    """A file's statement: header comment lines dropped, the marker after the first keyword."""
    lines = file_text.strip().splitlines()
    while lines and (lines[0].lstrip().startswith("--") or not lines[0].strip()):
        lines.pop(0)
    if not lines:
        raise DiagError("SQL file holds no statement")
    return _FIRST_WORD.sub(lambda m: f"{m.group(1)} {MARKER}", "\n".join(lines), count=1)


def sql_names(sql_dir: Path = SQL_DIR) -> list[str]:
    """All query names that have at least one file."""
    return sorted(_index(Path(sql_dir)))


def pick_sql(name: str, version_num: int, sql_dir: Path = SQL_DIR) -> str:
    """The text of query ``name`` for a server at ``version_num`` (``server_version_num``).

    Raises :class:`SqlUnavailable` naming the oldest version that has the
    query when the server is older than every file, and DiagError for an
    unknown name.
    """
    files = _index(Path(sql_dir)).get(name)
    if files is None:
        raise DiagError(f"no SQL named {name!r} in {sql_dir}")
    for oldest, path in files:
        if oldest <= version_num:
            return statement_text(path.read_text(encoding="utf-8"))
    raise SqlUnavailable(f"{name}: needs PostgreSQL {files[-1][0] // 10000} or newer "
                         f"(server is {version_text(version_num)})")
