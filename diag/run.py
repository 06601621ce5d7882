"""Orchestration of one run (``dbdiag run``, and ``dbdiag durability`` with its own plan).

Order: parse targets -> open the bundle -> start throwaway servers for embedded
targets -> identify each target (version, driver, key settings, local PID and
data directory) -> the run-wide sources (fsync test, host, profiles: probed,
recorded, started) -> for each target: start its sources, run the workload
sweep, stop them -> stop the run-wide sources -> findings -> report. Which
sources run is a :class:`collectors.registry.SourcePlan`; every source goes
through :class:`collectors.lifecycle.Lifecycle`. Whatever happens (error,
Ctrl-C, a server gone), servers we started are stopped and removed and run.json
records how the run ended, so the bundle stays readable.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

from collectors.base import Collector, CollectorContext, ServerFacts
from collectors.hostinfo import data_directory, host_facts, server_binary, server_pid, storage_facts
from collectors.lifecycle import Batch, Lifecycle
from collectors.lockgate import LockGate
from collectors.node_exporter import remote_storage_facts
from collectors.registry import SourcePlan, sources_for
from collectors.runner import CollectorRunner
from diag import __version__
from diag.core import servers
from diag.core.bundle import BundleWriteError, BundleWriter, safe_name
from diag.core.db import Session, own_app_name
from diag.core.errors import DiagError, ServerLost, StatementStuck, StepsAborted, ToolUnavailable, UsageError
from diag.core.procs import Interrupted, Supervisor, hold_stop_signals, interrupt_reason, stop_count, stop_requested
from diag.core.redact import RedactingStream, redact_argv, redact_url, redact_userinfo, url_credentials
from diag.core.schema import ResultRow
from diag.serverloss import aborted_line, loss_facts, loss_line, stuck_line
from diag.core.targets import Target, parse_target
from reports.views.render import render_bundle
from workloads.clients.client import client_driver_text
from workloads.driver import (DriverOptions, StepInfo, run_interleaved, run_sweep, start_notes, sweep_bar,
                              validate)
from workloads.steps.repeats import add_result

WRITE_WORKLOADS = {"insert", "read-write", "tpcc", "custom"}
FSYNC_TEST_SECONDS = 0.3  # per method: 12 methods, about 4 s per device, enough for ~1,000 flushes each here
# Flush tracing (perf counting syscall tracepoints) slows every system call on the machine: on
# point-select at saturation it cost 7% TPS here (BENCHMARKS.md, collector overhead), and a read-only
# workload issues no commit flushes worth counting. So it runs only when a write workload does.
FLUSH_READ_ONLY = ("flush tracing runs only with a write workload (insert, read-write, tpcc, custom): its perf "
                   "counting costs read-only throughput and there are no commits")


@dataclass
class RunOptions:
    """Everything a run was asked to do (``dbdiag run`` parses it from the command line).

    ``sources``: the plan of sources; None derives ``dbdiag run``'s from the other
    options (:func:`run_plan`). ``progress``: "bar" (one progress bar for the
    whole run) or "steps" (one line per step, for short probes). ``kind`` goes
    into run.json (``"run"``, ``"durability"``).
    """

    targets: list[str]
    workloads: list[str]
    driver: DriverOptions
    out: Path | None = None
    name: str = ""
    argv: list[str] = field(default_factory=list)
    collect: bool = True
    profile: bool = True
    profile_seconds: float = 3.0
    profile_client: bool = False
    keep_literals: bool = False  # statement texts read from the server stored as sent (--keep-literals)
    flush_capability: float | None = None
    fsync_seconds: float = FSYNC_TEST_SECONDS  # per fsync test method, when F is measured (--fsync-seconds)
    server_settings: dict[str, str] = field(default_factory=dict)
    render: bool = True
    kind: str = "run"
    sources: SourcePlan | None = None
    progress: Literal["bar", "steps"] = "bar"
    host_metrics: dict[str, str] = field(default_factory=dict)  # label -> node_exporter URL (--host-metrics)
    ssh: dict[str, str] = field(default_factory=dict)  # label -> user@host: profiles there over ssh (--ssh)
    plan_others: bool = False  # plan other users' statements too (--plan-others; collectors.plansafety)


@dataclass
class TargetRuntime:
    """A target after start-up: where it is and what it is."""

    target: Target
    server: servers.ThrowawayServer | None = None
    info: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None
    data_dir: str | None = None

    def facts(self) -> ServerFacts:
        """What run-wide sources need to know about this target's server (``--ssh``: its host is profiled over
        ssh, so this machine's profiler leaves it alone even on loopback)."""
        return ServerFacts(self.target.label, self.target.is_local() and not self.info.get("ssh"), self.pid,
                           self.data_dir, self.info.get("server_binary"), self.target.dbms)


