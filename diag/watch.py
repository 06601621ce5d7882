"""``dbdiag watch``: diagnose the load that is already there (or that a command of the user's sends).

A watch is a run (:class:`diag.run.Run`) whose steps are windows nobody drives:
the same bundle, sources, step hooks, findings and report; every target's sources
run at once (the load is on all of them together), and each window of
``--window`` seconds is one step per target, its result row made from the server's
own counters (:mod:`workloads.watch.watch_counters`, :mod:`workloads.watch.watchresult`).
With a load command (``-- CMD ARGS``) the watch starts it once the sources are
up, its process tree is the clients (host evidence measures their CPU), its output
is kept in ``artifacts/load-command.log`` and its progress lines become the
``load_command`` series; the watch ends when it exits (or at ``-T``).

Ctrl-C, SIGTERM and SIGHUP end a watch cleanly: the window that was open is cut
where it stood, the load command is ended, the bundle is complete and the report
rendered (exit 0, the way the watch ended is in run.json ``watch.ended_by``).
A second stop request during that cleanup interrupts it like a run's.
"""

from __future__ import annotations

import contextlib
import math
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any, TextIO

from collectors.host import process_tree
from collectors.lifecycle import Batch
from collectors.peers import Peers, connected_clients, own_tree, server_addresses
from collectors.registry import SourcePlan, sources_for
from diag.core.bundle import BundleWriteError
from diag.core.db import Session, own_app_name
from diag.core.errors import DbError, DiagError
from diag.core.schema import ResultRow
from diag.core.procs import interrupt_reason, stop_count
from diag.run import Run, RunOptions, TargetRuntime
from reports.model.watch_view import MIN_TPS
from workloads.watch.loadcmd import LoadCommand
from workloads.steps.options import DriverOptions, StepPlan
from workloads.steps.window import StepWindow
from workloads.watch.progress_lines import ProgressPoint, Summary, merge_summaries, parse_line
from workloads.watch.watch_counters import (CounterReader, Reading, own_reads_per_s, own_reads_per_window,
                                      window_counts)
from workloads.watch.watchresult import client_side, window_name, window_row, with_statement_rates

LOOK_S = 0.5  # how often the watch looks at sessions inside a window
MIN_WINDOW_S = 0.5
OWN_CARRY_S = 10.0  # PostgreSQL flushes a session's deferred counters within its 10 s idle interval  # a window lasts at least this long, however late the previous one closed
OUTPUT = "load-command.log"


@dataclass
class WatchPlan:
    """What to watch for how long: ``window_s`` per step, ``duration_s`` (None: until the command ends or a
    stop request), ``command`` (argv; empty: watch only)."""

    window_s: float = 10.0
    duration_s: float | None = None
    command: list[str] = field(default_factory=list)


@dataclass
class _Watched:
    """One target during the watch: its counter reader, the last reading, the sessions seen this window."""

    rt: TargetRuntime
    reader: CounterReader
    last: Reading
    own_per_s: float
    own_per_window: float
    reads0: int = 0  # the reader's reads when the window opened
    own_due: float = 0.0  # dbdiag's reads issued but not yet seen in the server's count (carried over)
    baseline: int | None = None  # sessions connected before the load command started (MySQL/MariaDB)
    sessions: list[int] = field(default_factory=list)
    hidden: int = 0
    peers: Peers | None = None  # the local processes connected to it this window (no load command)
    own_pids: tuple[int, ...] = ()  # the server backends of dbdiag's own sessions (PostgreSQL)


