"""The one picker of version-specific SQL files, for every folder of them (collectors' queries, the
TPC-C routines of :mod:`workloads.tpcc.tpcc_sp`).

A folder holds one statement per file:

* ``<name>.<oldest>.sql``: the statement for every product of the engine, from
  server version ``oldest`` on;
* ``<name>.<product>.<oldest>.sql``: the statement for one product (``mysql`` or
  ``mariadb``: :attr:`Engine.products`), used in place of the shared file where
  the two differ.

``oldest`` is a version number as the server reports it in
:attr:`diag.core.db.Session.version_num` (``major*10000 + minor*100 + patch``;
PostgreSQL's ``server_version_num``, ``140000`` = 14.0; ``0`` = every version).
For a server, the newest file of its own product whose ``oldest`` is <= its
version wins, else the newest such shared file. So a query that did not change
has one file, and a view that changed in 17 gets a second ``.170000.sql``.

A file may open with ``--`` lines saying what it reads and why; the text
returned is the statement without them, carrying the ``/* dbdiag */``
:data:`MARKER` that tells our catalog queries from the workload's. A file may
put the marker first itself (MySQL's processlist shows a statement from its
first character, and the wait sampler skips statements starting with it);
otherwise it goes right after the first keyword, inside the statement, because
pg_stat_statements keeps a statement's own comments but drops those before it.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from diag.core.engines import Engine
from diag.core.errors import DiagError

MARKER = "/* dbdiag */"
_FILE_RE = re.compile(r"^(?P<name>[a-z0-9_]+)\.(?:(?P<product>[a-z]+)\.)?(?P<version>\d+)\.sql$")
_FIRST_WORD = re.compile(r"^(\w+)")
_SHARED = ""  # the product key of files that serve every product

Index = dict[str, dict[str, list[tuple[int, Path]]]]


class SqlUnavailable(DiagError):
    """No SQL file fits this server: the feature needs a newer (or another) server."""


@functools.lru_cache(maxsize=16)
def _index(folder: Path, engine: Engine) -> Index:
    """name -> product ("" = shared) -> [(oldest version, path)], newest first."""
    out: Index = {}
    for p in folder.glob("*.sql"):
        m = _FILE_RE.match(p.name)
        if m is None or (m["product"] is not None and m["product"] not in engine.products):
            raise DiagError(f"SQL file {p.name} is not named <name>[.<{'|'.join(engine.products)}>].<oldest "
                            "version>.sql")
        out.setdefault(m["name"], {}).setdefault(m["product"] or _SHARED, []).append((int(m["version"]), p))
    for products in out.values():
        for files in products.values():
            files.sort(key=lambda f: f[0], reverse=True)
    return out


def statement_text(file_text: str) -> str:
    """A file's statement: header comment lines dropped, the marker first or after the first keyword."""
    lines = file_text.strip().splitlines()
    while lines and (lines[0].lstrip().startswith("--") or not lines[0].strip()):
        lines.pop(0)
    if not lines:
        raise DiagError("SQL file holds no statement")
    text = "\n".join(lines).strip()
    if text.startswith(MARKER):
        return text
    return _FIRST_WORD.sub(lambda m: f"{m.group(1)} {MARKER}", text, count=1)


@functools.lru_cache(maxsize=512)
def _statement(path: Path) -> str:
    """The statement of one file, read once per process: the 10 Hz samplers pick theirs every tick, and a file
    read there cost ~30-70 us a query (as :func:`_index`, the files are taken not to change under a run)."""
    return statement_text(path.read_text(encoding="utf-8"))


def names_in(folder: Path, engine: Engine) -> list[str]:
    """All statement names of ``engine`` in ``folder`` that have at least one file."""
    return sorted(_index(Path(folder), engine))


def _server_name(engine: Engine, product: str) -> str:
    """How a message names the server: by product where the engine has several, else by the engine's title."""
    return product if len(engine.products) > 1 else engine.title


def pick_in(folder: Path, name: str, engine: Engine, version_num: int, product: str = "") -> str:
    """The statement ``name`` of ``folder`` for a server of ``engine`` at ``version_num``.

    ``product`` (one of :attr:`Engine.products`; "" = none in particular) picks
    the product's own files first. Raises :class:`SqlUnavailable` naming the
    oldest version that has the statement when the server is older than every
    file (or the statement exists only for another product), and DiagError for an
    unknown name or product.
    """
    if product and product not in engine.products:
        raise DiagError(f"unknown {engine.title} product {product!r}: expected one of {', '.join(engine.products)}")
    where = Path(folder)
    by_product = _index(where, engine).get(name)
    if by_product is None:
        raise DiagError(f"no SQL named {name!r} in {where}")
    candidates = [*(by_product.get(product, []) if product else []), *by_product.get(_SHARED, [])]
    for oldest, path in candidates:
        if oldest <= version_num:
            return _statement(path)
    server = _server_name(engine, product)
    if not candidates:
        raise SqlUnavailable(f"{name}: not available on {server}")
    oldest = min(v for v, _ in candidates)
    raise SqlUnavailable(f"{name}: needs {server} {engine.release_text(oldest)} or newer "
                         f"(server is {engine.version_text(version_num)})")
