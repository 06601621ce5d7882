"""One (workload, client count) step filled by local client processes: start them, gather, sum up.

The step's lifecycle (its start and end events, the hooks, the series, the row's samples, its histogram and
the finished row) is :class:`~workloads.steps.window.StepWindow`'s, which a step on Dask workers shares
(:mod:`workloads.remote.dask_steps`); this module fills that window. The pieces:
:class:`~workloads.steps.pool.ClientPool` (the processes and their pipes),
:class:`~workloads.steps.merge.IntervalMerger` (per-interval figures of all clients),
:mod:`workloads.steps.stepresult` (series record, console lines, result row). This
module only wires them to the clock, the window and the progress bar.

Ctrl-C: the clients ignore SIGINT; the step sets their stop flag, collects what
they measured (``STOP_GRACE_S`` at most), writes the cut step's row (kept on
``Step.row``) and re-raises ``KeyboardInterrupt``.

A lost server (:mod:`workloads.steps.stepend`): when a client could not reconnect and
the server takes no new connection, the step stops every client and its row says
``complete: false``, ``server_lost`` (when, in which client, why) and covers the
seconds up to the loss only. ``--on-error abort`` ends the step the same way at
the first error (``aborted``).

A stuck statement (:mod:`workloads.steps.stuck`): a client still in a statement
``AFTER_END_S`` after the end (or silent longer than ``--statement-timeout``
during the step) is named with the server's view of its session (``stuck`` in
the row: what it waits for, its state and statement), its session is ended on the
server, every client is stopped and the late ones terminated; the row is
``complete: false``.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import replace
from typing import Any

from diag.core.bundle import BundleWriter
from diag.core.db import DriverInfo
from diag.core.procs import hold_stop_signals, interrupt_reason
from diag.core.schema import ResultRow
from diag.core.targets import Target
from workloads import hist
from workloads.base import Workload
from workloads.clients.client import driver_label
from workloads.steps.loop import LOST_KINDS, ClientSpec
from workloads.steps.merge import IntervalMerger, Merged, Totals
from workloads.steps import mux
from workloads.steps.messages import Aborted, Done, Fatal, FromClient, Go, IntervalCounts, Lost, Reconnected
from workloads.steps.options import StepHooks, StepInfo, StepPlan
from workloads.steps.pool import ClientPool
from workloads.steps.progress import SweepBar
from workloads.steps.room import LIMIT_KIND, TooManyClients, ensure_fds, refused_line
from workloads.steps.stepend import StepCut, server_gone
from workloads.steps.stuck import AFTER_END_S, look
from workloads.steps.stepresult import (Startup, StepKey, WallClock, busiest_client_pct, interval_line, result_row,
                                  saturation_message, series_record, summary_line)
from workloads.steps.steptail import TailSum, tail_line
from workloads.steps.steptail import measured_cpu as _measured_cpu
from workloads.steps.window import SeriesSink, StepWindow

READY_TIMEOUT_S = 60.0
READY_S_PER_CLIENT = 0.2  # and this long per client: forks and connects came at 20-37/s at 200 clients here
STUCK_STOP_S = 2.0      # after a stuck statement ends the step: the other clients' time to report
STOP_GRACE_S = 2.0      # on Ctrl-C
WAKE_NS = 250_000_000   # the parent looks at the clock at least this often (intervals, the bar)
RECONNECT_EVENTS = 20   # per step: a flapping connection is counted in full, but told only this often


class Step:
    """One step of a sweep; :meth:`run` returns its result row."""

    def __init__(self, target: Target, product: str, drv: DriverInfo, wl: Workload, plan: StepPlan,
                 bundle: BundleWriter, series: SeriesSink, hooks: StepHooks | None,
                 bar: SweepBar, seed: int, first_index: int = 0, step_clients: int = 0) -> None:
        """``plan``: the step as the driver planned it (its clients, -T, options, repeat). ``first_index``,
        ``step_clients``: a Dask worker's share runs the step's clients ``first_index`` ..
        ``first_index + plan.clients - 1`` of ``step_clients`` (see :class:`workloads.steps.loop.ClientSpec`)."""
        n, opts, repeat = plan.clients, plan.options, plan.repeat
        self.plan = plan
        self.target, self.drv, self.wl, self.n, self.opts = target, drv, wl, n, opts
        self.bundle, self.bar = bundle, bar
        self.window = StepWindow(plan, bundle, series, hooks, bar)  # the step's lifecycle; this fills it
        self.key = StepKey(target.label, product, wl.name, n, repeat)
        self.spec = ClientSpec(target, product, drv, wl, n, float(opts.scale), opts.protocol, opts.isolation,
                               opts.max_tries, opts.rate, opts.think, seed, opts.on_error, first_index, step_clients,
                               opts.connect_per_txn)
        self.totals = Totals()
        self.tail = Totals()  # the run-on after the measured part (opts.tail_s), where profiles record
        self._tail = TailSum()
        self._measured_cpu_s = 0.0  # the clients' CPU in the measured intervals
        self._measured_k = 0
        self._measured_end_ns = 0
        self.pids: list[int] = []
        self.c_loops: list[bool] = []       # per ready client: it runs a C loop
        self.loops: list[str] = []          # per ready client: the name of its C loop ("": the Python loop)
        self.connect_s: list[float] = []    # per ready client: seconds to connect and prepare
        self.startup: Startup | None = None  # the clients' start-up, before the step's window
        self.ncpu = os.cpu_count() or 1
        self._merger: IntervalMerger | None = None
        self._clock = WallClock(0)
        self._stopped_ns = 0
        self.lost: StepCut | None = None      # the server went away during the step
        self.aborted: StepCut | None = None   # --on-error abort: the error that ended it
        self.stuck: StepCut | None = None     # a statement that did not return: the first stuck client
        self.stuck_view: dict[str, Any] = {}  # the server's view of its session (workloads.steps.stuck.SessionView)
        self.sessions: dict[int, int] = {}    # client index -> the server's id of its connection
        self._heard: dict[int, int] = {}      # client index -> perf_counter_ns of its last message
        self._to_end: list[int] = []          # sessions of stuck clients, ended on the server after the step
        self._pool: ClientPool | None = None
        self._stopping = False                # Ctrl-C: clients' ends are not news about the server
        self._reconnect_events = 0
        # Set (to a histogram to encode with) when each series record must carry its interval's HDR histogram
        # as ``hdr``: a Dask worker's share streams them so the orchestrator merges interval k exactly.
        self.interval_hist: hist.HdrHistogram | None = None

    @property
    def info(self) -> StepInfo | None:
        """The step as its hooks see it; None until the measured part begins."""
        return self.window.info

    @property
    def row(self) -> ResultRow | None:
        """The step's result row, once written (a step cut by Ctrl-C has one when its measured part began)."""
        return self.window.row

    def run(self) -> ResultRow:
        try:
            return self._run()
        finally:
            if any(self._to_end):  # a commit waiting for a standby that never answers keeps its backend forever
                with hold_stop_signals():
                    look(self.target, self._to_end, end=True)

    def _run(self) -> ResultRow:
        ensure_fds(self.n)
        t_fork = time.perf_counter_ns()
        groups = mux.processes(self.spec, self.n)
        with ClientPool(self.spec, self.n, groups=groups, group_main=mux.group_main) as pool:
            self._pool = pool
            try:
                refused: list[str] = []  # the server's refusals at its connection limit: one line, not one per client
                for idx, msg in pool.wait_ready(READY_TIMEOUT_S + READY_S_PER_CLIENT * self.n):
                    if isinstance(msg, Fatal) and msg.kind == LIMIT_KIND:
                        refused.append(msg.message)
                    elif isinstance(msg, Fatal):
                        self._handle(idx, msg)  # a client that cannot connect may be the first news of a lost server
                    else:
                        self.sessions[idx] = msg.session
                        if msg.pid not in self.pids:  # clients sharing a process (workloads.mux): once
                            self.pids.append(msg.pid)
                        self.c_loops.append(bool(msg.c_loop))
                        self.loops.append(msg.loop if msg.c_loop else "")
                        self.connect_s.append(msg.connect_s)
                self.startup = Startup.of(self.n, self.connect_s, t_fork, time.perf_counter_ns())
                if refused:
                    pool.close()  # the clients that got in leave first: the room is read without them
                    self._refused(refused)
                self.bar.say(f"  {self.startup.line()}")
                self._measure(pool)
            except KeyboardInterrupt as ki:
                with hold_stop_signals():  # a second signal must not cut the row's writing
                    self._stopping = True
                    pool.stop()
                    self._drain(pool, time.monotonic() + STOP_GRACE_S)
                    # Still in a statement after the grace: their sessions are ended once they are gone.
                    self._to_end += [self.sessions.get(i, 0) for i in pool.live.values()]
                    self.window.event("step_interrupted", f"{self.window.name} cut short by {interrupt_reason(ki)}")
                    if self.info is not None:
                        self._finish(interrupted=True)
                raise
        assert self.row is not None
        return self.row

    # -- measuring ---------------------------------------------------------------

    def _measure(self, pool: ClientPool) -> None:
        now = time.perf_counter_ns()
        self._clock = WallClock(time.time_ns() - now)
        o = self.opts
        plan = Go.plan(now, o.warmup_s, self.plan.duration_s + max(o.tail_s, 0.0), o.report_interval_s)
        # The measured part: whole report intervals covering -T; the tail (profiles) runs on after it.
        self._measured_k = max(1, -(-int(self.plan.duration_s * 1e9) // plan.interval_ns))
        self._measured_end_ns = min(plan.measure_ns + self._measured_k * plan.interval_ns, plan.end_ns)
        self._merger = merger = IntervalMerger(plan, self.totals, self.tail if o.tail_s > 0 else None,
                                               self._measured_k)
        self._stopped_ns = plan.end_ns
        pool.start(plan)
        bound = int((o.statement_timeout_s or 0) * 1e9)  # 0: no bound during the step
        hard = plan.end_ns + int((o.statement_timeout_s or AFTER_END_S) * 1e9)
        drained = True
        while pool.live:
            now = time.perf_counter_ns()
            if self.info is None and now >= plan.measure_ns:
                self._started(plan)
            if now > hard and drained:  # a parent behind on reading is not a client stuck in a query
                if self.stuck is None:
                    self._stuck(pool, list(pool.live.values()), plan, now)
                for idx in pool.abandon():  # close() terminates them; the stuck line above said why
                    self.totals.client_error("stuck", "client still in a statement: terminated")
                    # Found stuck later than the first (a client whose statement started after the first's):
                    # their sessions are ended too, once the processes are gone.
                    if self.sessions.get(idx, 0) not in self._to_end:
                        self._to_end.append(self.sessions.get(idx, 0))
                break
            if bound and self.stuck is None and drained and now > plan.measure_ns + bound:
                silent = [i for i in pool.live.values()
                          if now - max(self._heard.get(i, 0), plan.measure_ns) > bound + plan.interval_ns]
                if silent:
                    self._stuck(pool, silent, plan, now)
                    hard = min(hard, time.perf_counter_ns() + int(STUCK_STOP_S * 1e9))
            wake = plan.measure_ns if self.info is None else now + WAKE_NS
            drained = self._receive(pool, max(min(wake - now, WAKE_NS), 0) / 1e9, now + WAKE_NS)
            self._write(merger.ready(time.perf_counter_ns(), pool.live.values(), drained))
            self.bar.tick()  # keeps the bar moving through the warmup, when no interval line is printed
        if self.info is None:
            self._started(plan)
        self._stopped_ns = min(plan.end_ns, max(time.perf_counter_ns(), plan.measure_ns))
        if self.lost is not None:  # nothing was measured after the loss: the clients were reconnecting
            self._stopped_ns = min(self._stopped_ns, max(self.lost.t_ns, plan.measure_ns))
        self._write(merger.rest(self._stopped_ns))
        self._finish(interrupted=False)

    def _hear(self, idx: int, msg: object) -> None:
        """Client ``idx`` sent ``msg``: it was last between transactions now, or, reporting from inside a
        statement (a process of many clients), when that statement started."""
        now = time.perf_counter_ns()
        busy = msg.in_statement_ns if isinstance(msg, IntervalCounts) else 0
        self._heard[idx] = max(self._heard.get(idx, 0), now - busy) if busy else now

    def _receive(self, pool: ClientPool, timeout_s: float, until_ns: int) -> bool:
        """Handle what the clients sent (waiting up to ``timeout_s`` for the first), then read on while more is
        waiting, until ``until_ns``; True when nothing was left unread (the pipes drained)."""
        got = pool.receive(timeout_s)
        while got:
            for idx, msg in got:
                self._hear(idx, msg)
                self._handle(idx, msg)
            if time.perf_counter_ns() >= until_ns or not pool.live:
                return not pool.live
            got = pool.receive(0)
        return True

    def _handle(self, idx: int, msg: FromClient) -> None:
        """One client message during the run (the merger's first: it is nearly every message)."""
        if isinstance(msg, IntervalCounts):
            assert self._merger is not None
            self._merger.add(idx, msg)
        elif isinstance(msg, Done):
            self.totals.client_done(idx, msg)
        elif isinstance(msg, Reconnected):
            self._reconnected(idx, msg)
        elif isinstance(msg, Lost):
            self.window.event("workload_client_lost", f"{self.target.label}: client {idx}: {msg.message}",
                              client=idx, code=msg.code)
            self.bar.say(f"  client {idx}: {msg.message}")
            self._suspect(idx, msg.code, msg.message, msg.t_ns)
            if self.opts.on_error == "abort":
                self._abort(idx, msg.code, msg.message, msg.t_ns)
        elif isinstance(msg, Aborted):
            if msg.kind in LOST_KINDS:
                self._suspect(idx, msg.code, msg.message, msg.t_ns)
            self._abort(idx, msg.code, msg.message, msg.t_ns)
        elif isinstance(msg, Fatal):
            self._client_error(idx, msg.code, msg.message)
            if msg.kind in LOST_KINDS:
                self._suspect(idx, msg.code, msg.message, time.perf_counter_ns())

    def _refused(self, messages: list[str]) -> None:
        """Some clients were refused at the server's connection limit: the step does not run with the others
        (its row would claim clients that never ran); one event and one line, the run stops."""
        line = refused_line(self.target, self.n, len(messages), messages[0])
        self.window.event("step_refused", line, with_repeat=True, refused=len(messages))
        raise TooManyClients(line)

    def _reconnected(self, idx: int, msg: Reconnected) -> None:
        self._reconnect_events += 1
        if self._reconnect_events > RECONNECT_EVENTS:
            return
        text = f"{self.target.label}: client {idx}: reconnected after {msg.waited_s:g} s ({msg.message})"
        self.window.event("workload_client_reconnected", text, client=idx, code=msg.code, waited_s=msg.waited_s)
        self.bar.say(f"  client {idx}: reconnected after {msg.waited_s:g} s ({msg.message})")

    def _suspect(self, idx: int, code: str, message: str, t_ns: int) -> None:
        """A client lost its connection for good: if the server takes no new connection either, it is
        gone and the step ends (every client told to stop)."""
        t_ns = t_ns or time.perf_counter_ns()
        if self.lost is not None:
            self.lost = self.lost.earlier(t_ns)
            return
        if self._stopping:
            return
        why = server_gone(self.target)
        if why is None:
            return
        self.lost = StepCut(idx, code, message, t_ns, why)
        self.bar.say(f"  {self.target.label}: the server is gone ({why}): ending the step")
        if self._pool is not None:
            self._pool.stop()

    def _stuck(self, pool: ClientPool, idxs: list[int], plan: Go, now: int) -> None:
        """Clients ``idxs`` are inside a statement past their bound: what the server says they wait for, one
        line and an event; every client is told to stop, and the stuck sessions are ended on the server once
        their processes are gone (a warning sent to a live client would be printed by its driver)."""
        views = look(self.target, [self.sessions.get(i, 0) for i in idxs])
        first = idxs[0]
        view = views.get(self.sessions.get(first, 0))
        for i in idxs:  # the one the server shows waiting names the step's cut
            v = views.get(self.sessions.get(i, 0))
            if v is not None and v.wait:
                first, view = i, v
                break
        after = (now - plan.end_ns) / 1e9
        when = (f"{after:.1f} s after the step's end" if after >= 0 else
                f"for more than {self.opts.statement_timeout_s:g} s")
        what = (view.text() if view is not None else
                "the server did not show its session (no session id, or the server did not answer)")
        others = f" (and {len(idxs) - 1} other client{'s' if len(idxs) > 2 else ''})" if len(idxs) > 1 else ""
        message = f"client {first}{others} still in a statement {when}: {what}"
        self.stuck = StepCut(first, "stuck", message, now)  # when it was found; the view says since when
        self.stuck_view = {"stuck_clients": sorted(idxs), **(view.to_row() if view is not None else {})}
        self._to_end = [self.sessions.get(i, 0) for i in idxs]  # once their processes are gone (ClientPool.close)
        self.window.event("step_stuck", f"{self.window.name}: {message}; the step was ended", **self.stuck_view)
        self.bar.say(f"  {self.target.label}: {message}: ending the step")
        pool.stop()

    def _abort(self, idx: int, code: str, message: str, t_ns: int) -> None:
        """``--on-error abort``: the first error ends the step."""
        if self.aborted is not None or self.lost is not None:
            return
        self.aborted = StepCut(idx, code, message, t_ns or time.perf_counter_ns())
        self.window.event("step_aborted", f"{self.window.name} ended by --on-error abort: client {idx}: {message}",
                          client=idx, code=code)
        self.bar.say(f"  client {idx}: {message}: --on-error abort ends the step")
        if self._pool is not None:
            self._pool.stop()

    def _drain(self, pool: ClientPool, deadline: float) -> None:
        """After Ctrl-C: what the live clients still send until ``deadline`` (monotonic s), then the rest.

        A client silent for two report intervals is inside a long statement (a stuck commit): it would answer
        only once that returns, so it is not waited for."""
        quiet_ns = int(2 * self.opts.report_interval_s * 1e9) + 500_000_000
        # A client not heard from yet (Ctrl-C inside the first interval) counts from now: it is asked to stop
        # and sends its counts at once unless it is inside a statement.
        since = time.perf_counter_ns()
        while pool.live and time.monotonic() < deadline:
            now = time.perf_counter_ns()
            if all(now - self._heard.get(i, since) > quiet_ns for i in pool.live.values()):
                break
            for idx, msg in pool.receive(min(max(deadline - time.monotonic(), 0), WAKE_NS / 1e9)):
                self._hear(idx, msg)
                self._handle(idx, msg)
        if self._merger is not None:
            self._stopped_ns = min(self._merger.plan.end_ns, time.perf_counter_ns())
            self._write(self._merger.rest(self._stopped_ns))

    def _started(self, plan: Go) -> None:
        tail_s = (plan.end_ns - self._measured_end_ns) / 1e9 if self.opts.tail_s > 0 else 0.0
        self.window.start((self._measured_end_ns - plan.measure_ns) / 1e9, self._clock.unix(plan.measure_ns),
                          self.pids, tail_s=tail_s)

    def _client_error(self, idx: int, code: str, message: str) -> None:
        self.totals.client_error(code, message)
        self.window.event("workload_client_error", f"{self.target.label}: client {idx}: {message}", client=idx,
                          code=code)
        self.bar.say(f"  client {idx}: {message}")

    def _write(self, merged: list[Merged]) -> None:
        """Each merged interval: a series record, and a console line when there is a console."""
        if not merged:
            return
        assert self._merger is not None
        measure_ns = self._merger.plan.measure_ns
        for m in merged:
            rec = series_record(self.key, m, self._clock, self.ncpu)
            if self.interval_hist is not None:
                rec["hdr"] = hist.encode_counts(m.latency_us or {}, self.interval_hist)
            tail = self._merger.in_tail(m.k)
            if tail:  # the run-on after the measured part, while profiles record: apart from the figures
                rec["tail"] = True
                self._tail.add(m)
            else:
                self._measured_cpu_s += m.cpu_s
            self.window.interval(rec, m.seconds, m.transactions, tail)
            if self.bar.out is not None:
                self.bar.say(interval_line(self.key, m, measure_ns, self.ncpu)
                             + ("  (observed tail: not in the step's figures)" if tail else ""))

    # -- result ------------------------------------------------------------------

    def _driver_label(self) -> str:
        """The driver and version; "+ native executor" when every client ran workloads.native.native (a mix names
        no loop: the Python loop ran too)."""
        label = driver_label(self.drv)
        loops = set(self.loops)
        return f"{label} + {self.loops[0]}" if len(loops) == 1 and self.loops[0] else label

    def _record(self, interrupted: bool, measure_ns: int, measured_end_ns: int, duration: float) -> ResultRow:
        """What the step measured, as its record (before the sources' parts): the figures
        (:func:`result_row`), the workload's own fields, the tail, what cut it short, the clients' start-up."""
        t = self.totals
        row = ResultRow.from_dict({**result_row(self.key, t, self.opts, self._driver_label(),
                                                self._clock.unix(measure_ns), self._clock.unix(measured_end_ns),
                                                duration, self.ncpu),
                                   **self.wl.result_extra(t.extra, t.transactions, duration)},
                                  f"the row of {self.target.label} {self.wl.name} c{self.n}")
        cuts = {key: cut.to_row(self._clock.unix(cut.t_ns), measure_ns)
                for key, cut in (("server_lost", self.lost), ("aborted", self.aborted), ("stuck", self.stuck))
                if cut is not None}
        if self.stuck is not None:
            cuts["stuck"] = {**cuts["stuck"], **self.stuck_view}
        short = self.startup is not None and self.startup.ready < self.n
        if self.startup is not None:
            up = self.startup.to_row()
            row = replace(row, startup_s=up["startup_s"], connects_per_s=up["connects_per_s"],
                          connect_ms=up["connect_ms"],
                          # clients that could not start: the row says how many ran, and is not the planned step
                          clients_ran=self.startup.ready if short else None)
        return replace(row, server_lost=cuts.get("server_lost"), aborted=cuts.get("aborted"), stuck=cuts.get("stuck"),
                       interrupted=interrupted,
                       profile_tail=self._tail.summary(self._clock, row.tps or 0.0) if self.opts.tail_s > 0 else None,
                       complete=not (interrupted or self.lost or self.aborted or self.stuck or short))

    def _finish(self, interrupted: bool) -> ResultRow:
        assert self._merger is not None
        measure_ns = self._merger.plan.measure_ns
        measured_end_ns = min(self._stopped_ns, self._measured_end_ns)
        duration = max((measured_end_ns - measure_ns) / 1e9, 1e-9)
        t = self.totals
        if self.opts.tail_s > 0:
            _measured_cpu(t, self._measured_cpu_s)
        row = self._record(interrupted, measure_ns, measured_end_ns, duration)
        if self._merger.moved:  # reports that came after their interval was written (a client silent > grace)
            self.window.event("intervals_late", f"{self.window.name}: {self._merger.moved} transactions reported "
                              "after their interval was written were counted in the next one", with_repeat=True,
                              transactions=self._merger.moved)
        with contextlib.suppress(OSError):
            self.window.histogram(hist.encode(t.latency))
        busiest = busiest_client_pct(t, duration)
        warning = saturation_message(self.key, busiest)
        if warning is not None:
            self.window.event("driver_saturated", warning, busiest_client_pct=round(busiest, 1))
            self.bar.say("  warning: " + warning)
        cut_words = "" if row.complete else f", cut short after {row.measured_s:g} s"
        tail = row.profile_tail
        return self.window.finish(row, f"{row.tps:.1f} tps{cut_words}",
                                  [summary_line(self.key, row, self.ncpu),
                                   *([tail_line(tail)] if tail is not None and tail.get("tps") is not None else [])])
