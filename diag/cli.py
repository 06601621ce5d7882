"""The ``dbdiag`` command: argument parsing and the one place that turns errors into exit codes.

Every failure a user can cause reaches ``main`` as a DiagError and is printed as
one line (``dbdiag: error: ...``) with its exit code; Ctrl-C, SIGTERM and SIGHUP
print where the partial bundle is and exit 130. No traceback for either.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from types import ModuleType

from diag import __version__, comparecmd
from diag.argtypes import DefaultsHelpFormatter, csv_ints as _csv_ints, key_values as _kv, positive as _positive
from diag.commands import durability, fsync_test
from diag.engines import ENGINES
from diag.errors import DiagError, RunIncomplete
from diag.procs import install_stop_signals, interrupt_reason, supervised
from diag.run import Run, RunOptions, default_targets
from diag.servers import ThrowawayServer, start_server
from diag.targets import parse_target
from reports.render import render_bundle
from workloads.driver import DriverOptions
from workloads.tpcc import MODES

# Modules that add subcommands: each defines ``add_parsers(sub)`` and ``dispatch(args) -> int | None``
# (None: not mine). An explicit tuple, not a folder scan.
COMMAND_MODULES: tuple[ModuleType, ...] = (fsync_test, durability, comparecmd)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dbdiag", description="Profile and diagnose PostgreSQL and MySQL/MariaDB "
                                "under the same workloads; writes a run bundle and one HTML report.")
    p.add_argument("--version", action="version", version=f"dbdiag {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    r = sub.add_parser("run", help="run workloads against targets while collecting; write a bundle and report",
                       formatter_class=DefaultsHelpFormatter,
                       epilog="exit codes: 0 done; 2 a problem you can fix (printed as one line); 3 a target's "
                              "server was lost mid-run (the other targets still ran, the report is rendered); "
                              "130 interrupted (the partial bundle is kept)")
    r.add_argument("targets", nargs="*", metavar="TARGET",
                   help="[LABEL=]DSN: postgresql://..., mysql://..., mariadb://..., embedded:postgres, "
                        "embedded:mysql (default: embedded servers available here)")
    r.add_argument("-w", "--workload", default="point-select",
                   help="comma-separated: point-select, read-only, read-write, insert, tpcc, custom")
    r.add_argument("-c", "--clients", type=_csv_ints, default=(1, 4), help="client counts to sweep, e.g. 1,2,4,8")
    r.add_argument("-T", "--duration", type=_positive, default=10.0, help="seconds measured per step")
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
    r.add_argument("--tpcc-mode", choices=MODES, default="client",
                   help="tpcc: client (statements sent by the client) or sp (each transaction one call of stored "
                        "procedures, as HammerDB runs it)")
    r.add_argument("-o", "--out", type=Path, default=None, help="bundle folder (default runs/<UTC time>-<name>)")
    r.add_argument("--name", default="", help="name used in the default bundle folder (default: the workload names)")
    r.add_argument("--no-collect", action="store_true", help="do not run collectors (driver only)")
    r.add_argument("--no-profile", action="store_true", help="do not record perf profiles")
    r.add_argument("--profile-seconds", type=_positive, default=3.0, help="perf window per step (middle of it)")
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

    rep = sub.add_parser("report", help="re-render report.html from a run bundle")
    rep.add_argument("bundle", type=Path)

    srv = sub.add_parser("server", help="throwaway servers")
    ssub = srv.add_subparsers(dest="server_command", metavar="ACTION")
    st = ssub.add_parser("start", help="start a throwaway server, print its DSN, wait for Ctrl-C, remove it")
    st.add_argument("engine", choices=[n for e in ENGINES for n in (e.name, *e.aliases)])
    st.add_argument("--set", action="append", metavar="KEY=VALUE", help="server setting, e.g. fsync=off")
    st.add_argument("--port", type=int, default=None)
    for mod in COMMAND_MODULES:
        mod.add_parsers(sub)
    return p


def cmd_run(a: argparse.Namespace, argv: list[str]) -> int:
    for t in a.targets:
        parse_target(t)  # bad DSNs fail before anything starts

    drv = DriverOptions(clients=a.clients, duration_s=a.duration, warmup_s=max(0.0, a.warmup),
                        protocol=a.protocol, isolation=a.isolation, rate=a.rate, max_tries=a.max_tries,
                        report_interval_s=a.report_interval, scale=a.scale, fresh=a.fresh, script=a.script,
                        think=a.think, tpcc_mode=a.tpcc_mode, on_error=a.on_error, repeat=a.repeat, workers=a.workers,
                        connect_per_txn=a.connect_per_transaction)
    opts = RunOptions(targets=a.targets or default_targets(), workloads=[w.strip() for w in a.workload.split(",")
                                                                          if w.strip()],
                      driver=drv, out=a.out, name=a.name, argv=["dbdiag", *argv], collect=not a.no_collect,
                      profile=not a.no_profile, profile_seconds=a.profile_seconds, profile_client=a.profile_client,
                      flush_capability=a.flush_capability, fsync_seconds=a.fsync_seconds,
                      server_settings=_kv(a.set),
                      host_metrics=_kv(a.host_metrics, "--host-metrics", "LABEL=URL"),
                      ssh=_kv(a.ssh, "--ssh", "LABEL=USER@HOST"))
    run = Run(opts)
    try:
        path = run.execute()
    except KeyboardInterrupt as e:
        print(f"dbdiag: interrupted ({interrupt_reason(e)}); partial bundle in {run.path}", file=sys.stderr)
        return 130
    except RunIncomplete as e:  # the run went on and its report is rendered: say where, exit with its own code
        print(f"dbdiag: error: {e}; report: {(run.path / 'report.html').resolve()}", file=sys.stderr)
        return e.exit_code
    except DiagError as e:
        print(f"dbdiag: error: {e} (what was collected is in {run.path})", file=sys.stderr)
        return e.exit_code
    report = path / "report.html"
    print(f"dbdiag: report: {report.resolve() if report.exists() else '(not rendered)'}")
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    print(f"dbdiag: report: {render_bundle(a.bundle).resolve()}")
    return 0


def cmd_server(a: argparse.Namespace) -> int:
    with supervised() as sup:  # removes the server should we be SIGKILLed
        return _serve(start_server(a.engine, _kv(a.set), a.port, supervisor=sup))


def _serve(srv: ThrowawayServer) -> int:
    """Wait for Ctrl-C (SIGTERM, SIGHUP), then stop and remove ``srv``."""
    try:
        print(srv.dsn(), flush=True)
        print(f"dbdiag: {srv.engine} server pid {srv.pid} in {srv.directory}; Ctrl-C stops and removes it",
              file=sys.stderr, flush=True)
        while srv.process is not None and srv.process.poll() is None:
            try:
                srv.process.wait(timeout=1.0)
            except Exception:  # subprocess.TimeoutExpired: keep waiting for Ctrl-C
                continue
        print(f"dbdiag: error: the server exited by itself: {srv.log_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dbdiag: stopping the server and removing its directory", file=sys.stderr)
        return 0
    finally:
        srv.stop()


def main(argv: list[str] | None = None) -> int:
    # platformdirs (pulled in by a dependency) warns on every start where XDG_RUNTIME_DIR is unset (root
    # shells, CI); it says nothing about our run.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    a = parser.parse_args(argv)
    if not a.command:
        parser.print_help()
        return 2
    install_stop_signals()  # SIGTERM and SIGHUP end every command the way Ctrl-C does
    try:
        if a.command == "run":
            return cmd_run(a, argv)
        if a.command == "report":
            return cmd_report(a)
        if a.command == "server":
            if not a.server_command:
                parser.parse_args(["server", "--help"])
            return cmd_server(a)
        for mod in COMMAND_MODULES:
            rc = mod.dispatch(a)
            if rc is not None:
                return int(rc)
    except DiagError as e:
        print(f"dbdiag: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("dbdiag: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
