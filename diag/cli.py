"""The ``dbdiag`` command: argument parsing and the one place that turns errors into exit codes.

Every failure a user can cause reaches ``main`` as a DiagError and is printed as
one line (``dbdiag: error: ...``) with its exit code; Ctrl-C, SIGTERM and SIGHUP
print where the partial bundle is and exit 130. No traceback for either.

This module imports only what parsing needs: the parsers of every command are
here, and a command's own modules (reports, collectors, workloads) are imported
when that command runs (:data:`COMMANDS`), so ``dbdiag --help`` and an argument
error answer at once.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from diag import __version__
from diag.core.argtypes import DefaultsHelpFormatter, csv_ints as _csv_ints, duration as _duration, positive as _positive
from diag.core.errors import DiagError
from diag.core.procs import install_stop_signals
from diag.core.redact import redact_text

# The command registry: command name -> the module that runs it, imported by :func:`load_command` when
# that command is chosen (the one place the architecture test allows an import at run time). Each module
# defines ``main(args: argparse.Namespace, argv: list[str]) -> int``. An explicit table, not a folder scan.
COMMANDS: dict[str, str] = {
    "run": "diag.commands.run",
    "report": "diag.commands.report",
    "server": "diag.commands.server",
    "fsync-test": "diag.commands.fsync_test",
    "durability": "diag.commands.durability",
    "compare": "diag.commands.compare",
    "watch": "diag.commands.watch",
}
# --tpcc-mode's choices; equal to workloads.tpcc.tpcc.MODES (a unit test says so), written here so that parsing
# does not import the workloads.
TPCC_MODES = ("client", "sp")
DURABILITY_CLIENTS = (1, 4)
# `server start`'s engine names; a unit test checks that every engine's name and alias is here.
ENGINE_HELP = "postgres (or postgresql, pg) or mysql (or mariadb)"

CommandMain = Callable[[argparse.Namespace, list[str]], int]


def load_command(name: str) -> CommandMain:
    """The ``main`` of command ``name``, its module imported now (and its reports/collectors/workloads with it)."""
    return importlib.import_module(COMMANDS[name]).main  # type: ignore[no-any-return]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dbdiag", description="Profile and diagnose PostgreSQL and MySQL/MariaDB "
                                "under the same workloads; writes a run bundle and one HTML report.")
    p.add_argument("--version", action="version", version=f"dbdiag {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    _run_parser(sub)
    rep = sub.add_parser("report", help="re-render report.html from a run bundle")
    rep.add_argument("bundle", type=Path)

    srv = sub.add_parser("server", help="throwaway servers")
    ssub = srv.add_subparsers(dest="server_command", metavar="ACTION")
    st = ssub.add_parser("start", help="start a throwaway server, print its DSN, wait for Ctrl-C, remove it")
    # Checked by the command (diag.core.engines.engine_for), not by choices: listing them would import the engines.
    st.add_argument("engine", metavar="ENGINE", help=ENGINE_HELP)
    st.add_argument("--set", action="append", metavar="KEY=VALUE", help="server setting, e.g. fsync=off")
    st.add_argument("--port", type=int, default=None)
    _fsync_test_parser(sub)
    _durability_parser(sub)
    _compare_parser(sub)
    _watch_parser(sub)
    return p


def _run_parser(sub: Any) -> None:
    r = sub.add_parser("run", help="run workloads against targets while collecting; write a bundle and report",
                       formatter_class=DefaultsHelpFormatter,
                       epilog="exit codes: 0 done; 2 a problem you can fix (printed as one line); 3 a target's "
                              "server was lost mid-run (the other targets still ran, the report is rendered); "
                              "4 --on-error abort ended a step; 5 a statement did not return (named with what it "
                              "waited for; the report is rendered); "
                              "130 interrupted by Ctrl-C, SIGTERM or SIGHUP (the partial bundle is kept)")
    r.add_argument("targets", nargs="*", metavar="TARGET",
                   help="[LABEL=]DSN: postgresql://..., mysql://..., mariadb://..., embedded:postgres, "
                        "embedded:mysql (default: embedded servers available here)")
    r.add_argument("-w", "--workload", default="point-select",
                   help="comma-separated: point-select, read-only, read-write, insert, tpcc, custom")
    r.add_argument("-c", "--clients", type=_csv_ints, default=(1, 4), help="client counts to sweep, e.g. 1,2,4,8")
    r.add_argument("-T", "--duration", type=_duration, default=10.0, help="seconds measured per step")
    r.add_argument("--warmup", type=float, default=2.0, help="seconds per step before measuring")
    r.add_argument("--protocol", choices=("simple", "prepared"), default="prepared",
                   help="simple: statement text each time; prepared: parse once per client")
    r.add_argument("--isolation", choices=("read-committed", "repeatable-read", "serializable"),
                   default="read-committed", help="transaction isolation level of the workload's clients")
    r.add_argument("--rate", type=_positive, default=None, help="open-loop target transactions/s (total) (default: closed loop, each client as fast as it can)")
    r.add_argument("--max-tries", type=int, default=10, help="tries per transaction on serialization/deadlock")
    r.add_argument("--on-error", choices=("continue", "abort"), default="continue",
                   help="continue: count a failed transaction and go on (a lost connection is re-established, "
                        "counted as reconnects); abort: end the step at the first error that is not a retried "
                        "serialization failure or deadlock")
    r.add_argument("--connect-per-transaction", action="store_true",
                   help="open a new connection for each transaction, as pgbench -C (the connect is timed as "
                        "a part of the transaction)")
    r.add_argument("--statement-timeout", type=_positive, default=None, metavar="SECONDS",
                   help="a statement (or commit) running longer is stuck: the server's view of what it waits for "
                        "is reported, its session ended and the step cut (incomplete); --on-error decides whether "
                        "the run goes on (default: a statement still running 5 s after its step's end, or a load "
                        "statement in one lock or replication wait for 30 s)")
    r.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run each step N times, interleaved across targets (A1 B1 A2 B2 ...); the result is "
                        "the median with its interval")
    r.add_argument("--workers", default=None, metavar="tcp://SCHEDULER:8786",
                   help="run each step's clients on the workers of this Dask scheduler (pip install 'dbdiag[dask]')")
    r.add_argument("--report-interval", type=_positive, default=1.0, help="seconds between progress lines")
    r.add_argument("-s", "--scale", type=int, default=1, help="data size (workload-specific unit)")
    r.add_argument("--fresh", action="store_true", help="reload data even if it matches")
    r.add_argument("--script", default=None, help="file for the custom workload")
    r.add_argument("--think", action="store_true", help="tpcc: keying and think times")
    r.add_argument("--tpcc-mode", choices=TPCC_MODES, default="client",
                   help="tpcc: client (statements sent by the client) or sp (each transaction one call of stored "
                        "procedures, as HammerDB runs it)")
    r.add_argument("-o", "--out", type=Path, default=None, help="bundle folder (default runs/<UTC time>-<name>)")
    r.add_argument("--name", default="", help="name used in the default bundle folder (default: the workload names)")
    r.add_argument("--no-collect", action="store_true", help="do not run collectors (driver only)")
    r.add_argument("--plan-others", action="store_true",
                   help="also plan other users' statements (PostgreSQL: as their role, which needs dbdiag's login "
                        "to be a member of it; MySQL/MariaDB: with dbdiag's own privileges, as EXPLAIN runs the "
                        "stored functions a plan needs); default: only statements of dbdiag's own user")
    r.add_argument("--no-profile", action="store_true", help="do not record perf profiles")
    r.add_argument("--keep-literals", action="store_true",
                   help="store statement texts read from the server (other sessions' blockers, samples) with their "
                        "literals (default: as fingerprints, each literal replaced by ?)")
    r.add_argument("--profile-seconds", type=_positive, default=3.0, help="perf window per step, after its measured part")
    r.add_argument("--profile-client", action="store_true", help="sample the client processes with py-spy")
    r.add_argument("--flush-capability", type=_positive, default=None,
                   help="flushes/s the storage can do (skip measuring), e.g. 120 for a 7200 rpm disk "
                        "(default: measured by an fsync test when a workload writes)")
    r.add_argument("--fsync-seconds", type=_positive, default=0.3,
                   help="seconds per method of that fsync test (12 methods per device)")
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help="setting for embedded servers")
    r.add_argument("--host-metrics", action="append", metavar="LABEL=URL",
                   help="host evidence of target LABEL from its host's node_exporter, e.g. "
                        "db1=http://db1:9100/metrics (CPU, context switches, disk I/O, device flushes)")
    r.add_argument("--ssh", action="append", metavar="LABEL=USER@HOST",
                   help="profile target LABEL's server with perf on its own host over ssh (your ssh config "
                        "and keys; no password prompt)")


def _fsync_test_parser(sub: Any) -> None:
    f = sub.add_parser("fsync-test", help="measure how fast the disk completes durable writes (like pg_test_fsync)",
                       formatter_class=DefaultsHelpFormatter)
    f.add_argument("targets", nargs="*", metavar="TARGET",
                   help="test in each local target's data directory (embedded:ENGINE starts a throwaway server)")
    f.add_argument("--dir", type=Path, default=None, help="directory to test in (default: the current directory)")
    f.add_argument("--seconds", type=_positive, default=2.0, help="seconds per test; there are 12 tests")
    f.add_argument("--set", action="append", metavar="KEY=VALUE", help="setting for embedded servers")
    f.add_argument("--json", action="store_true", help="print the results as JSON")


def _durability_parser(sub: Any) -> None:
    d = sub.add_parser("durability", help="are commits durable, and is the commit rate physically possible?",
                       formatter_class=DefaultsHelpFormatter)
    d.add_argument("target", metavar="TARGET", help="[LABEL=]DSN or embedded:postgres / embedded:mysql")
    d.add_argument("--flush-capability", type=_positive, default=None, metavar="OPS",
                   help="flushes/s the storage can do (skip the fsync test), e.g. 120 for a 7200 rpm disk")
    d.add_argument("--seconds", type=_positive, default=3.0, help="measured seconds per step")
    d.add_argument("--warmup", type=float, default=1.0, help="seconds per step before measuring")
    d.add_argument("-c", "--clients", type=_csv_ints, default=DURABILITY_CLIENTS,
                   help="client counts to probe (default 1,4)")
    d.add_argument("--fsync-seconds", type=_positive, default=0.5,
                   help="seconds per fsync test when measuring F (12 tests)")
    d.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="setting for an embedded server, e.g. fsync=off")
    d.add_argument("-o", "--out", type=Path, default=None, help="keep the probe's run bundle in this folder")
    d.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    d.add_argument("--keep-literals", action="store_true",
                   help="keep the statements INNODB STATUS quotes with their literals (default: fingerprints)")


def _compare_parser(sub: Any) -> None:
    c = sub.add_parser("compare", help="compare two run bundles (or the targets within one) per transaction, "
                                       "or a baseline set of runs with a contender set (--vs)")
    c.add_argument("runs", type=Path, nargs="+", metavar="RUN",
                   help="one run (its targets compared), two runs, or the baseline set when --vs is given")
    c.add_argument("--vs", type=Path, nargs="+", default=None, metavar="RUN",
                   help="the contender set: each step's change against the baseline runs, with its interval")
    c.add_argument("--json", action="store_true", help="print the comparison as JSON (no page is written)")
    c.add_argument("--html", type=Path, default=None, metavar="FILE",
                   help="where to write the comparison page (default: compare.html, or compare-<RUN_B>.html "
                        "for two runs, in RUN_A; with --vs, compare-vs-<first contender>.html in the first baseline)")


def _watch_parser(sub: Any) -> None:
    w = sub.add_parser("watch", help="diagnose the load already on the servers (or a load command's) without "
                       "sending any", formatter_class=DefaultsHelpFormatter,
                       usage="dbdiag watch TARGET... [-T SECONDS] [--window SECONDS] [options] [-- CMD [ARGS...]]",
                       epilog="after --: a load command (pgbench, sysbench, HammerDB's CLI, your own load test) "
                              "that the watch starts and watches until it exits. Exit codes: 0 the watch ended "
                              "(its time, the command's end, Ctrl-C: the report is rendered); 1 the load command "
                              "failed (the bundle is kept); 2 a problem you can fix; 130 interrupted twice")
    w.add_argument("targets", nargs="+", metavar="TARGET", help="[LABEL=]DSN of each server to watch")
    w.add_argument("-T", "--duration", type=_positive, default=None,
                   help="seconds to watch (default: until the load command exits, or Ctrl-C)")
    w.add_argument("--window", type=_positive, default=10.0, help="seconds per window (each window is a step)")
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
    w.add_argument("--profile-seconds", type=_positive, default=3.0, help="perf window per window (middle of it)")
    w.add_argument("--flush-capability", type=_positive, default=None,
                   help="flushes/s the storage can do (a watch runs no fsync test on a server's disk)")
    w.add_argument("--flush-trace", action="store_true",
                   help="count the server's flush calls with perf tracepoints (slows every system call of the "
                        "watched load a little: off by default)")
    w.add_argument("--set", action="append", metavar="KEY=VALUE", help="setting for embedded servers")
    w.add_argument("--host-metrics", action="append", metavar="LABEL=URL",
                   help="host evidence of target LABEL from its host's node_exporter")
    w.add_argument("--ssh", action="append", metavar="LABEL=USER@HOST",
                   help="profile target LABEL's server with perf on its own host over ssh")


def main(argv: list[str] | None = None) -> int:
    # platformdirs (pulled in by a dependency) warns on every start where XDG_RUNTIME_DIR is unset (root
    # shells, CI); it says nothing about our run.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    command_args: list[str] = []
    if argv[:1] == ["watch"] and "--" in argv:  # the load command after "--" is its own, not dbdiag's to parse
        command_args, argv = argv[argv.index("--") + 1:], argv[:argv.index("--")]
    a = parser.parse_args(argv)
    a.load_command = command_args
    if not a.command:
        parser.print_help()
        return 2
    if a.command == "server" and not a.server_command:
        parser.parse_args(["server", "--help"])
    install_stop_signals()  # SIGTERM and SIGHUP end every command the way Ctrl-C does
    try:
        return int(load_command(a.command)(a, argv))
    except DiagError as e:
        print(f"dbdiag: error: {redact_text(str(e))}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("dbdiag: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def entry() -> None:
    """The ``dbdiag`` command (its console script, ``python -m diag``): :func:`main`'s exit code. A stop signal
    that comes after main has decided it is the process's end, not a second outcome: Python restores the
    default handlers as it shuts down, and a SIGTERM then killed the finished run (exit status -15, seen when a
    signal sent during the clean-up arrived just after it). The signals are blocked before shutdown; one
    still pending is dropped with the process. (main itself stays callable in-process, as tests call it.)"""
    code = 130
    try:
        code = main()
    except KeyboardInterrupt:  # a stop signal after main's own handling, before the block below
        print("dbdiag: interrupted", file=sys.stderr)
        code = 130
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
    sys.exit(code)


if __name__ == "__main__":
    entry()
