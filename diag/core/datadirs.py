"""Initialised data directories made once per process and copied for each later throwaway server of the kind.

``initdb`` and ``mariadb-install-db`` are most of a throwaway server's start: mariadb-install-db 2.8-3.3 s
here, for a directory that is the same every time (the settings a server starts with are given to the server,
never to the initialisation, :mod:`diag.core.servers`). A process that starts many servers (the test suite,
the benchmarks: one per module or per configuration) turns this on with :func:`enable`; the first server of
a kind is initialised as before and its fresh directory kept as a template, the next ones copy it. A data
directory of either engine holds no absolute path, so a copy is a cold copy of a stopped server, which both
engines document as a way to clone one. Off by default: ``dbdiag run`` starts one server per engine, where a
template would only cost a copy. Templates are removed at exit (:func:`clear`).
"""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

_root: Path | None = None  # where templates go (None: off), chosen when enabled: a later DBDIAG_TMPDIR of one
# caller (a test's loop mount, unmounted after) must not take every later server's template with it
_lock = threading.Lock()
_kind_locks: dict[str, threading.Lock] = {}
_templates: dict[str, Path] = {}


def enable(on: bool = True) -> None:
    """Keep a template of each kind of data directory this process initialises (see the module docstring), in
    DBDIAG_TMPDIR (else /tmp) as it is now."""
    global _root
    _root = Path(os.environ.get("DBDIAG_TMPDIR", "/tmp")) if on else None


def clear() -> None:
    """Remove every template this process made."""
    with _lock:
        for path in _templates.values():
            shutil.rmtree(path.parent, ignore_errors=True)
        _templates.clear()


atexit.register(clear)


def _kind_lock(kind: str) -> threading.Lock:
    with _lock:
        return _kind_locks.setdefault(kind, threading.Lock())


def initialise(kind: str, dest: Path, init: Callable[[], None], user: pwd.struct_passwd | None) -> bool:
    """Make ``dest`` an initialised data directory of ``kind`` (engine, binaries, options of the
    initialisation): ``init()`` the first time in this process (kept as a template when enabled), a copy of
    the template after, owned by ``user`` (None: this process's user). True when it was a copy."""
    root = _root
    if root is None:
        init()
        return False
    with _kind_lock(kind):  # two servers of one kind starting at once: one initialises, the other copies
        template = _templates.get(kind)
        if template is None:
            init()
            _keep(kind, dest, root)
            return False
    try:
        shutil.copytree(template, dest, symlinks=True)
        if user is not None:
            for top, dirs, files in os.walk(dest):
                for name in (top, *(os.path.join(top, n) for n in dirs + files)):
                    os.lchown(name, user.pw_uid, user.pw_gid)
    except OSError:  # the template went (a full disk, a removed folder): initialise as without one
        shutil.rmtree(dest, ignore_errors=True)
        with _lock:
            _templates.pop(kind, None)
        init()
        return False
    return True


def _keep(kind: str, fresh: Path, root: Path) -> None:
    """Copy a freshly initialised directory as the template of ``kind`` (none when that fails: a server
    that started is not failed for its template)."""
    keep: Path | None = None
    try:
        keep = Path(tempfile.mkdtemp(prefix="dbdiag-template-", dir=root))
        shutil.copytree(fresh, keep / "data", symlinks=True)
    except OSError:
        if keep is not None:
            shutil.rmtree(keep, ignore_errors=True)
        return
    with _lock:
        _templates[kind] = keep / "data"
