"""``dbdiag watch TARGET... [-T S] [--window S] [-- CMD ARGS...]``: diagnose the load already there.

The run's options that apply keep their names and meaning (``--out``, ``--name``,
``--no-collect``, ``--no-profile``, ``--profile-seconds``, ``--flush-capability``,
``--set`` for embedded targets, ``--host-metrics``, ``--ssh``). Exit codes: 0 the
watch ended (its time, the command's end, or Ctrl-C / SIGTERM: the bundle is
complete and the report rendered); the load command's failure is 1 with one line
(the bundle kept); 2 a problem you can fix; 130 a second stop request during the
cleanup.
"""

from __future__ import annotations

import argparse
import sys

from diag.core.argtypes import key_values
from diag.core.bundle import load_bundle
from diag.core.errors import DiagError, RunIncomplete, UsageError
from diag.core.procs import interrupt_reason
from diag.run import RunOptions
from diag.core.targets import parse_target
from diag.watch import Watch, WatchPlan, watch_plan_sources
from reports.model.watch_view import no_load_seen
from workloads.driver import DriverOptions

COMMAND = "watch"


def main(a: argparse.Namespace, argv: list[str]) -> int:
    """Exit codes: see the module docstring."""
    command = list(getattr(a, "load_command", []) or [])
    for t in a.targets:
        parse_target(t)
    settings = key_values(a.set)
    if settings and not any(parse_target(t).embedded for t in a.targets):
        raise UsageError("--set only applies to embedded targets (a watch never changes a server it did not "
                         "start)")
    opts = RunOptions(targets=a.targets, workloads=["watch"], driver=DriverOptions(duration_s=a.window),
                      out=a.out, name=a.name or "watch", argv=["dbdiag", *argv], collect=not a.no_collect,
                      profile=not a.no_profile, profile_seconds=a.profile_seconds,
                      keep_literals=a.keep_literals, plan_others=a.plan_others,
                      flush_capability=a.flush_capability, server_settings=settings,
                      host_metrics=key_values(a.host_metrics, "--host-metrics", "LABEL=URL"),
                      ssh=key_values(a.ssh, "--ssh", "LABEL=USER@HOST"), kind=COMMAND,
                      sources=watch_plan_sources(not a.no_collect, not a.no_profile,
                                                 min(a.profile_seconds, a.window / 2), a.flush_trace))
    watch = Watch(opts, WatchPlan(a.window, a.duration, command))
    try:
        path = watch.execute()
    except KeyboardInterrupt as e:
        print(f"dbdiag: interrupted ({interrupt_reason(e)}); partial bundle in {watch.path}", file=sys.stderr)
        return 130
    except RunIncomplete as e:
        print(f"dbdiag: error: {e}; report: {(watch.path / 'report.html').resolve()}", file=sys.stderr)
        return e.exit_code
    except DiagError as e:
        print(f"dbdiag: error: {e} (what was collected is in {watch.path})", file=sys.stderr)
        return e.exit_code
    report = path / "report.html"
    where = report.resolve() if report.exists() else "(not rendered)"
    if command and watch.exit_status not in (0, None):
        print(f"dbdiag: error: the load command exited with status {watch.exit_status} (its output: "
              f"{path / 'artifacts' / 'load-command.log'}); report: {where}", file=sys.stderr)
        return 1
    idle = no_load_seen(load_bundle(path))
    if idle:
        print(f"dbdiag: no load seen: {idle}")
    print(f"dbdiag: watch ended ({watch.ended_by}); report: {where}")
    return 0