def run_plan(opts: RunOptions) -> SourcePlan:
    """The sources of ``dbdiag run``: everything asked for; flush tracing and the fsync test with writes only.

    F is measured only for runs with a write workload (a read-only run has no
    commit rate to judge) and only when the user did not give --flush-capability.
    """
    if opts.sources is not None:
        return opts.sources
    writes = bool(set(opts.workloads) & WRITE_WORKLOADS)
    # Flush calls are counted in each step's tail, after its measured part (collectors.flush_tail); steps on
    # Dask workers have no tail, so there they are counted all along, as before.
    return SourcePlan(host=opts.collect, engine="all" if opts.collect else "none", flush=opts.collect and writes,
                      flush_window="run" if opts.driver.workers else "tail",
                      flush_off=FLUSH_READ_ONLY if opts.collect and not writes else "",
                      fsync_test_s=opts.fsync_seconds if writes and not opts.flush_capability else None,
                      profile=opts.profile, client_profile=opts.profile_client, profile_s=opts.profile_seconds)


def with_tail(driver: DriverOptions, run_wide: Batch) -> DriverOptions:
    """``driver`` with the tail the run's profile sources record in (``DriverOptions.tail_s``: the load runs on
    after each step's measured part, apart from its figures); unchanged when none runs."""
    tail = max((c.tail_s(driver.duration_s) for c in run_wide.in_process), default=0.0)
    return dataclasses.replace(driver, tail_s=tail) if tail > 0 else driver


def default_targets(note: TextIO = sys.stderr) -> list[str]:
    """embedded:postgres always; embedded:mysql when its binaries exist (else a one-line note)."""
    out = ["embedded:postgres"]
    try:
        servers.find_mysql_binaries()
        out.append("embedded:mysql")
    except ToolUnavailable as e:
        print(f"dbdiag: note: MySQL/MariaDB skipped: {e}", file=note)
    return out


def default_out(name: str) -> Path:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return Path("runs") / f"{stamp}-{safe_name(name or 'run')}"


def key_settings(s: Session) -> dict[str, str]:
    """The durability and sizing settings every result should be read with."""
    return s.key_settings()


def identify(rt: TargetRuntime, host_metrics: str | None = None) -> None:
    """Connect once: version, product, driver, key settings, local PID and data directory.

    ``host_metrics``: the node_exporter URL of the target's host; its storage facts then come from
    there (the host the server runs on), not from this machine's /proc."""
    with Session(rt.target, application_name=own_app_name("run")) as s:
        rt.pid = rt.server.pid if rt.server else server_pid(s)
        rt.data_dir = str(rt.server.data_dir) if rt.server else data_directory(s)
        rt.info = {
            **rt.target.to_dict(),
            "product": s.product,
            "version": s.version_text,
            "version_num": s.version_num,
            "driver": str(s.driver),
            "settings": key_settings(s),
            "local": rt.target.is_local(),
            "server_pid": rt.pid,
            "server_binary": server_binary(rt.pid),
            "data_directory": rt.data_dir,
            "storage": (remote_storage_facts(host_metrics, rt.data_dir) if host_metrics else
                        storage_facts(rt.data_dir) if rt.target.is_local() else {}),
            "throwaway": rt.server is not None,
            **({"host_metrics": redact_url(host_metrics)} if host_metrics else {}),
        }