class Watch(Run):
    """A run whose steps are windows of the server's own counters; see the module docstring."""

    def __init__(self, opts: RunOptions, plan: WatchPlan, out: TextIO = sys.stderr) -> None:
        self.plan_w = plan
        super().__init__(opts, out)
        self.command: LoadCommand | None = None
        self.points: list[tuple[float, ProgressPoint]] = []
        self.summaries: list[Summary] = []
        self.ended_by = ""
        self.exit_status: int | None = None

    def _validate(self) -> None:
        if self.plan_w.window_s <= 0:
            raise DiagError("--window must be more than 0 seconds")
        if self.plan_w.duration_s is not None and self.plan_w.duration_s <= 0:
            raise DiagError("-T/--duration must be more than 0 seconds")

    def _say_target(self, rt: TargetRuntime) -> None:
        self.say(f"dbdiag: {rt.target.label}: {rt.info['product']} {rt.info['version'].split(' on ')[0]}: "
                 "watching (no load sent by dbdiag)")

    def _sweep_all(self) -> None:
        """Sources up (run-wide, then every target's), the command started, windows until the end."""
        strict = self.plan.strict
        batches: list[Batch] = []
        watched: list[_Watched] = []
        try:
            batches.append(self.sources.start(sources_for("run", self.plan, self._run_context()), strict))
            for rt in self.runtimes:
                batches.append(self.sources.start(sources_for("target", self.plan, self._target_context(rt)),
                                                  strict))
            watched = [self._open(rt) for rt in self.runtimes]
            if self.plan_w.command:
                for w in watched:
                    w.baseline = w.last.connected
                self.command = LoadCommand(self.plan_w.command, self.bundle.artifact(OUTPUT))
                self.bundle.event("load_command_started", " ".join(self.plan_w.command), pid=self.command.pid)
                self.say(f"dbdiag: running the load command (pid {self.command.pid}); its output: "
                         f"{self.bundle.path / 'artifacts' / OUTPUT}")
            self._windows(watched)
        finally:
            self._end_command()
            self._client_figures()
            for w in watched:
                w.reader.s.close()
            for b in reversed(batches):
                self.sources.stop(b)
            self._write_watch()

    def _open(self, rt: TargetRuntime) -> _Watched:
        s = Session(rt.target, application_name=own_app_name("watch"))
        reader = CounterReader(s)
        keys = [k for k, p in self.sources.probes.items() if p.get("ok") and k.endswith(f"--{rt.target.label}")]
        return _Watched(rt, reader, reader.read(), own_reads_per_s(keys), own_reads_per_window(keys))

    def _windows(self, watched: list[_Watched]) -> None:
        """Window after window until the time is up, the command ended, or a stop request (Ctrl-C, SIGTERM)."""
        start = time.time()
        end = start + self.plan_w.duration_s if self.plan_w.duration_s else math.inf
        index = 0
        while not self.ended_by:
            index += 1
            t0 = time.time()
            roots = (self.command.pid,) if self.command else ()
            windows: dict[str, StepWindow] = {}
            try:
                pids = self._peers(watched)
                windows = {w.rt.target.label: self._window(w.rt.target.label, index) for w in watched}
                for win in windows.values():
                    win.start(self.plan_w.window_s, t0, pids, roots)
            except KeyboardInterrupt as e:  # the window is opened for every source or for none worth closing
                self._stopped(e)
                if not windows:  # stopped before the window opened: the last one closed is the watch's end
                    break
            # A window ends a --window after the last one did: a slow close (a profile's report) shortens the
            # next window instead of stretching it.
            opened = min((w.last.t for w in watched), default=t0)
            try:
                self._wait(watched, min(max(opened + self.plan_w.window_s, t0 + MIN_WINDOW_S), end))
            except KeyboardInterrupt as e:
                self._stopped(e)
            if not self.ended_by and time.time() >= end - 0.05:
                self.ended_by = "watch duration reached"
            try:
                self._close_window(watched, windows, index)
            except KeyboardInterrupt as e:  # a stop request while closing: this window's row may be missing
                self.ended_by = self.ended_by or f"stopped by {interrupt_reason(e)} while closing window {index}"
                self.stops_handled = stop_count()
                self.bundle.event("window_cut", f"window {index} not closed: {self.ended_by}")
        self.bundle.event("watch_ended", self.ended_by)

    def _window(self, label: str, index: int) -> StepWindow:
        """Window ``index`` on target ``label``: a step's lifecycle (workloads.steps.window), as a run's steps and
        its Dask steps have, filled by a load dbdiag does not drive; its plan is its length (nothing is driven:
        the clients are counted when it closes), and it has no intervals and no histogram."""
        plan = StepPlan(label, window_name(index), 1, DriverOptions(duration_s=self.plan_w.window_s, warmup_s=0.0))
        return StepWindow(plan, self.bundle, None, self.sources, title=f"{label}: {plan.workload}")

    def _stopped(self, e: BaseException) -> None:
        """A stop request (Ctrl-C, SIGTERM, SIGHUP) ends the watch: the run's normal end, not an interruption."""
        self.ended_by = f"stopped by {interrupt_reason(e)}"
        self.stops_handled = stop_count()

    def _peers(self, watched: list[_Watched]) -> tuple[int, ...]:
        """The server's sessions once a window (dbdiag's own backends: the watch's cost on the server) and,
        without a load command, the clients: the local processes connected to a watched server (a client that
        connects mid-window counts from the next); one list for the host's process sampler, so with several
        targets each one's clients are every target's."""
        mine = own_tree() if self.command is None else set()
        found: set[int] = set()
        for w in watched:
            t = w.rt.target
            ports = None
            with contextlib.suppress(DiagError):  # a server too old for the statement, or gone: no filter
                ports = w.reader.client_ports()
                w.own_due += 1 if ports is not None else 0  # a read in the watched database, before the window
            w.own_pids = ports.own_pids if ports is not None else ()
            if self.command is not None:
                continue
            server = {p.pid for p in process_tree(w.rt.pid)} if w.rt.pid and t.is_local() else set()
            w.peers = connected_clients(server_addresses(t.host), t.port or t.dbms.default_port, mine | server,
                                        (ports.here, ports.elsewhere) if ports is not None else None)
            found.update(w.peers.pids)
        return tuple(sorted(found))

    def _wait(self, watched: list[_Watched], until: float) -> None:
        for w in watched:
            w.sessions, w.hidden, w.reads0 = [], 0, w.reader.reads
        while True:
            now = time.time()
            if now >= until:
                return
            if self.command is not None:  # wakes at once when the command exits
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.command.proc.wait(min(LOOK_S, until - now))
            else:
                time.sleep(min(LOOK_S, until - now))
            for w in watched:
                self._look(w)
            self._read_output()
            if self.command is not None and self.command.poll() is not None:
                self.exit_status = self.command.poll()
                self.ended_by = f"load command exited with status {self.exit_status}"
                return

    def _look(self, w: _Watched) -> None:
        """One look at a target's sessions (the reading itself is kept only at the window's edges)."""
        with contextlib.suppress(DbError):
            r = w.reader.look()
            w.sessions.append(r.clients(w.baseline))
            w.hidden = max(w.hidden, r.hidden)

    def _close_window(self, watched: list[_Watched], windows: dict[str, StepWindow], index: int) -> None:
        for w in watched:
            label = w.rt.target.label
            try:
                cur = w.reader.read()
            except DbError as e:
                self.say(f"dbdiag: {label}: could not read the server's counters: {e}")
                self.ended_by = self.ended_by or f"{label}: counters unreadable"
                continue
            secs = max(cur.t - w.last.t, 1e-9)
            # dbdiag's reads not yet counted by the server carry over: PostgreSQL 15+ flushes a busy session's
            # counters late, in lumps (capped at OWN_CARRY_S of reads, so a long idle spell cannot eat a load)
            own = w.own_due + w.own_per_s * secs + w.own_per_window + (w.reader.reads - w.reads0)
            counts = window_counts(w.rt.target.dbms.name, w.last, cur, own)
            w.own_due = min(own - counts.own_transactions, OWN_CARRY_S * (w.own_per_s + 2 / LOOK_S))
            row = window_row(label, str(w.rt.info.get("product") or ""), index, w.last.t, cur.t, counts,
                             w.sessions or [cur.clients(w.baseline)], w.hidden)
            w.last = cur
            self._read_output()
            cs = client_side(self.points, float(row.t_start or 0), float(row.t_end or 0))
            seen: dict[str, Any] = {"client": cs} if cs is not None else {}
            if w.peers is not None:
                seen["local_clients"] = w.peers.to_dict()
            if w.own_pids:
                seen["own_backends"] = list(w.own_pids)
            rec = ResultRow.from_dict({**row.to_dict(), **seen}, f"{label} {row.workload}")  # the window's record
            rec = with_statement_rates(windows[label].finish(rec, f"{rec.tps or 0:g} tps (server counters)",
                                                             histogram=False))
            self.results.append(rec)
            self.bundle.write_results(self.results)
            self.say(f"  {label} {rec.workload}: {rec.tps or 0:.1f} tps (server), {rec.clients} session"
                     f"{'s' if rec.clients != 1 else ''}" + (f"; client says {cs['tps']:.1f} tps" if cs else ""))

    def _read_output(self) -> None:
        if self.command is None:
            return
        self._parse(self.command.new_lines())

    def _parse(self, lines: list[tuple[float, str]]) -> None:
        if not lines or self.command is None:
            return
        recs = []
        for arrived, text in lines:
            got = parse_line(text)
            if isinstance(got, ProgressPoint):
                t = self.command.started + got.t_rel if got.t_rel is not None else arrived
                self.points.append((t, got))
                recs.append({"t": round(t, 3), **got.to_record()})
            elif isinstance(got, Summary):
                self.summaries.append(got)
        if recs:
            out = self.bundle.series("load_command")
            try:
                for r in recs:
                    out.write(r)
            finally:
                out.close()

    def _end_command(self) -> None:
        """The load command ended (or ended by us), its last lines read."""
        if self.command is None:
            return
        with contextlib.suppress(Exception):
            rc = self.command.stop()
            self.exit_status = rc if self.exit_status is None else self.exit_status
            self._parse(self.command.rest())
            self.bundle.event("load_command_ended", f"exit status {self.exit_status}", status=self.exit_status)

    def _client_figures(self) -> None:
        """Each window's client-side figures again, from every line the command printed (a line may arrive
        after the window it belongs to closed)."""
        if self.command is None or not self.results:
            return
        # The command's figures belong to the targets it loaded: with several targets, one it left idle gets none.
        secs: dict[str, float] = {}
        txn: dict[str, float] = {}
        for row in self.results:
            secs[row.target] = secs.get(row.target, 0.0) + float(row.measured_s or 0)
            txn[row.target] = txn.get(row.target, 0.0) + float(row.transactions or 0)
        loaded = {t for t in secs if len(secs) == 1 or txn[t] >= MIN_TPS * secs[t]}
        for i, row in enumerate(self.results):
            cs = (client_side(self.points, float(row.t_start or 0), float(row.t_end or 0)) if row.target in loaded
                  else None)
            extra = {k: v for k, v in row.extra.items() if k != "client"}
            self.results[i] = replace(row, extra={**extra, "client": cs} if cs is not None else extra)
        with contextlib.suppress(BundleWriteError):
            self.bundle.write_results(self.results)

    def _write_watch(self) -> None:
        """run.json ``watch``: the plan, how it ended, the command and what it said of itself."""
        info: dict[str, Any] = {"window_s": self.plan_w.window_s, "duration_s": self.plan_w.duration_s,
                                "ended_by": self.ended_by}
        if self.command is not None:
            info["command"] = {"argv": self.plan_w.command, "pid": self.command.pid,
                               "started": self.command.started, "ended": self.command.ended,
                               "exit_status": self.exit_status, "output": f"artifacts/{OUTPUT}",
                               "summary": merge_summaries(self.summaries)}
        with contextlib.suppress(BundleWriteError):
            self._write_run_json(watch=info)


# Flush tracing counts every flush call of the server with perf's syscall tracepoints, which slows every
# system call on the machine: 7% of a saturated point-select's throughput here, ~10% of MariaDB read-write
# (BENCHMARKS.md). A watch must not change the load it diagnoses, so it is off unless asked for; the engine's
# own flush counters (pg_stat_wal, Innodb_*_fsyncs) and the device's (/proc/diskstats, the flush source's
# device part: collectors.flush.DeviceFlushCollector) still run.
FLUSH_OFF = ("flush calls: not counted in a watch (perf's counting slows every system call of the watched "
             "load): --flush-trace counts them; the engine's and the device's flush counters still run")


def watch_plan_sources(collect: bool, profile: bool, profile_s: float, flush_trace: bool = False) -> SourcePlan:
    """The sources of a watch: every one a run has, flush tracing only when asked (:data:`FLUSH_OFF`), the
    fsync test left out (it would load the disk the watched server uses; --flush-capability gives F)."""
    return SourcePlan(host=collect, engine="all" if collect else "none", flush=collect,
                      flush_window="run" if flush_trace else "devices", flush_note="" if flush_trace else FLUSH_OFF,
                      profile=profile, profile_s=profile_s)
