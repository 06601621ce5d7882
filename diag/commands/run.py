"""``dbdiag run``: run the workloads against the targets while the sources collect; write a bundle and report."""

from __future__ import annotations

import argparse

from diag.core.argtypes import key_values as _kv
from diag.core.errors import DiagError, RunIncomplete
from diag.core.procs import interrupt_reason
from diag.run import Run, RunOptions, default_targets
from diag.core.targets import parse_target
from workloads.driver import DriverOptions


def main(a: argparse.Namespace, argv: list[str]) -> int:
    """Exit code 0 done; a lost server's code when a target was lost (the rest ran); 130 interrupted."""
    for t in a.targets:
        parse_target(t)  # bad DSNs fail before anything starts

    drv = DriverOptions(clients=a.clients, duration_s=a.duration, warmup_s=max(0.0, a.warmup),
                        protocol=a.protocol, isolation=a.isolation, rate=a.rate, max_tries=a.max_tries,
                        report_interval_s=a.report_interval, scale=a.scale, fresh=a.fresh, script=a.script,
                        think=a.think, tpcc_mode=a.tpcc_mode, on_error=a.on_error, repeat=a.repeat, workers=a.workers,
                        statement_timeout_s=a.statement_timeout, connect_per_txn=a.connect_per_transaction)
    opts = RunOptions(targets=a.targets or default_targets(), workloads=[w.strip() for w in a.workload.split(",")
                                                                          if w.strip()],
                      driver=drv, out=a.out, name=a.name, argv=["dbdiag", *argv], collect=not a.no_collect,
                      profile=not a.no_profile, keep_literals=a.keep_literals, profile_seconds=a.profile_seconds,
                      profile_client=a.profile_client, plan_others=a.plan_others,
                      flush_capability=a.flush_capability, fsync_seconds=a.fsync_seconds,
                      server_settings=_kv(a.set),
                      host_metrics=_kv(a.host_metrics, "--host-metrics", "LABEL=URL"),
                      ssh=_kv(a.ssh, "--ssh", "LABEL=USER@HOST"))
    run = Run(opts)
    try:
        path = run.execute()
    except KeyboardInterrupt as e:
        print(f"dbdiag: interrupted ({interrupt_reason(e)}); partial bundle in {run.path}", file=run.out)
        return 130
    except RunIncomplete as e:  # the run went on and its report is rendered: say where, exit with its own code
        print(f"dbdiag: error: {e}; report: {(run.path / 'report.html').resolve()}", file=run.out)
        return e.exit_code
    except DiagError as e:
        print(f"dbdiag: error: {e} (what was collected is in {run.path})", file=run.out)
        return e.exit_code
    report = path / "report.html"
    print(f"dbdiag: report: {report.resolve() if report.exists() else '(not rendered)'}")
    return 0
