"""Orchestration of one ``dbdiag run``: servers, probes, collectors, workloads, bundle, report.

Order: parse targets -> open the bundle -> start throwaway servers for embedded
targets -> identify each target (version, driver, key settings, local PID and
data directory) -> probe collectors -> for each target: start its collectors,
run the workload sweep, stop them -> findings -> report. Whatever happens
(error, Ctrl-C, a server gone), servers we started are stopped and removed and
run.json records how the run ended, so the bundle stays readable.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import multiprocessing as mp
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from collectors.base import Collector, CollectorContext, Probe
from collectors.host import HostCollector
from collectors.runner import CollectorRunner, collector_key, probe_all
from diag import __version__, servers
from diag.bundle import BundleWriter, safe_name
from diag.db import Session
from diag.errors import DiagError, ToolUnavailable
from diag.hostinfo import data_directory, host_facts, server_binary, server_pid, storage_facts
from diag.targets import Target, parse_target, redact_argv

WRITE_WORKLOADS = {"insert", "read-write", "tpcc", "custom"}
FSYNC_TEST_SECONDS = 0.3  # per method: 12 methods, about 4 s per device, enough for ~1,000 flushes each here


class SharedPids:
    """Client PIDs of the current step, shared with collector processes (fork)."""

    def __init__(self, size: int = 1024) -> None:
        self._arr = mp.get_context("fork").Array("i", size + 1)

    def set(self, pids: list[int] | tuple[int, ...]) -> None:
        pids = list(pids)[: len(self._arr) - 1]
        with self._arr.get_lock():
            for i, p in enumerate(pids):
                self._arr[i + 1] = p
            self._arr[0] = len(pids)

    def __call__(self) -> list[int]:
        with self._arr.get_lock():
            n = self._arr[0]
            return [self._arr[i + 1] for i in range(n)]


@dataclass
class RunOptions:
    """Everything ``dbdiag run`` was asked to do (parsed from the command line)."""

    targets: list[str]
    workloads: list[str]
    driver: Any  # workloads.driver.DriverOptions
    out: Path | None = None
    name: str = ""
    argv: list[str] = field(default_factory=list)
    collect: bool = True
    profile: bool = True
    profile_seconds: float = 3.0
    profile_client: bool = False
    flush_capability: float | None = None
    server_settings: dict[str, str] = field(default_factory=dict)
    render: bool = True


@dataclass
class TargetRuntime:
    """A target after start-up: where it is and what it is."""

    target: Target
    server: servers.ThrowawayServer | None = None
    info: dict[str, Any] = field(default_factory=dict)
    pid: int | None = None
    data_dir: str | None = None


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


def identify(rt: TargetRuntime) -> None:
    """Connect once: version, product, driver, key settings, local PID and data directory."""
    with Session(rt.target) as s:
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
            "storage": storage_facts(rt.data_dir) if rt.target.is_local() else {},
            "throwaway": rt.server is not None,
        }


def target_collectors(rt: TargetRuntime, artifacts: Path, opts: RunOptions) -> list[Collector]:
    """The per-target collectors that apply to this target's engine (explicit registries)."""
    classes: tuple[type[Collector], ...] = ()
    if rt.target.engine == "postgres":
        with contextlib.suppress(ImportError):
            from collectors.pg import PG_COLLECTORS
            classes = PG_COLLECTORS
    else:
        with contextlib.suppress(ImportError):
            from collectors.mysql import MYSQL_COLLECTORS
            classes = MYSQL_COLLECTORS
    ctx = CollectorContext(target=rt.target, artifacts=artifacts, server_pid=rt.pid, data_dir=rt.data_dir,
                           options={"flush_capability": opts.flush_capability})
    cols = [cls(ctx) for cls in classes]
    # Flush tracing (perf counting syscall tracepoints) slows every system call on the machine: on
    # point-select at saturation it cost 7% TPS here (BENCHMARKS.md, collector overhead), and a read-only
    # workload issues no commit flushes worth counting. So it runs only when a write workload does.
    if set(opts.workloads) & WRITE_WORKLOADS:
        with contextlib.suppress(ImportError):
            from collectors.flush import FlushCollector

            cols.append(FlushCollector(ctx))
    return cols


