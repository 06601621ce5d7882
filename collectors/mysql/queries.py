"""The one place that picks version-specific SQL for MySQL / MariaDB collectors.

Each query lives in ``sql/<name>.<flavor>.<oldest>.sql``: ``flavor`` is
``mysql``, ``mariadb`` or ``any`` (same text on both), ``oldest`` the oldest
server version the file works on as ``major*10000 + minor*100 + patch``
(the form of :attr:`diag.db.Session.version_num`; 0 = every version). Every
file starts with the ``/* dbdiag */`` marker so the wait sampler can leave our
own statements out of the workload's profile.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from diag.errors import DiagError

SQL_DIR = Path(__file__).with_name("sql")
MARKER = "/* dbdiag */"
PRODUCTS = ("mysql", "mariadb")
_FILE_RE = re.compile(r"^(?P<name>[a-z0-9_]+)\.(?P<flavor>mysql|mariadb|any)\.(?P<version>\d+)\.sql$")


class SqlUnavailable(DiagError):
    """No SQL file fits this server: the feature needs a newer (or other) server."""


def version_text(version_num: int) -> str:
    """``80030`` -> ``"8.0.30"``; ``101119`` -> ``"10.11.19"``."""
    return f"{version_num // 10000}.{version_num // 100 % 100}.{version_num % 100}"


@functools.lru_cache(maxsize=4)
def _index(sql_dir: Path) -> dict[str, dict[str, list[tuple[int, Path]]]]:
    """name -> flavor -> [(oldest version, path)] sorted newest first."""
    out: dict[str, dict[str, list[tuple[int, Path]]]] = {}
    for p in sql_dir.glob("*.sql"):
        m = _FILE_RE.match(p.name)
        if m is None:
            raise DiagError(f"SQL file {p.name} is not named <name>.<mysql|mariadb|any>.<version>.sql")
        out.setdefault(m["name"], {}).setdefault(m["flavor"], []).append((int(m["version"]), p))
    for flavors in out.values():
        for files in flavors.values():
            files.sort(key=lambda f: f[0], reverse=True)
    return out


def sql_names(sql_dir: Path = SQL_DIR) -> list[str]:
    """All query names that have at least one file."""
    return sorted(_index(sql_dir))


def pick_sql(name: str, product: str, version_num: int, sql_dir: Path = SQL_DIR) -> str:
    """The text of query ``name`` for ``product`` ("mysql" or "mariadb") at ``version_num``.

    The newest file of the product's own flavor whose oldest version is <=
    ``version_num`` wins; when the product has none that fits, the ``any``
    file does. Raises :class:`SqlUnavailable` naming the oldest version that
    has the query when none fits, and DiagError for an unknown name or product.
    """
    if product not in PRODUCTS:
        raise DiagError(f"unknown MySQL product {product!r}: expected one of {', '.join(PRODUCTS)}")
    flavors = _index(Path(sql_dir)).get(name)
    if flavors is None:
        raise DiagError(f"no SQL named {name!r} in {sql_dir}")
    for flavor in (product, "any"):
        for oldest, path in flavors.get(flavor, []):
            if oldest <= version_num:
                return path.read_text(encoding="utf-8").strip()
    known = [v for f in (product, "any") for v, _ in flavors.get(f, [])]
    if not known:
        raise SqlUnavailable(f"{name}: not available on {product}")
    raise SqlUnavailable(f"{name}: needs {product} {version_text(min(known))} or newer "
                         f"(server is {version_text(version_num)})")
