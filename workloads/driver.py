"""The multi-client driver: load data, then one step per (workload, client count).

Entry point of a sweep (:func:`run_sweep`, :func:`validate`, :class:`DriverOptions`).
Each step (:class:`workloads.steps.step.Step`) forks one process per client
(:mod:`workloads.steps.pool`; each runs :mod:`workloads.steps.loop` on its own connection, no
GIL between clients; from 32 clients on the native executor, about one process per CPU,
each keeping a transaction in flight on many connections, :mod:`workloads.steps.mux`), starts them on a common schedule (``perf_counter_ns`` is
CLOCK_MONOTONIC, shared by all processes), merges their per-interval figures
(:mod:`workloads.steps.merge`), writes one series record per interval to
``series/workload--<label>.jsonl`` as it goes, prints a sysbench-like line (and
keeps the sweep's progress bar, :mod:`workloads.steps.progress`, below it), and builds
the step's result row (:mod:`workloads.steps.stepresult`). Ctrl-C: the clients ignore
SIGINT; the parent sets a shared stop flag, collects what they measured (2 s at
most), reports the cut step through the hooks and re-raises ``KeyboardInterrupt``.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import TextIO

from diag.core.bundle import BundleWriter, SeriesWriter
from diag.core.db import DriverInfo, Session, own_app_name
from diag.core.errors import DiagError, StatementStuck, UsageError
from diag.core.schema import ResultRow
from diag.core.targets import Target
from workloads.base import Workload
from workloads.clients.client import ISOLATION_SQL, PROTOCOLS, fastest_driver, open_client
from workloads.remote import dask_steps
from workloads.custom import Custom, parse_script
from workloads.insert import Insert
from workloads.load import ensure_schema, is_loaded, load
from workloads.steps.options import ON_ERROR, DriverOptions, StepHooks, StepInfo, StepPlan
from workloads.pgbench import ReadWrite
from workloads.steps.progress import STEP_OVERHEAD_S, SweepBar
from workloads.steps.room import check_room
from workloads.steps.step import Step
from workloads.steps.stuck import LoadWatch, own_session_id
from workloads.sysbench import PointSelect, ReadOnly
from workloads.tpcc.tpcc import MODES, Tpcc, think_note

_REGISTRY: tuple[type[Workload], ...] = (PointSelect, ReadOnly, ReadWrite, Insert, Tpcc, Custom)
WORKLOADS: tuple[str, ...] = tuple(w.name for w in _REGISTRY)
__all__ = ["WORKLOADS", "DriverOptions", "Prepared", "StepHooks", "StepInfo", "StepPlan", "make_workload", "prepare",
           "run_interleaved", "run_sweep", "step_seconds", "sweep_bar", "validate"]


def validate(workloads: list[str], opts: DriverOptions) -> None:
    """Raise UsageError for anything wrong before a run starts."""
    if not workloads:
        raise UsageError(f"no workload given: choose from {', '.join(WORKLOADS)}")
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        raise UsageError(f"unknown workload {unknown[0]!r}: choose from {', '.join(WORKLOADS)}")
    if len(set(workloads)) != len(workloads):
        raise UsageError("a workload is named twice in --workload")
    if opts.tpcc_mode not in MODES:
        raise UsageError(f"--tpcc-mode must be one of {', '.join(MODES)}")
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
    if opts.on_error not in ON_ERROR:
        raise UsageError(f"unknown --on-error {opts.on_error!r}: use {' or '.join(ON_ERROR)}")
    if not isinstance(opts.repeat, int) or opts.repeat < 1:
        raise UsageError("--repeat needs a whole number of at least 1")
    if opts.report_interval_s <= 0:
        raise UsageError("--report-interval must be more than 0 seconds")
    if opts.connect_per_txn and opts.workers:
        raise UsageError("--connect-per-transaction runs local clients only: leave out --workers")
    if not opts.scale or opts.scale <= 0:
        raise UsageError("--scale must be more than 0")
    if "custom" in workloads:
        if not opts.script:
            raise UsageError("--workload custom needs --script FILE")
        parse_script(opts.script)  # UsageError with file:line
    elif opts.script:
        raise UsageError("--script is only used by --workload custom")


def start_notes(workloads: list[str], opts: DriverOptions) -> list[str]:
    """Lines to say before a valid run starts: options that will run but measure little (``--think`` with a
    step shorter than TPC-C's keying and think times)."""
    note = think_note(opts.duration_s, opts.clients) if opts.think and "tpcc" in workloads else None
    return [note] if note else []


def make_workload(name: str, opts: DriverOptions) -> Workload:
    for cls in _REGISTRY:
        if cls.name == name:
            if cls is Custom:
                return Custom(opts.script or "")
            return Tpcc(opts.tpcc_mode) if cls is Tpcc else cls()
    raise UsageError(f"unknown workload {name!r}: choose from {', '.join(WORKLOADS)}")


def step_seconds(opts: DriverOptions) -> float:
    """Planned seconds of one step (warmup, measure, client start-up), for progress and ETA."""
    return opts.warmup_s + opts.duration_s + STEP_OVERHEAD_S


def sweep_bar(out: TextIO | None, targets: int, workloads: list[str], opts: DriverOptions) -> SweepBar:
    """One bar for ``targets`` sweeps of these workloads and client counts, each step ``--repeat`` times."""
    return SweepBar(out, targets * len(workloads) * len(opts.clients) * opts.repeat, step_seconds(opts))


def run_sweep(target: Target, workloads: list[str], opts: DriverOptions, bundle: BundleWriter,
              hooks: StepHooks | None = None, progress: TextIO | None = sys.stderr,
              bar: SweepBar | None = None) -> list[ResultRow]:
    """Load data as needed, then for each workload and each client count run one step; return result rows.

    Lines go to ``progress`` through ``bar``, the progress bar of the whole run
    when the caller sweeps several targets (it then closes it); without one the
    sweep draws its own, covering its steps only, and closes it.

    On Ctrl-C the rows measured so far (the cut step included) are on the raised
    ``KeyboardInterrupt`` as ``.results`` and were passed to ``hooks.step_finished``.
    When the server is lost mid-step, that step's row says so (``server_lost``) and is
    the last: the remaining steps are skipped (one ``steps_skipped`` event).
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


@dataclass(frozen=True)
class Prepared:
    """A target ready for its steps: the workloads (data loaded, scripts checked), driver and product."""

    target: Target
    workloads: tuple[Workload, ...]
    drv: DriverInfo
    product: str


def prepare(target: Target, workloads: list[str], opts: DriverOptions, bundle: BundleWriter,
            progress: TextIO | None, bar: SweepBar) -> Prepared:
    """Load each workload's dataset unless it is there already, check custom scripts on one client."""
    wls = [make_workload(n, opts) for n in workloads]
    drv = fastest_driver(target.engine)
    with Session(target, statement_timeout_ms=0, application_name=own_app_name("load")) as s, \
            LoadWatch(target, own_session_id(s), opts.statement_timeout_s, bar.say) as watch:
        try:
            product = _load(s, target, wls, opts, bundle, progress, bar)
        except DiagError as e:
            if watch.stuck is None:
                raise
            raise StatementStuck(f"{target.label}: loading data: a statement did not return: {watch.stuck.text()}; "
                                 "its session was ended") from e
    for wl in wls:
        if wl.needs_script:
            c = open_client(target, opts.protocol, opts.isolation, product, drv)
            try:
                wl.check(c)
            finally:
                c.close()
    return Prepared(target, tuple(wls), drv, product)


def _load(s: Session, target: Target, wls: list[Workload], opts: DriverOptions, bundle: BundleWriter,
          progress: TextIO | None, bar: SweepBar) -> str:
    """The data part of :func:`prepare` on the load's session ``s``; returns the server's product name."""
    product = s.product
    check_room(s, target, max(opts.clients))  # before loading: the step that does not fit would end the run
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
        wl.setup(s)
    return product


def _sweep(target: Target, workloads: list[str], opts: DriverOptions, bundle: BundleWriter,
           hooks: StepHooks | None, progress: TextIO | None, bar: SweepBar) -> list[ResultRow]:
    p = prepare(target, workloads, opts, bundle, progress, bar)
    wls = p.workloads
    rows: list[ResultRow] = []
    series = bundle.series(f"workload--{target.label}")
    cluster = dask_steps.Cluster(opts.workers, bundle) if opts.workers else None
    if cluster is not None:  # no tail on Dask workers: a profile there records inside the measured part
        opts = dataclasses.replace(opts, tail_s=0.0)
    steps = [(wl, plan) for wl in wls for plan in opts.plans(target.label, wl.name)]
    try:
        for i, (wl, plan) in enumerate(steps, 1):
            n = plan.clients
            bar.begin_step(f"{target.label}: {wl.name}, {n} client{'s' if n > 1 else ''}, "
                           f"warmup {opts.warmup_s:g} s, measure {plan.duration_s:g} s")
            step = _step(cluster, p, wl, plan, bundle, series, hooks, bar, seed=i)
            try:
                rows.append(step.run())
                bar.end_step()
            except KeyboardInterrupt as ki:
                if step.row is not None:
                    rows.append(step.row)
                ki.results = rows  # type: ignore[attr-defined]
                raise
            why = _ends_target(step, opts)
            if why is not None:
                _skip(bundle, bar, target, [f"{w.name} c={p.clients}" for w, p in steps[i:]], why)
                break
    finally:
        series.close()
        if cluster is not None:
            cluster.close()
    return rows


def _step(cluster: dask_steps.Cluster | None, p: Prepared, wl: Workload, plan: StepPlan, bundle: BundleWriter,
          series: SeriesWriter, hooks: StepHooks | None, bar: SweepBar, seed: int) -> Step | dask_steps.DaskStep:
    """The step of ``plan``: one window (:class:`workloads.steps.window.StepWindow`) filled by local client
    processes, or by the shares of the Dask workers of ``cluster`` (``--workers``)."""
    if cluster is not None:
        return dask_steps.DaskStep(cluster.client, p.target, wl, plan, bundle, series, seed, hooks)
    return Step(p.target, p.product, p.drv, wl, plan, bundle, series, hooks, bar, seed=seed)


def _ends_target(step: Step | dask_steps.DaskStep, opts: DriverOptions) -> str | None:
    """Why the target's remaining steps are not run after ``step`` (None: they are): its server is gone (no
    use running the rest against it), or a statement was stuck under ``--on-error abort``. A step on Dask
    workers ends the target's steps when a worker's share lost the server (a lost worker does not: it is its
    own, counted in the row)."""
    if not isinstance(step, Step):
        row = step.row
        return "the server was lost" if row is not None and row.server_lost else None
    if step.lost is not None:
        return "the server was lost"
    if step.stuck is not None and opts.on_error == "abort":
        return "a statement was stuck"
    return None


def _skip(bundle: BundleWriter, bar: SweepBar, target: Target, left: list[str],
          why: str = "the server was lost") -> None:
    """One event for the steps not run (a lost server, a stuck statement under --on-error abort); the bar's
    plan shrinks by them."""
    if not left:
        return
    bundle.event("steps_skipped", f"{target.label}: {why}; {len(left)} step(s) not run: "
                 f"{', '.join(left)}", target=target.label, steps=left)
    bar.say(f"{target.label}: {why}: skipping {', '.join(left)}")
    bar.steps = max(bar.done_steps, bar.steps - len(left))


def run_interleaved(targets: list[Target], workloads: list[str], opts: DriverOptions, bundle: BundleWriter,
                    hooks: StepHooks | None = None, progress: TextIO | None = sys.stderr,
                    bar: SweepBar | None = None) -> dict[str, list[ResultRow]]:
    """Every step ``opts.repeat`` times, interleaved across targets: for each (workload, clients) repeat 1
    of every target, then repeat 2 of every target, and so on (A1 B1 A2 B2 ...), so a drift of the
    machine (other load, a warming cache, the host's own jobs) hits each target alike.

    Returns each target's rows, one per repeat, by label. A target whose server is lost skips its
    remaining steps (one ``steps_skipped`` event); the others go on. On Ctrl-C the rows measured so far
    (all targets) are on the raised ``KeyboardInterrupt`` as ``.results``.
    """
    validate(workloads, opts)
    own_bar = bar is None
    if bar is None:
        bar = sweep_bar(progress, len(targets), workloads, opts)
    rows: dict[str, list[ResultRow]] = {t.label: [] for t in targets}
    series = {}
    cluster = None
    try:
        ready = [prepare(t, workloads, opts, bundle, progress, bar) for t in targets]
        series = {p.target.label: bundle.series(f"workload--{p.target.label}") for p in ready}
        order = [(w, n) for w in range(len(workloads)) for n in opts.clients]
        runs = [(i, w, n, r) for i, (w, n) in enumerate(order, 1) for r in range(1, opts.repeat + 1)]
        lost: set[str] = set()
        cluster = dask_steps.Cluster(opts.workers, bundle) if opts.workers else None
        if cluster is not None:  # no tail on Dask workers: a profile there records inside the measured part
            opts = dataclasses.replace(opts, tail_s=0.0)
        for k, (i, w, n, r) in enumerate(runs):
            for p in ready:
                label = p.target.label
                if label in lost:
                    continue
                wl = p.workloads[w]
                plan = StepPlan(label, wl.name, n, opts, r)
                bar.begin_step(f"{label}: {wl.name}, {n} client{'s' if n > 1 else ''}, repeat {r}/{opts.repeat}, "
                               f"warmup {opts.warmup_s:g} s, measure {plan.duration_s:g} s")
                step = _step(cluster, p, wl, plan, bundle, series[label], hooks, bar, seed=i + 10_000 * (r - 1))
                try:
                    rows[label].append(step.run())
                    bar.end_step()
                except KeyboardInterrupt as ki:
                    if step.row is not None:
                        rows[label].append(step.row)
                    ki.results = [x for v in rows.values() for x in v]  # type: ignore[attr-defined]
                    raise
                why = _ends_target(step, opts)
                if why is not None:
                    lost.add(label)
                    _skip(bundle, bar, p.target, [f"{p.workloads[w2].name} c={n2} repeat {r2}"
                                                  for _, w2, n2, r2 in runs[k + 1:]], why)
    finally:
        for s in series.values():
            s.close()
        if cluster is not None:
            cluster.close()
        bar.hide()
        if own_bar:
            bar.close()
    return rows