class _Hooks:
    """Step callbacks from the workload driver: sources told, results written as they arrive."""

    def __init__(self, run: "Run") -> None:
        self.run = run

    def step_started(self, info: StepInfo) -> None:
        if self.run.opts.progress == "steps":
            self.run.say(f"dbdiag: probing {info.clients} client{'s' if info.clients > 1 else ''} "
                         f"for {info.duration_s:g} s ...")
        self.run.sources.step_started(info)

    def step_finished(self, info: StepInfo, row: ResultRow) -> ResultRow:
        row = self.run.sources.step_finished(info, row)
        add_result(self.run.results, self.run.repeat_rows, row)  # a repeat rebuilds its step's row
        self.run.bundle.write_results(self.run.results)
        return row


def _runner(bundle: BundleWriter, collectors: list[Collector]) -> CollectorRunner:
    # Looked up at call time so a benchmark can substitute this module's CollectorRunner.
    return CollectorRunner(bundle, collectors)


class Run:
    """One run from start to end; see the module docstring for the order."""

    def __init__(self, opts: RunOptions, out: TextIO = sys.stderr) -> None:
        self.opts = opts
        self.targets = [parse_target(t) for t in opts.targets]
        # Every password the run knows: its targets' and its node_exporter URLs'; kept out of every line and file.
        self.secrets = tuple(s for s in [*(t.password for t in self.targets),
                                         *(url_credentials(u)[2] for u in opts.host_metrics.values())] if s)
        self.out: TextIO = RedactingStream(out, self.secrets)  # type: ignore[assignment]
        labels = [t.label for t in self.targets]
        dup = {x for x in labels if labels.count(x) > 1}
        if dup:
            raise DiagError(f"two targets share the label {sorted(dup)[0]!r}: name them with LABEL=DSN")
        for option, given in (("--host-metrics", opts.host_metrics), ("--ssh", opts.ssh)):
            unknown = sorted(set(given) - set(labels))
            if unknown:
                raise UsageError(f"{option} {unknown[0]}=...: no target is labelled {unknown[0]!r} "
                                 f"(targets: {', '.join(labels)})")
        # A mistyped address is the user's to fix before anything starts; an unreachable one is a note later.
        for label, url in sorted(opts.host_metrics.items()):
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise UsageError(f"--host-metrics {label}={redact_url(url)}: node_exporter's address is "
                                 "http://HOST:PORT/metrics")
        for label, spec in sorted(opts.ssh.items()):  # ssh would read "-o..." as an option, "@" as its usage
            user, _, host = spec.rpartition("@")
            if spec.startswith("-") or not host or ("@" in spec and not user) or any(c.isspace() for c in spec):
                raise UsageError(f"--ssh {label}={redact_userinfo(spec)}: expected USER@HOST or a Host of your "
                                 "ssh config")
            if ":" in user:  # ssh takes no password there; refused here so it is written nowhere
                raise UsageError(f"--ssh {label}={redact_userinfo(spec)}: ssh takes no password in USER@HOST "
                                 "(dbdiag logs in with a key: BatchMode)")
        self._validate()
        name = opts.name or "-".join(opts.workloads)
        self.path = Path(opts.out) if opts.out else default_out(name)
        self.bundle = BundleWriter(self.path, self.secrets)
        self.plan = run_plan(opts)
        self.results: list[ResultRow] = []
        self.repeat_rows: dict[tuple[str, str, int | None], list[ResultRow]] = {}  # --repeat: each step's repeats so far
        self.runtimes: list[TargetRuntime] = []
        self.run_json: dict[str, Any] = {}
        self.sources = Lifecycle(self.bundle, lambda u: self._write_run_json(**u), self.say, runner=_runner)
        self.supervisor: Supervisor | None = None  # started with the first throwaway server; see _supervise
        self.lost: list[str] = []  # one line per target whose server went away (the run went on without it)
        self.aborted: list[str] = []  # one line per step that --on-error abort ended at its first error
        self.stuck: list[str] = []  # one line per step a statement that did not return ended
        self.stops_handled = 0  # stop signals the run took as its normal end (diag.core.procs.stop_count)

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _validate(self) -> None:
        """The workload options, checked before anything starts (a watch has none: diag.watch)."""
        validate(self.opts.workloads, self.opts.driver)

    def _say_target(self, rt: TargetRuntime) -> None:
        """The start-up line of one identified target: what it is and what our clients run on."""
        via = client_driver_text(rt.target.dbms, self.opts.driver.protocol, self.opts.workloads,
                                 paced=bool(self.opts.driver.rate or self.opts.driver.think))
        self.say(f"dbdiag: {rt.target.label}: {rt.info['product']} {rt.info['version'].split(' on ')[0]} "
                 f"via {via}")

    def _write_run_json(self, **updates: Any) -> None:
        self.run_json.update(updates)
        self.bundle.write_json("run.json", self.run_json)

    def execute(self) -> Path:
        """Run everything; returns the bundle path. Raises DiagError / KeyboardInterrupt after cleanup."""
        o = self.opts
        self.bundle.write_results([])
        self.bundle.write_json("findings.json", {"findings": []})
        self._write_run_json(
            tool="dbdiag", version=__version__, kind=o.kind, command=redact_argv(o.argv, self.secrets),
            status="running",
            started=time.time(), host=host_facts(), workloads=o.workloads, name=o.name,
            options={"clients": list(o.driver.clients), "duration_s": o.driver.duration_s,
                     "warmup_s": o.driver.warmup_s, "protocol": o.driver.protocol,
                     "isolation": o.driver.isolation, "rate": o.driver.rate, "scale": o.driver.scale,
                     "on_error": o.driver.on_error, "repeat": o.driver.repeat, "think": o.driver.think,
                     "tpcc_mode": o.driver.tpcc_mode, "flush_capability": o.flush_capability,
                     "keep_literals": o.keep_literals, "plan_others": o.plan_others, "profile": self.plan.profile,
                     **self.plan.to_dict()},
            targets=[t.to_dict() for t in self.targets], collectors={}, metrics={})
        status, error = "complete", ""
        for line in start_notes(o.workloads, o.driver):
            self.say(f"dbdiag: note: {line}")
        try:
            self._start_targets()
            self._sweep_all()
            if self.lost:
                status, error = "server_lost", "; ".join(self.lost)
            elif self.stuck:
                status, error = "stuck", "; ".join(self.stuck)
            elif self.aborted:
                status, error = "aborted", "; ".join(self.aborted)
        except KeyboardInterrupt as e:
            status, error = "interrupted", f"interrupted by {interrupt_reason(e)}"
            raise
        except BundleWriteError as e:  # full or failing disk under --out: stop, say where the data is
            status, error = "failed", str(e)
            raise BundleWriteError(f"{e}: the run stopped and its report was not rendered; once there is space, "
                                   f"`dbdiag report {self.path}` renders what was collected", e.errno) from None
        except DiagError as e:
            status, error = "failed", str(e)
            raise
        finally:
            with hold_stop_signals():  # every wait below is bounded; a signal now is noted, not raised
                for rt in self.runtimes:
                    if rt.server is not None:
                        with contextlib.suppress(Exception):
                            rt.server.stop()
                if self.supervisor is not None:
                    self.supervisor.close()
                late = self._late_stop(status)
                if late:  # the work was done, the clean-up was asked to stop: said so, and exit as interrupted
                    status, error = "interrupted", f"interrupted by {late} during the clean-up"
                self._close(status, error)
                if not late and (late := self._late_stop(status)):  # came while the report was rendered
                    with contextlib.suppress(BundleWriteError):
                        self._write_run_json(status="interrupted", error=f"interrupted by {late} during the clean-up")
        if late:
            raise Interrupted(late)
        if self.lost:
            raise ServerLost("; ".join(self.lost))
        if self.stuck:
            raise StatementStuck("; ".join(self.stuck))
        if self.aborted:
            raise StepsAborted("; ".join(self.aborted))
        return self.path

    def _late_stop(self, status: str) -> str | None:
        """The stop signal that came after the work (during the clean-up), if one did; a stop the run handled
        as its normal end (a watch's Ctrl-C) is not one."""
        return stop_requested() if status != "interrupted" and stop_count() > self.stops_handled else None

    def _close(self, status: str, error: str) -> None:
        """How the run ended into run.json and events, then the report.

        On a failing disk these writes may fail too; the bundle reads as partial without
        them, so only a run that had not already failed raises. No report is rendered
        after a write failure (it would fail on the same disk): ``dbdiag report`` later.
        """
        try:
            self._write_run_json(status=status, error=error, ended=time.time())
            self.bundle.event("run_ended", status + (f": {error}" if error else ""))
        except BundleWriteError:
            if status == "complete":
                raise
            return
        if self.bundle.failure is None:
            self._finish()

    def _supervise(self) -> Supervisor | None:
        """The run's cleanup supervisor (stops throwaway servers and removes their directories should this
        process be killed); None, with a note, where it cannot start: the run goes on unguarded."""
        if self.supervisor is None:
            try:
                self.supervisor = Supervisor.start()
            except OSError as e:
                self.say(f"dbdiag: note: no cleanup supervisor ({e}): if this run is killed, its throwaway "
                         "servers stay")
        return self.supervisor

    def _start_targets(self) -> None:
        for t in self.targets:
            rt = TargetRuntime(t)
            self.runtimes.append(rt)
            if t.embedded:
                self.say(f"dbdiag: starting a throwaway {t.engine} server for {t.label} ...")
                rt.server = servers.start_server(t.engine, self.opts.server_settings, supervisor=self._supervise())
                rt.target = rt.server.target(t)
            identify(rt, self.opts.host_metrics.get(t.label))
            if t.label in self.opts.ssh:
                rt.info["ssh"] = self.opts.ssh[t.label]
            self._say_target(rt)
        self._write_run_json(targets=[rt.info for rt in self.runtimes])

    def _run_context(self) -> CollectorContext:
        """The context of run-wide sources: every target's server, the shared PID lists."""
        lc = self.sources
        return CollectorContext(
            target=self.runtimes[0].target, artifacts=self.bundle.path / "artifacts", client_pids=lc.client_pids,
            options={"collector_pids": lc.collector_pids, "client_roots": lc.client_roots, "progress": self.out,
                     "server_pids": {rt.target.label: rt.pid for rt in self.runtimes
                                     if rt.pid and rt.target.is_local()}},
            servers=tuple(rt.facts() for rt in self.runtimes), bundle=self.bundle,
            keep_literals=self.opts.keep_literals)

    def _target_context(self, rt: TargetRuntime) -> CollectorContext:
        return CollectorContext(target=rt.target, artifacts=self.bundle.path / "artifacts", server_pid=rt.pid,
                                data_dir=rt.data_dir, client_pids=self.sources.client_pids,
                                servers=(rt.facts(),), bundle=self.bundle, keep_literals=self.opts.keep_literals,
                                lock_gate=LockGate(),
                                options={"progress": self.out, "plan_others": self.opts.plan_others,
                                         # the given values (a node_exporter URL's credentials log it in)
                                         **{k: given[rt.target.label] for k, given in
                                            (("host_metrics", self.opts.host_metrics), ("ssh", self.opts.ssh))
                                            if given.get(rt.target.label)}})

    def _sweep_all(self) -> None:
        """The one loop over the registry: run-wide sources around everything, each target's around its sweep."""
        progress = self.out if self.opts.progress == "bar" else None
        # One progress bar over every target's sweep, so the ETA covers the whole run.
        bar = sweep_bar(progress, len(self.runtimes), self.opts.workloads, self.opts.driver)
        strict = self.plan.strict
        run_wide: Batch | None = None
        try:
            run_wide = self.sources.start(sources_for("run", self.plan, self._run_context()), strict)
            driver = with_tail(self.opts.driver, run_wide)
            sequential = self.runtimes if driver.repeat == 1 else []
            if not sequential:
                self._sweep_interleaved(progress, bar, strict, driver)
            for rt in sequential:
                batch = self.sources.start(sources_for("target", self.plan, self._target_context(rt)), strict)
                try:
                    rows = run_sweep(rt.target, self.opts.workloads, driver, self.bundle,
                                     hooks=_Hooks(self), progress=progress, bar=bar)
                    self._note_lost(rt, rows)
                    self._note_cuts(rt, rows)
                finally:
                    with hold_stop_signals():
                        self.sources.stop(batch)
        finally:
            with hold_stop_signals():
                bar.close()
                if run_wide is not None:
                    self.sources.stop(run_wide)

    def _sweep_interleaved(self, progress: TextIO | None, bar: Any, strict: bool, driver: DriverOptions) -> None:
        """``--repeat N`` > 1: every target's sources run through one sweep that interleaves the targets
        (A1 B1 A2 B2 ... for each step), so a drift of the machine hits each target alike."""
        batches: list[Batch] = []
        try:
            for rt in self.runtimes:
                batches.append(self.sources.start(sources_for("target", self.plan, self._target_context(rt)), strict))
            rows = run_interleaved([rt.target for rt in self.runtimes], self.opts.workloads, driver,
                                   self.bundle, hooks=_Hooks(self), progress=progress, bar=bar)
            for rt in self.runtimes:
                got = rows.get(rt.target.label, [])
                self._note_lost(rt, got)
                self._note_cuts(rt, got)
        finally:
            with hold_stop_signals():
                for b in reversed(batches):
                    self.sources.stop(b)

    def _note_cuts(self, rt: TargetRuntime, rows: list[ResultRow]) -> None:
        """Steps that --on-error abort or a stuck statement ended: one line each, for run.json and the exit."""
        self.aborted += [aborted_line(rt.target.label, r) for r in rows if r.aborted]
        self.stuck += [stuck_line(rt.target.label, r) for r in rows if r.stuck]

    def _note_lost(self, rt: TargetRuntime, rows: list[ResultRow]) -> None:
        """If the sweep lost its server: how the server ended and its last log lines into run.json's target
        and an event (read now: the directory goes when the server is stopped), one line on the console."""
        row = next((r for r in rows if r.server_lost), None)
        if row is None or row.server_lost is None:
            return
        facts = loss_facts(rt.server, rt.pid if rt.target.is_local() else None)
        rt.info["lost"] = {**facts, "step": f"{row.workload} c={row.clients}",
                           **{k: v for k, v in row.server_lost.items() if k in ("t", "after_s")}}
        line = loss_line(rt.target.label, row, facts)
        self.lost.append(line)
        self._write_run_json(targets=[x.info for x in self.runtimes])
        self.bundle.event("server_lost", line, target=rt.target.label, workload=row.workload,
                          clients=row.clients, **facts)
        self.say(f"dbdiag: {line}" + (f"; its log ends: {facts['log_tail'][-1]}" if facts.get("log_tail") else ""))

    def _finish(self) -> None:
        """Findings and report from the bundle alone (never from live state)."""
        if not self.opts.render:
            return
        try:
            render_bundle(self.path)
        except DiagError as e:
            self.say(f"dbdiag: could not render the report: {e}")
        except Exception as e:  # a report bug (or templates changed on disk under a long run) must not cost the run
            self.say(f"dbdiag: could not render the report ({type(e).__name__}: {e}); the bundle is complete: "
                     f"`dbdiag report {self.path}` renders it")
