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
from pathlib import Path
from typing import Any

from diag.argtypes import DefaultsHelpFormatter, key_values, positive
from diag.bundle import load_bundle
from diag.errors import DiagError, RunIncomplete, UsageError
from diag.procs import interrupt_reason
from diag.run import RunOptions
from diag.targets import parse_target
from diag.watch import Watch, WatchPlan, watch_plan_sources
from reports.watch_view import no_load_seen
from workloads.driver import DriverOptions

COMMAND = "watch"


def add_parsers(sub: Any) -> None:
    w = sub.add_parser(COMMAND, help="diagnose the load already on the servers (or a load command's) without "
                       "sending any", formatter_class=DefaultsHelpFormatter,
                       usage="dbdiag watch TARGET... [-T SECONDS] [--window SECONDS] [options] [-- CMD [ARGS...]]",
                       epilog="after --: a load command (pgbench, sysbench, HammerDB's CLI, your own load test) "
                              "that the watch starts and watches until it exits. Exit codes: 0 the watch ended "
                              "(its time, the command's end, Ctrl-C: the report is rendered); 1 the load command "
                              "failed (the bundle is kept); 2 a problem you can fix; 130 interrupted twice")
    w.add_argument("targets", nargs="+", metavar="TARGET", help="[LABEL=]DSN of each server to watch")
    w.add_argument("-T", "--duration", type=positive, default=None,
                   help="seconds to watch (default: until the load command exits, or Ctrl-C)")
    w.add_argument("--window", type=positive, default=10.0, help="seconds per window (each window is a step)")
    w.add_argument("-o", "--out", type=Path, default=None, help="bundle folder (default runs/<UTC time>-<name>)")
    w.add_argument("--name", default="", help="name used in the default bundle folder (default: watch)")
    w.add_argument("--no-collect", action="store_true", help="no sources: the server's counters only")
    w.add_argument("--no-profile", action="store_true", help="do not record perf profiles")
    w.add_argument("--keep-literals", action="store_true",
                   help="store statement texts read from the server with their literals (default: as "
                        "fingerprints, each literal replaced by ?): the watched load is someone else's")
    w.add_argument("--plan-others", action="store_true",
                   help="also plan other users' statements (as dbdiag run --plan-others); default: only "
                        "statements of dbdiag's own user")
    w.add_argument("--profile-seconds", type=positive, default=3.0, help="perf window per window (middle of it)")
    w.add_argument("--flush-capability", type=positive, default=None,
                   help="flushes/s the storage can do (a watch runs no fsync test on a server's disk)")
    w.add_argument("--flush-trace", action="store_true",
                   help="count the server's flush calls with perf tracepoints (slows every system call of the "
                        "watched load a little: off by default)")
    w.add_argument("--set", action="append", metavar="KEY=VALUE", help="setting for embedded servers")
    w.add_argument("--host-metrics", action="append", metavar="LABEL=URL",
                   help="host evidence of target LABEL from its host's node_exporter")
    w.add_argument("--ssh", action="append", metavar="LABEL=USER@HOST",
                   help="profile target LABEL's server with perf on its own host over ssh")


def dispatch(a: argparse.Namespace) -> int | None:
    return cmd_watch(a) if a.command == COMMAND else None


def cmd_watch(a: argparse.Namespace) -> int:
    command = list(getattr(a, "load_command", []) or [])
    for t in a.targets:
        parse_target(t)
    settings = key_values(a.set)
    if settings and not any(parse_target(t).embedded for t in a.targets):
        raise UsageError("--set only applies to embedded targets (a watch never changes a server it did not "
                         "start)")
    opts = RunOptions(targets=a.targets, workloads=["watch"], driver=DriverOptions(duration_s=a.window),
                      out=a.out, name=a.name or "watch", argv=["dbdiag", *sys.argv[1:]], collect=not a.no_collect,
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