class _Hooks:
    """Step callbacks from the workload driver: results written as they arrive."""

    def __init__(self, run: "Run", rt: TargetRuntime) -> None:
        self.run = run
        self.rt = rt

    def step_started(self, info: Any) -> None:
        self.run.client_pids.set(list(info.client_pids))
        for hook in self.run.step_plugins:
            hook.step_started(info, self.rt)

    def step_finished(self, info: Any, result: dict[str, Any]) -> None:
        for hook in self.run.step_plugins:
            with contextlib.suppress(DiagError):
                extra = hook.step_finished(info, result, self.rt)
                if extra:
                    result.update(extra)
        self.run.results.append(result)
        self.run.bundle.write_json("results.json", {"results": self.run.results})
        self.run.client_pids.set([])


class Run:
    """One run from start to end; see the module docstring for the order."""

    def __init__(self, opts: RunOptions, out: TextIO = sys.stderr) -> None:
        self.opts = opts
        self.out = out
        self.targets = [parse_target(t) for t in opts.targets]
        labels = [t.label for t in self.targets]
        dup = {x for x in labels if labels.count(x) > 1}
        if dup:
            raise DiagError(f"two targets share the label {sorted(dup)[0]!r}: name them with LABEL=DSN")
        from workloads.driver import validate

        validate(opts.workloads, opts.driver)
        name = opts.name or "-".join(opts.workloads)
        self.path = Path(opts.out) if opts.out else default_out(name)
        secrets = tuple(t.password for t in self.targets if t.password)
        self.bundle = BundleWriter(self.path, secrets)
        self.results: list[dict[str, Any]] = []
        self.client_pids = SharedPids()
        self.collector_pids = SharedPids(256)
        self.runtimes: list[TargetRuntime] = []
        self.step_plugins: list[Any] = []
        self.run_json: dict[str, Any] = {}

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _write_run_json(self, **updates: Any) -> None:
        self.run_json.update(updates)
        self.bundle.write_json("run.json", self.run_json)

    def execute(self) -> Path:
        """Run everything; returns the bundle path. Raises DiagError / KeyboardInterrupt after cleanup."""
        o = self.opts
        self.bundle.write_json("results.json", {"results": []})
        self.bundle.write_json("findings.json", {"findings": []})
        self._write_run_json(
            tool="dbdiag", version=__version__, command=redact_argv(o.argv), status="running",
            started=time.time(), host=host_facts(), workloads=o.workloads,
            options={"clients": list(o.driver.clients), "duration_s": o.driver.duration_s,
                     "warmup_s": o.driver.warmup_s, "protocol": o.driver.protocol,
                     "isolation": o.driver.isolation, "rate": o.driver.rate, "scale": o.driver.scale,
                     "flush_capability": o.flush_capability, "profile": o.profile},
            targets=[t.to_dict() for t in self.targets], collectors={})
        status, error = "complete", ""
        try:
            self._start_targets()
            self._measure_flush_capability()
            self._setup_plugins()
            self._sweep_all()
        except KeyboardInterrupt:
            status, error = "interrupted", "interrupted by Ctrl-C"
            raise
        except DiagError as e:
            status, error = "failed", str(e)
            raise
        finally:
            for rt in self.runtimes:
                if rt.server is not None:
                    with contextlib.suppress(Exception):
                        rt.server.stop()
            self._write_run_json(status=status, error=error, ended=time.time())
            self.bundle.event("run_ended", status + (f": {error}" if error else ""))
            self._finish()
        return self.path

    def _start_targets(self) -> None:
        for t in self.targets:
            rt = TargetRuntime(t)
            self.runtimes.append(rt)
            if t.embedded:
                self.say(f"dbdiag: starting a throwaway {t.engine} server for {t.label} ...")
                rt.server = servers.start_server(t.engine, self.opts.server_settings)
                rt.target = rt.server.target(t)
            identify(rt)
            self.say(f"dbdiag: {rt.target.label}: {rt.info['product']} {rt.info['version'].split(' on ')[0]} "
                     f"via {rt.info['driver']}")
        self._write_run_json(targets=[rt.info for rt in self.runtimes])

    def _measure_flush_capability(self) -> None:
        """One fsync test per device under local data directories, for durability verdicts.

        Only for runs with a write workload (a read-only run has no commit rate to
        judge) and only when the user did not give --flush-capability.
        """
        if self.opts.flush_capability or not (set(self.opts.workloads) & WRITE_WORKLOADS):
            return
        from diag.flushcmds import measure_flush_capability

        dirs = [(rt.target.label, rt.data_dir) for rt in self.runtimes if rt.target.is_local()]
        if dirs:
            self._write_run_json(flush_capability=measure_flush_capability(dirs, FSYNC_TEST_SECONDS, self.out))

    def _setup_plugins(self) -> None:
        """Step plugins (profiles, flush tracing) added by later modules when available."""
        with contextlib.suppress(ImportError):
            from diag.plugins import make_step_plugins

            self.step_plugins = make_step_plugins(self)

    def _sweep_all(self) -> None:
        from workloads.driver import run_sweep, sweep_bar

        # One progress bar over every target's sweep, so the ETA covers the whole run.
        bar = sweep_bar(self.out, len(self.runtimes), self.opts.workloads, self.opts.driver)

        host: CollectorRunner | None = None
        if self.opts.collect:
            hc = HostCollector(CollectorContext(
                target=self.runtimes[0].target, artifacts=self.bundle.path / "artifacts",
                client_pids=self.client_pids,
                options={"collector_pids": self.collector_pids, "server_pids": {rt.target.label: rt.pid for rt in self.runtimes
                                         if rt.pid and rt.target.is_local()}}))
            probes = probe_all([hc])
            self._record_probes(probes)
            if probes["host"].ok:
                host = CollectorRunner(self.bundle, [hc])
                host.start()
                self.collector_pids.set(host.pids())
        try:
            for rt in self.runtimes:
                runner = None
                if self.opts.collect:
                    cols = target_collectors(rt, self.bundle.path / "artifacts", self.opts)
                    probes = probe_all(cols)
                    if not set(self.opts.workloads) & WRITE_WORKLOADS:
                        self._record_probes({f"flush--{rt.target.label}": Probe(
                            False, "flush tracing runs only with a write workload (insert, read-write, tpcc, "
                            "custom): its perf counting costs read-only throughput and there are no commits")})
                    self._record_probes(probes)
                    for k, p in probes.items():
                        if not p.ok:
                            self.say(f"dbdiag: note: {k} not collected: {p.reason}" + (f" ({p.hint})" if p.hint
                                                                                      else ""))
                        for m in p.missing:
                            self.say(f"dbdiag: note: {k}: {m}")
                    runner = CollectorRunner(self.bundle, [c for c in cols if probes[collector_key(c)].ok])
                    runner.start()
                    self.collector_pids.set((host.pids() if host else []) + runner.pids())
                    self._wait_for_flush_counting(runner, rt)
                try:
                    run_sweep(rt.target, self.opts.workloads, self.opts.driver, self.bundle,
                              hooks=_Hooks(self, rt), progress=self.out, bar=bar)
                finally:
                    if runner:
                        runner.stop()
                        self.collector_pids.set(host.pids() if host else [])
        finally:
            bar.close()
            if host:
                host.stop()

    def _wait_for_flush_counting(self, runner: CollectorRunner, rt: TargetRuntime) -> None:
        """perf needs a moment to attach: clients connecting before that would not be counted."""
        from diag.flushcmds import wait_for_series

        key = f"flush--{rt.target.label}"
        r = next((r for r in runner.running if r.key == key), None)
        if r is not None:
            wait_for_series(self.bundle.path / "series" / f"{safe_name(key)}.jsonl", r.process)

    def _record_probes(self, probes: dict[str, Any]) -> None:
        cols = dict(self.run_json.get("collectors", {}))
        cols.update({k: v.to_dict() for k, v in probes.items()})
        self._write_run_json(collectors=cols)

    def _finish(self) -> None:
        """Findings and report from the bundle alone (never from live state)."""
        if not self.opts.render:
            return
        try:
            from reports.render import render_bundle

            render_bundle(self.path)
        except DiagError as e:
            self.say(f"dbdiag: could not render the report: {e}")
