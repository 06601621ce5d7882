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
from diag import servers
from diag.argtypes import DefaultsHelpFormatter, key_values, positive
from diag.db import Session, own_app_name
from diag.errors import DiagError, UsageError
from diag.procs import Supervisor, supervised
from diag.targets import Target, parse_target

COMMAND = "fsync-test"


def add_parsers(sub: Any) -> None:
    f = sub.add_parser(COMMAND, help="measure how fast the disk completes durable writes (like pg_test_fsync)",
                       formatter_class=DefaultsHelpFormatter)
    f.add_argument("targets", nargs="*", metavar="TARGET",
                   help="test in each local target's data directory (embedded:ENGINE starts a throwaway server)")
    f.add_argument("--dir", type=Path, default=None, help="directory to test in (default: the current directory)")
    f.add_argument("--seconds", type=positive, default=2.0, help="seconds per test; there are 12 tests")
    f.add_argument("--set", action="append", metavar="KEY=VALUE", help="setting for embedded servers")
    f.add_argument("--json", action="store_true", help="print the results as JSON")


def dispatch(a: argparse.Namespace) -> int | None:
    return cmd_fsync_test(a) if a.command == COMMAND else None


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


def cmd_fsync_test(a: argparse.Namespace) -> int:
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
