"""``dbdiag fsync-test [TARGET...] [--dir PATH] [--seconds S] [--json]``: what the disk can flush.

Runs :func:`collectors.fsync_test.run_fsync_test` in each local target's data
directory (an ``embedded:`` target gets a throwaway server for it), else in
``--dir`` or the current directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any

from collectors.fsync_test import format_table, run_fsync_test, writable_dir_on_same_fs
from collectors.hostinfo import data_directory
from diag.core import servers
from diag.core.argtypes import key_values
from diag.core.db import Session, own_app_name
from diag.core.errors import DiagError, UsageError
from diag.core.procs import Supervisor, supervised
from diag.core.targets import Target, parse_target


def _test_target(t: Target, settings: dict[str, str], seconds: float,
                 sup: Supervisor | None = None) -> tuple[str, Any]:
    """The fsync test in a target's data directory (a throwaway server for an embedded one, removed after;
    also by ``sup`` should we be killed)."""
    srv = None
    try:
        if t.embedded:
            srv = servers.start_server(t.engine, settings, supervisor=sup)
            t = srv.target(t)
            ddir: str | None = str(srv.data_dir)
        else:
            if not t.is_local():
                raise DiagError(f"{t.label}: the server is not on this machine; run fsync-test on its host "
                                "(or give --dir)")
            with Session(t, application_name=own_app_name("fsync-test")) as s:
                ddir = data_directory(s)
        if not ddir:
            raise DiagError(f"{t.label}: the server did not say where its data directory is; use --dir")
        return t.label, run_fsync_test(writable_dir_on_same_fs(ddir), seconds)
    finally:
        if srv is not None:
            srv.stop()


def main(a: argparse.Namespace, argv: list[str]) -> int:
    """``dbdiag fsync-test``: a table (or JSON) of the twelve tests per directory."""
    if a.targets and a.dir:
        raise UsageError("give either TARGETs or --dir, not both")
    settings = key_values(a.set)
    results: list[tuple[str | None, Any]] = []
    if not a.targets:
        results.append((None, run_fsync_test(a.dir or Path.cwd(), a.seconds)))
    targets = [parse_target(t) for t in a.targets]
    with supervised() if any(t.embedded for t in targets) else contextlib.nullcontext() as sup:
        for t in targets:
            results.append(_test_target(t, settings, a.seconds, sup))
    if a.json:
        print(json.dumps({"fsync_tests": [{"target": label, **r.to_dict()} for label, r in results]}, indent=1))
    else:
        for i, (label, r) in enumerate(results):
            if i:
                print()
            if label:
                print(f"{label}:")
            print(format_table(r), end="")
    return 0
