"""Whether the native executor (``workloads/_native.c``) can run here, and the libraries it opens.

Kept apart from :mod:`workloads.native` so the client picker (:mod:`workloads.client`) can name the
loop on the start-up line without importing the workload base (which imports the client picker).
"""

from __future__ import annotations

import ctypes.util
import functools
import hashlib
import importlib.metadata
import os
from collections.abc import Callable
from pathlib import Path

from diag.engines import MYSQL, POSTGRES, Engine
from workloads import mylib

try:
    from workloads import _native  # type: ignore[attr-defined]
except ImportError:  # not compiled (no C compiler at install time)
    _native = None


def stale_reason(module: object, source: Path) -> str:
    """Why ``module`` (the compiled executor) must not run: built from another ``source`` than the one beside
    it (a checkout changed since its last build); "" when current or when that cannot be told (an installed
    wheel has no source beside it; a build without setup.py's macro records an empty digest)."""
    if not source.is_file():
        return ""
    how = "run `pip install -e .` or `python setup.py build_ext --inplace` again"
    built = getattr(module, "SOURCE_DIGEST", None)
    if built is None:  # built before modules carried their source's digest: older than this checkout
        return f"workloads/_native predates {source.name}'s build check: {how}"
    here = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    if not built or here == built:
        return ""
    return f"{source.name} changed since workloads/_native was built: {how}"


STALE = stale_reason(_native, Path(__file__).with_name("_native.c")) if _native is not None else ""
if STALE:
    _native = None  # a module with another interface must not be called: the Python loop runs instead

LABEL = "native executor"


def enabled() -> bool:
    """The module is compiled and ``DBDIAG_PY_LOOP`` does not ask for the Python loop."""
    return _native is not None and os.environ.get("DBDIAG_PY_LOOP", "") in ("", "0")


@functools.lru_cache(maxsize=1)  # asked at every native connect (each transaction under -C): found once
def pg_library() -> str | None:
    """The libpq of psycopg's binary wheel (psycopg_binary.libs/), else the system's libpq.so.5."""
    try:
        files = importlib.metadata.files("psycopg-binary") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if Path(str(f)).name.startswith("libpq") and ".so" in str(f):
            return str(f.locate())
    return "libpq.so.5" if ctypes.util.find_library("pq") else None


def my_library() -> str | None:
    """libmariadb, as :mod:`workloads.mylib` loads it."""
    return "libmariadb.so.3" if mylib.library() is not None else None


LIBRARIES: dict[str, Callable[[], str | None]] = {POSTGRES.name: pg_library, MYSQL.name: my_library}


def available(engine: Engine) -> bool:
    """Whether the native executor can run for ``engine`` here (module built, library found)."""
    return enabled() and engine.name in LIBRARIES and LIBRARIES[engine.name]() is not None
