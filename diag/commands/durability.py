"""``dbdiag durability TARGET``: are commits durable, and is the commit rate physically possible?

A run (:class:`diag.run.Run`) with its own plan: single-row autocommit inserts
at 1 and 4 clients, F measured first (fsync test in the data directory, unless
``--flush-capability``), flush tracing at a short interval and the engine's own
flush counter as its sources, no host sampling, profiles or report. Then it
prints the settings verdict and the plausibility verdict of each step with its
numbers and formulas. Exit code: 0 durable and plausible, 1 relaxed or
implausible, 2 could not tell (also for any error). It writes rows into
``dbdiag.insert_data`` on the target, like ``dbdiag run -w insert``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from collectors.registry import SourcePlan
from diag.core.argtypes import key_values
from diag.core.bundle import load_bundle
from diag.core.errors import UsageError
from diag.run import Run, RunOptions
from diag.core.targets import parse_target
from reports.views.durability_text import format_durability
from reports.model.durability_view import durability_rows, overall
from workloads.driver import DriverOptions

COMMAND = "durability"
PROBE_FLUSH_INTERVAL_S = 0.25  # finer than a run's 1 s so a short step's window edges cost little


def durability_options(a: argparse.Namespace, settings: dict[str, str], out_dir: Path,
                       argv: list[str]) -> RunOptions:
    """The probe's plan: the insert workload at the probe's client counts, flush sources only, no report."""
    drv = DriverOptions(clients=a.clients, duration_s=a.seconds, warmup_s=max(0.0, a.warmup), protocol="prepared",
                        report_interval_s=1.0)
    # The engine's own flush counter is shown beside S, and is S itself when flush tracing is off.
    plan = SourcePlan(host=False, engine="stats", flush=True, flush_interval_s=PROBE_FLUSH_INTERVAL_S, strict=True,
                      fsync_test_s=None if a.flush_capability else a.fsync_seconds, profile=False)
    return RunOptions(targets=[a.target], workloads=["insert"], driver=drv, out=out_dir, argv=argv,
                      profile=False, flush_capability=a.flush_capability, server_settings=settings,
                      render=False, kind=COMMAND, sources=plan, progress="steps",
                      keep_literals=a.keep_literals)


def main(a: argparse.Namespace, argv: list[str]) -> int:
    """``dbdiag durability``: the exit code is the verdict's (see :func:`reports.model.durability_view.overall`)."""
    target = parse_target(a.target)
    settings = key_values(a.set)
    if settings and not target.embedded:
        raise UsageError("--set only applies to embedded targets (the server is started for the probe)")
    if a.warmup < 0:
        raise UsageError("--warmup cannot be negative")
    keep = a.out is not None
    out_dir = Path(a.out) if keep else Path(tempfile.mkdtemp(prefix="dbdiag-durability-"))
    try:
        path = Run(durability_options(a, settings, out_dir, ["dbdiag", *argv])).execute()
        b = load_bundle(path)
        steps = durability_rows(b)
        code, line = overall(steps)
        if a.json:
            print(json.dumps({"target": target.label, "exit_code": code, "verdict": line,
                              "server": (b.run.get("targets") or [{}])[0],
                              "flush_capability": b.run.get("flush_capability"),
                              "collectors": b.run.get("collectors", {}),
                              "steps": [s.to_dict() for s in steps]}, indent=1, default=str))
        else:
            print(format_durability(b.run, steps, code, line), end="")
        if keep:
            print(f"dbdiag: probe bundle kept in {path}", file=sys.stderr)
        return code
    finally:
        if not keep:
            shutil.rmtree(out_dir, ignore_errors=True)
