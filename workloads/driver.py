"""The multi-client driver: load data, then one step per (workload, client count).

Each client is a forked process with its own connection (no GIL between clients)
running :mod:`workloads.loop`. The parent only starts them on a common schedule
(``perf_counter_ns`` is CLOCK_MONOTONIC, shared by all processes), merges their
per-interval figures, writes one series record per interval to
``series/workload--<label>.jsonl`` as it goes, prints a sysbench-like line (and
keeps the sweep's progress bar, :mod:`workloads.progress`, below it), and builds
the step's result row. Ctrl-C: the clients ignore SIGINT; the parent sets
a shared stop flag, collects what they measured (2 s at most), reports the cut
step through the hooks and re-raises ``KeyboardInterrupt``.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import multiprocessing.connection
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol, TextIO

from diag.bundle import BundleWriter, safe_name
from diag.db import Session
from diag.errors import UsageError
from diag.targets import Target
from workloads import hist
from workloads.base import Workload
from workloads.client import ISOLATION_SQL, PROTOCOLS, driver_label, fastest_driver, open_client
from workloads.custom import Custom, parse_script
from workloads.insert import Insert
from workloads.keyloop import LABEL as KEYLOOP_LABEL
from workloads.load import ensure_schema, is_loaded, load
from workloads.loop import ClientSpec, client_main
from workloads.pgbench import ReadWrite
from workloads.progress import STEP_OVERHEAD_S, SweepBar
from workloads.sysbench import PointSelect, ReadOnly
from workloads.tpcc import Tpcc

_REGISTRY: tuple[type[Workload], ...] = (PointSelect, ReadOnly, ReadWrite, Insert, Tpcc, Custom)
WORKLOADS: tuple[str, ...] = tuple(w.name for w in _REGISTRY)
_FORK = mp.get_context("fork")
READY_TIMEOUT_S = 60.0
END_GRACE_S = 10.0      # a client stuck in a query past the end gets this long, then is terminated
STOP_GRACE_S = 2.0      # on Ctrl-C
SATURATED_PCT = 90.0    # a client process busier than this (% of one core) limits the load


@dataclass(frozen=True)
class DriverOptions:
    """Options of a sweep (see ``dbdiag run --help``); times in seconds, rate in transactions/s."""

    clients: tuple[int, ...] = (1,)
    duration_s: float = 10.0
    warmup_s: float = 2.0
    protocol: str = "prepared"          # "simple" | "prepared"
    isolation: str = "read-committed"   # "read-committed" | "repeatable-read" | "serializable"
    rate: float | None = None           # open-loop target TPS (total), coordinated-omission safe
    max_tries: int = 10
    report_interval_s: float = 1.0
    scale: int = 1
    fresh: bool = False
    script: str | None = None           # custom workload file
    think: bool = False


@dataclass(frozen=True)
class StepInfo:
    target: str
    workload: str
    clients: int
    duration_s: float
    t_start: float  # unix seconds, start of the measured part
    client_pids: tuple[int, ...]


class StepHooks(Protocol):
    def step_started(self, info: StepInfo) -> None: ...

    def step_finished(self, info: StepInfo, result: dict) -> None: ...


def validate(workloads: list[str], opts: DriverOptions) -> None:
    """Raise UsageError for anything wrong before a run starts."""
    if not workloads:
        raise UsageError(f"no workload given: choose from {', '.join(WORKLOADS)}")
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        raise UsageError(f"unknown workload {unknown[0]!r}: choose from {', '.join(WORKLOADS)}")
    if len(set(workloads)) != len(workloads):
        raise UsageError("a workload is named twice in --workload")
    if not opts.clients or any(not isinstance(c, int) or c < 1 for c in opts.clients):
        raise UsageError("--clients needs positive whole numbers, e.g. 1,2,4,8")
    if opts.duration_s <= 0:
        raise UsageError("--duration must be more than 0 seconds")
    if opts.warmup_s < 0:
        raise UsageError("--warmup cannot be negative")
    if opts.protocol not in PROTOCOLS:
        raise UsageError(f"unknown --protocol {opts.protocol!r}: use simple or prepared")
    if opts.isolation not in ISOLATION_SQL:
        raise UsageError(f"unknown --isolation {opts.isolation!r}: use {', '.join(ISOLATION_SQL)}")
    if opts.rate is not None and opts.rate <= 0:
        raise UsageError("--rate must be more than 0 transactions per second")
    if opts.max_tries < 1:
        raise UsageError("--max-tries must be at least 1")
    if opts.report_interval_s <= 0:
        raise UsageError("--report-interval must be more than 0 seconds")
    if not opts.scale or opts.scale <= 0:
        raise UsageError("--scale must be more than 0")
    if "custom" in workloads:
        if not opts.script:
            raise UsageError("--workload custom needs --script FILE")
        parse_script(opts.script)  # UsageError with file:line
    elif opts.script:
        raise UsageError("--script is only used by --workload custom")


def make_workload(name: str, opts: DriverOptions) -> Workload:
    for cls in _REGISTRY:
        if cls.name == name:
            return Custom(opts.script or "") if cls is Custom else cls()
    raise UsageError(f"unknown workload {name!r}: choose from {', '.join(WORKLOADS)}")


def step_seconds(opts: DriverOptions) -> float:
    """Planned seconds of one step (warmup, measure, client start-up), for progress and ETA."""
    return opts.warmup_s + opts.duration_s + STEP_OVERHEAD_S


def sweep_bar(out: TextIO | None, targets: int, workloads: list[str], opts: DriverOptions) -> SweepBar:
    """One bar for ``targets`` sweeps of these workloads and client counts (``dbdiag run``)."""
    return SweepBar(out, targets * len(workloads) * len(opts.clients), step_seconds(opts))


def run_sweep(target: Target, workloads: list[str], opts: DriverOptions, bundle: BundleWriter,
              hooks: StepHooks | None = None, progress: TextIO | None = sys.stderr,
              bar: SweepBar | None = None) -> list[dict]:
    """Load data as needed, then for each workload and each client count run one step; return result rows.

    Lines go to ``progress`` through ``bar``, the progress bar of the whole run
    when the caller sweeps several targets (it then closes it); without one the
    sweep draws its own, covering its steps only, and closes it.

    On Ctrl-C the rows measured so far (the cut step included) are on the raised
    ``KeyboardInterrupt`` as ``.results`` and were passed to ``hooks.step_finished``.
    """
    validate(workloads, opts)
    own_bar = bar is None
    if bar is None:
        bar = sweep_bar(progress, 1, workloads, opts)
    try:
        return _sweep(target, workloads, opts, bundle, hooks, progress, bar)
    finally:
        bar.hide()
        if own_bar:
            bar.close()


def _sweep(target: Target, workloads: list[str], opts: DriverOptions, bundle: BundleWriter,
           hooks: StepHooks | None, progress: TextIO | None, bar: SweepBar) -> list[dict]:
    wls = [make_workload(n, opts) for n in workloads]
    drv = fastest_driver(target.engine)
    with Session(target, statement_timeout_ms=0, application_name="dbdiag-load") as s:
        product = s.product
        ensure_schema(s)
        done: set[str] = set()
        for wl in wls:
            ds = wl.dataset(opts.scale)
            if ds is None or ds.name in done:
                continue
            done.add(ds.name)
            if not opts.fresh and is_loaded(s, ds):
                bar.say(f"{target.label}: reusing dataset {ds.name} (scale {ds.scale:g})")
                continue
            bar.say(f"{target.label}: loading dataset {ds.name} (scale {ds.scale:g})")
            bar.hide()  # the load draws its own bar on the same stream
            secs = load(s, ds, progress)
            bundle.event("workload_load", f"{target.label}: loaded {ds.name} scale {ds.scale:g} in {secs:.1f} s",
                         target=target.label, dataset=ds.name, scale=ds.scale, seconds=round(secs, 3))
    for wl in wls:
        if wl.needs_script:
            c = open_client(target, opts.protocol, opts.isolation, product, drv)
            try:
                wl.check(c)
            finally:
                c.close()
    rows: list[dict] = []
    series = bundle.series(f"workload--{target.label}")
    steps = [(wl, n) for wl in wls for n in opts.clients]
    try:
        for i, (wl, n) in enumerate(steps, 1):
            bar.begin_step(f"{target.label}: {wl.name}, {n} client{'s' if n > 1 else ''}, "
                           f"warmup {opts.warmup_s:g} s, measure {opts.duration_s:g} s")
            step = _Step(target, product, drv, wl, n, opts, bundle, series, hooks, bar, seed=i)
            try:
                rows.append(step.run())
                bar.end_step()
            except KeyboardInterrupt as ki:
                if step.row is not None:
                    rows.append(step.row)
                ki.results = rows  # type: ignore[attr-defined]
                raise
    finally:
        series.close()
    return rows


class _Interval:
    """One report interval being gathered; latency counts are summed as dicts and go into HDR
    histograms once, when the interval is written (cheaper than recording each client's part)."""

    __slots__ = ("txns", "queries", "errors", "retries", "counts", "cpu", "reported")

    def __init__(self) -> None:
        self.txns = self.queries = self.errors = self.retries = 0
        self.counts: Counter[int] = Counter()
        self.cpu = 0.0
        self.reported: set[int] = set()


class _Step:
    """One (workload, client count) step: start clients, gather, write, summarise."""

    def __init__(self, target: Target, product: str, drv: Any, wl: Workload, n: int, opts: DriverOptions,
                 bundle: BundleWriter, series: Any, hooks: StepHooks | None, bar: SweepBar,
                 seed: int) -> None:
        self.target, self.product, self.drv, self.wl, self.n, self.opts = target, product, drv, wl, n, opts
        self.bundle, self.series, self.hooks, self.bar = bundle, series, hooks, bar
        self.spec = ClientSpec(target, product, drv, wl, n, float(opts.scale), opts.protocol, opts.isolation,
                               opts.max_tries, opts.rate, opts.think, seed)
        self.row: dict | None = None
        self.c_loops: list[bool] = []  # per ready client: it runs the C query loop
        self.total = hist.new()
        self.txns = self.queries = self.retries = 0
        self.errors: Counter[str] = Counter()
        self.samples: dict[str, list[str]] = {}
        self.extra: Counter[str] = Counter()
        self.cpu_s = 0.0
        self.cpu_by_client: dict[int, float] = {}
        self.intervals: dict[int, _Interval] = {}
        self.next_emit = 0
        self.info: StepInfo | None = None
        self.ncpu = os.cpu_count() or 1

    # -- clock -------------------------------------------------------------------

    def unix(self, t_ns: int) -> float:
        return round((t_ns + self.offset_ns) / 1e9, 6)

    # -- run ---------------------------------------------------------------------

    def run(self) -> dict:
        stop = _FORK.RawValue("b", 0)
        procs: list[Any] = []
        pipes: dict[Any, int] = {}
        try:
            for i in range(self.n):
                mine, theirs = _FORK.Pipe(duplex=True)
                p = _FORK.Process(target=client_main, args=(i, self.spec, theirs, stop),
                                  name=f"dbdiag-client-{i}", daemon=True)
                p.start()
                theirs.close()
                procs.append(p)
                pipes[mine] = i
            try:
                ready = self._wait_ready(pipes)
                self._measure(ready, pipes, stop)
            except KeyboardInterrupt:
                stop.value = 1
                self._drain(pipes, time.monotonic() + STOP_GRACE_S)
                self.bundle.event("step_interrupted", f"{self.target.label}: {self.wl.name} with {self.n} clients "
                                  "cut short by Ctrl-C", target=self.target.label, workload=self.wl.name,
                                  clients=self.n)
                if self.info is not None:
                    self.row = self._finish(interrupted=True)
                raise
        finally:
            for p in procs:
                if p.is_alive():
                    p.terminate()
            for p in procs:
                p.join(timeout=5)
                if p.is_alive():
                    p.kill()
                    p.join(timeout=5)
            for c in pipes:
                c.close()
        assert self.row is not None
        return self.row

    def _wait_ready(self, pipes: dict[Any, int]) -> list[Any]:
        ready: list[Any] = []
        pending = set(pipes)
        deadline = time.monotonic() + READY_TIMEOUT_S
        self.pids: list[int] = []
        while pending and time.monotonic() < deadline:
            for c in mp.connection.wait(list(pending), timeout=max(deadline - time.monotonic(), 0)):
                pending.discard(c)
                try:
                    msg = c.recv()
                except EOFError:
                    self._client_error(pipes[c], "internal", "client process exited before it was ready")
                    continue
                if msg[0] == "ready":
                    ready.append(c)
                    self.pids.append(msg[1])
                    self.c_loops.append(bool(msg[2]))
                else:
                    self._client_error(pipes[c], msg[1], msg[2])
        for c in pending:
            self._client_error(pipes[c], "timeout", f"client not ready within {READY_TIMEOUT_S:.0f} s")
        return ready

    def _driver_label(self) -> str:
        """The driver and version; "+ C query loop" when every client ran workloads.keyloop."""
        label = driver_label(self.drv)
        return f"{label} + {KEYLOOP_LABEL}" if self.c_loops and all(self.c_loops) else label

    def _client_error(self, idx: int, code: str, message: str) -> None:
        self.errors[code] += 1
        s = self.samples.setdefault(code, [])
        if len(s) < 3 and message not in s:
            s.append(message)
        self.bundle.event("workload_client_error", f"{self.target.label}: client {idx}: {message}",
                          target=self.target.label, workload=self.wl.name, clients=self.n, client=idx, code=code)
        self.bar.say(f"  client {idx}: {message}")

    def _measure(self, ready: list[Any], pipes: dict[Any, int], stop: Any) -> None:
        o = self.opts
        now = time.perf_counter_ns()
        self.offset_ns = time.time_ns() - now
        self.start_ns = now + 50_000_000
        self.measure_ns = self.start_ns + int(o.warmup_s * 1e9)
        self.end_ns = self.measure_ns + int(o.duration_s * 1e9)
        self.interval_ns = max(int(o.report_interval_s * 1e9), 1_000_000)
        self.stopped_ns = self.end_ns
        for c in ready:
            c.send(("go", self.start_ns, self.measure_ns, self.end_ns, self.interval_ns))
        self.live = set(ready)
        self.done: set[Any] = set()
        self._pipes = pipes
        hard = self.end_ns + int(END_GRACE_S * 1e9)
        if not self.live:
            self.stopped_ns = self.measure_ns
        while self.live:
            now = time.perf_counter_ns()
            if self.info is None and now >= self.measure_ns:
                self._started()
            if now > hard:
                for c in list(self.live):
                    self._client_error(pipes[c], "timeout", "client still busy 10 s after the end: terminated")
                    self.live.discard(c)
                break
            wake = self.measure_ns if self.info is None else now + 250_000_000
            timeout = max(min(wake - now, 250_000_000), 0) / 1e9
            for c in mp.connection.wait(list(self.live), timeout=timeout):
                self._receive(c)
            self._emit_ready(time.perf_counter_ns())
            self.bar.tick()  # keeps the bar moving through the warmup, when no interval line is printed
        if self.info is None:
            self._started()
        end_seen = time.perf_counter_ns()
        self.stopped_ns = min(self.end_ns, max(end_seen, self.measure_ns))
        self._emit_all()
        self.row = self._finish(interrupted=False)

    def _started(self) -> None:
        self.info = StepInfo(self.target.label, self.wl.name, self.n, self.opts.duration_s,
                             self.unix(self.measure_ns), tuple(self.pids))
        self.bundle.event("step_started", f"{self.target.label}: {self.wl.name} with {self.n} clients",
                          target=self.target.label, workload=self.wl.name, clients=self.n,
                          t_start=self.info.t_start)
        if self.hooks is not None:
            self.hooks.step_started(self.info)

    def _receive(self, c: Any) -> None:
        try:
            msg = c.recv()
        except (EOFError, OSError):
            if c not in self.done:
                self._client_error(self._pipes[c], "internal", "client process ended without reporting")
            self.live.discard(c)
            return
        kind = msg[0]
        idx = self._pipes[c]
        if kind == "iv":
            _, k, txns, nq, errs, retries, counts, cpu, extra = msg
            self.txns += txns
            self.queries += nq
            self.retries += retries
            self.errors.update(errs)
            self.extra.update(extra)
            iv = self.intervals.setdefault(max(k, self.next_emit), _Interval())
            iv.txns += txns
            iv.queries += nq
            iv.retries += retries
            iv.errors += sum(errs.values())
            iv.cpu += cpu
            iv.counts.update(counts)
            iv.reported.add(idx)
            for kk in range(self.next_emit, k):  # a client that passed k has nothing more for earlier ones
                self.intervals.setdefault(kk, _Interval()).reported.add(idx)
        elif kind == "done":
            _, cpu, samples = msg
            self.cpu_s += cpu
            self.cpu_by_client[idx] = cpu
            for code, msgs in samples.items():
                s = self.samples.setdefault(code, [])
                for m in msgs:
                    if len(s) < 3 and m not in s:
                        s.append(m)
            self.done.add(c)
            self.live.discard(c)
        elif kind == "lost":
            self.bundle.event("workload_client_lost", f"{self.target.label}: client {idx}: {msg[2]}",
                              target=self.target.label, workload=self.wl.name, clients=self.n, client=idx,
                              code=msg[1])
            self.bar.say(f"  client {idx}: {msg[2]}")
        elif kind == "fatal":
            self._client_error(idx, msg[1], msg[2])
            self.live.discard(c)

    def _drain(self, pipes: dict[Any, int], deadline: float) -> None:
        live = getattr(self, "live", set())
        while live and time.monotonic() < deadline:
            for c in mp.connection.wait(list(live), timeout=max(deadline - time.monotonic(), 0)):
                self._receive(c)
        self.stopped_ns = min(getattr(self, "end_ns", 0), time.perf_counter_ns())
        if hasattr(self, "measure_ns"):
            self._emit_all()

    # -- intervals ---------------------------------------------------------------

    def _emit_ready(self, now: int) -> None:
        """Write every interval that all live clients have reported (or that is overdue)."""
        grace = max(self.interval_ns // 2, 500_000_000)
        while True:
            k = self.next_emit
            b_start = self.measure_ns + k * self.interval_ns
            if b_start >= self.end_ns:
                return
            b_end = min(b_start + self.interval_ns, self.end_ns)
            if now < b_end:
                return
            iv = self.intervals.get(k)
            live_idx = {self._pipes[c] for c in self.live}
            complete = iv is not None and live_idx <= iv.reported
            if not complete and now < b_end + grace:
                return
            self._emit(k, b_end)

    def _emit_all(self) -> None:
        """At the step's end: everything still pending, empty intervals included, up to the stop."""
        last = max(self.intervals, default=-1)
        k = self.next_emit
        while True:
            b_start = self.measure_ns + k * self.interval_ns
            if b_start >= self.end_ns or (b_start >= self.stopped_ns and k > last):
                return
            self._emit(k, min(b_start + self.interval_ns, self.end_ns, max(self.stopped_ns, b_start + 1)))
            k += 1

    def _emit(self, k: int, b_end: int) -> None:
        iv = self.intervals.pop(k, None) or _Interval()
        self.next_emit = k + 1
        b_start = self.measure_ns + k * self.interval_ns
        secs = max((b_end - b_start) / 1e9, 1e-9)
        h = hist.new()
        hist.record(h, iv.counts)
        hist.record(self.total, iv.counts)
        lat = hist.summary_ms(h, with_p999=False)
        cpu_pct = round(iv.cpu / (secs * self.ncpu) * 100, 1)
        self.series.write({
            "t": self.unix(b_end), "workload": self.wl.name, "clients": self.n, "interval_s": round(secs, 3),
            "transactions": iv.txns, "queries": iv.queries, "errors": iv.errors, "retries": iv.retries,
            "latency_ms": lat, "client_cpu_pct": cpu_pct,
        })
        if self.bar.out is not None:
            t_rel = (b_end - self.measure_ns) / 1e9
            self.bar.say(f"  [{t_rel:5.1f}s] {self.wl.name} c={self.n}: tps {iv.txns / secs:9.1f}  "
                         f"qps {iv.queries / secs:9.1f}  p95 {lat['p95']:8.3f} ms  "
                         f"err/s {iv.errors / secs:6.1f}  retries {iv.retries}  client cpu {cpu_pct:5.1f}%")

    # -- result ------------------------------------------------------------------

    def _finish(self, interrupted: bool) -> dict:
        duration = max((self.stopped_ns - self.measure_ns) / 1e9, 1e-9)
        lat = hist.summary_ms(self.total)
        row: dict[str, Any] = {
            "target": self.target.label, "engine": self.product, "workload": self.wl.name, "clients": self.n,
            "duration_s": round(duration, 3), "transactions": self.txns, "tps": round(self.txns / duration, 2),
            "qps": round(self.queries / duration, 2), "latency_ms": lat, "errors": dict(self.errors),
            "retries": self.retries, "driver": self._driver_label(), "protocol": self.opts.protocol,
            "isolation": self.opts.isolation,
            "client_cpu_pct": round(self.cpu_s / (duration * self.ncpu) * 100, 1),
            "t_start": self.unix(self.measure_ns), "t_end": self.unix(self.stopped_ns),
            "client_cpu_s": round(self.cpu_s, 3), "error_samples": self.samples, "scale": self.opts.scale,
        }
        row.update(self.wl.result_extra(self.extra, self.txns, duration))
        if interrupted:
            row["interrupted"] = True
        name = f"workload--{safe_name(self.target.label)}--{self.wl.name}--c{self.n}.hdr"
        with contextlib.suppress(OSError):
            self.bundle.artifact(name).write_text(hist.encode(self.total) + "\n", encoding="ascii")
        busiest = max(self.cpu_by_client.values(), default=0.0) / duration * 100
        if busiest >= SATURATED_PCT:
            msg = (f"{self.target.label}: {self.wl.name} c={self.n}: a client process was busy {busiest:.0f}% of a "
                   "core: the load generator, not the server, may be the limit")
            self.bundle.event("driver_saturated", msg, target=self.target.label, workload=self.wl.name,
                              clients=self.n, busiest_client_pct=round(busiest, 1))
            self.bar.say("  warning: " + msg)
        self.bundle.event("step_finished", f"{self.target.label}: {self.wl.name} with {self.n} clients: "
                          f"{row['tps']:.1f} tps", target=self.target.label, workload=self.wl.name, clients=self.n,
                          histogram=f"artifacts/{name}")
        self.bar.say(f"  => {self.wl.name} c={self.n}: {row['tps']:.1f} tps, {row['qps']:.1f} qps, "
                     f"p95 {lat['p95']:.3f} ms, p99 {lat['p99']:.3f} ms, errors {sum(self.errors.values())}, "
                     f"retries {self.retries}, client cpu {row['client_cpu_pct']}% of {self.ncpu} cpus")
        if self.hooks is not None and self.info is not None:
            self.hooks.step_finished(self.info, row)
        return row
