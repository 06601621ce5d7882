"""The compiled native executor (``workloads/native/_native.c``) as this checkout built it, or None: not compiled,
or built from another source than the one beside it (then :data:`STALE` says why and the Python loop runs).

Kept apart from :mod:`workloads.native.nativelib` so each engine's native binding (its module in
:mod:`workloads.engines`) can call the module without importing the engine registry.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def stale_reason(module: object, source: Path) -> str:
    """Why ``module`` (the compiled executor) must not run: built from another ``source`` than the one beside
    it (a checkout changed since its last build); "" when current or when that cannot be told (an installed
    wheel has no source beside it; a build without setup.py's macro records an empty digest)."""
    if not source.is_file():
        return ""
    how = "run `pip install -e .` or `python setup.py build_ext --inplace` again"
    built = getattr(module, "SOURCE_DIGEST", None)
    if built is None:  # built before modules carried their source's digest: older than this checkout
        return f"workloads/native/_native predates {source.name}'s build check: {how}"
    here = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    if not built or here == built:
        return ""
    return f"{source.name} changed since workloads/native/_native was built: {how}"


try:
    from workloads.native import _native  # type: ignore[attr-defined]
except ImportError:  # not compiled (no C compiler at install time)
    _native = None


STALE = stale_reason(_native, Path(__file__).with_name("_native.c")) if _native is not None else ""
if STALE:
    _native = None  # a module with another interface must not be called: the Python loop runs instead

LABEL = "native executor"


def enabled() -> bool:
    """The module is compiled and ``DBDIAG_PY_LOOP`` does not ask for the Python loop."""
    return _native is not None and os.environ.get("DBDIAG_PY_LOOP", "") in ("", "0")
