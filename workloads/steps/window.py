"""A step's window: what every step does, whoever fills it with load.

ARCHITECTURE.md, "A step is a window that a load fills": a step is a time window on a target with a plan
(:class:`~workloads.steps.options.StepPlan`) and one typed result record. :class:`StepWindow` is that lifecycle,
once: the start of the measured part (the ``step_started`` event, :class:`~workloads.steps.options.StepInfo`, the
hooks), each interval (its series record, and the full ones' transactions/s as the row's samples,
``interval_tps``), the step's events (named by its target, workload and clients, with its repeat where the
event carries it), its HDR histogram artifacts, and its end (the ``step_finished`` event, the console lines,
the hooks' parts in the row).

What differs is who fills the window and how its figures come in: local client processes, their intervals merged
here (:class:`workloads.steps.step.Step`), the shares of Dask workers, their streamed intervals merged by the
orchestrator (:class:`workloads.remote.dask_steps.DaskStep`), or a load dbdiag does not drive, counted from the
server's own counters (``dbdiag watch``, :mod:`diag.watch`: no intervals, no histogram). Each builds the window's
result row from its own figures and hands it to this one lifecycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from diag.core.bundle import BundleWriter, safe_name
from diag.core.schema import ResultRow
from workloads.steps.options import StepHooks, StepInfo, StepPlan, finished_row
from workloads.steps.progress import SweepBar

FULL_INTERVAL = 0.9     # an interval at least this share of --report-interval long is a full one


class SeriesSink(Protocol):
    """Where the step's interval records go: the bundle's series file (:class:`diag.bundle.SeriesWriter`), or
    that and a Dask worker's stdout (:mod:`workloads.remote.remote_step`)."""

    def write(self, record: dict[str, Any]) -> None: ...


class StepWindow:
    """The lifecycle of one planned step (``plan``) in ``bundle``: started once (:meth:`start`), its intervals
    written (:meth:`interval`), finished once (:meth:`finish`, which returns the step's row and keeps it as
    :attr:`row`). ``bar``: the sweep's progress bar, where the step says its lines (None: no console)."""

    def __init__(self, plan: StepPlan, bundle: BundleWriter, series: SeriesSink | None, hooks: StepHooks | None,
                 bar: SweepBar | None = None, title: str = "") -> None:
        """``series``: None for a window without intervals (a watch's); ``title``: how its lines and events name it,
        when not "<target>: <workload> with <clients> clients" (:attr:`name`)."""
        self.plan = plan
        self.bundle, self.series, self.hooks, self.bar = bundle, series, hooks, bar
        self._title = title
        self.info: StepInfo | None = None   # set when the measured part begins
        self.interval_tps: list[float] = []  # transactions/s of each full measured interval (the row's samples)
        self.row: ResultRow | None = None    # the step's row, once finished (a step cut by Ctrl-C too)

    @property
    def rep(self) -> dict[str, int]:
        """The repeat, in the step's row, series records and the events that carry it (nothing for a step run
        once)."""
        return {"repeat": self.plan.repeat} if self.plan.repeat else {}

    @property
    def name(self) -> str:
        """How the step's lines and events name it: "<target>: <workload> with <clients> clients" (or its title)."""
        return self._title or f"{self.plan.target}: {self.plan.workload} with {self.plan.clients} clients"

    def event(self, kind: str, message: str, *, with_repeat: bool = False, **fields: Any) -> None:
        """An event of this step: its target, workload and clients, then ``fields`` (and its repeat when
        ``with_repeat``)."""
        self.bundle.event(kind, message, target=self.plan.target, workload=self.plan.workload,
                          clients=self.plan.clients, **fields, **(self.rep if with_repeat else {}))

    def say(self, line: str) -> None:
        """A line on the sweep's console, above its progress bar (none without a bar)."""
        if self.bar is not None:
            self.bar.say(line)

    def start(self, duration_s: float, t_start: float, client_pids: Sequence[int] = (),
              client_roots: Sequence[int] = (), tail_s: float = 0.0, how: str = "", **fields: Any) -> StepInfo:
        """The measured part begins (``t_start``, Unix s; ``duration_s`` to measure): the ``step_started``
        event (``how``: words after the step's name; ``fields``: more of the event), then the hooks."""
        p = self.plan
        self.info = StepInfo(p.target, p.workload, p.clients, duration_s, t_start, tuple(client_pids),
                             tuple(client_roots), tail_s=tail_s)
        self.event("step_started", self.name + how + (f" (repeat {p.repeat})" if p.repeat else ""),
                   with_repeat=True, t_start=t_start, **fields)
        if self.hooks is not None:
            self.hooks.step_started(self.info)
        return self.info

    def interval(self, record: dict[str, Any], seconds: float, transactions: int, tail: bool = False) -> None:
        """One interval of the step into the series; a full one that is not in the tail (the run-on after the
        measured part) is a sample of the row's ``interval_tps`` (a short last interval, at the step's end or a
        cut, is noisier)."""
        assert self.series is not None, "a window without a series has no intervals"
        self.series.write(record)
        if not tail and seconds >= FULL_INTERVAL * self.plan.options.report_interval_s:
            self.interval_tps.append(round(transactions / seconds, 2))

    @property
    def histogram_base(self) -> str:
        """The step's histogram artifact's name without ``.hdr``."""
        p = self.plan
        return (f"workload--{safe_name(p.target)}--{p.workload}--c{p.clients}"
                + (f"--r{p.repeat}" if p.repeat else ""))

    def histogram_path(self, suffix: str = "") -> str:
        """The path in the bundle of the step's histogram (``suffix``: of a part of it, before ``.hdr``)."""
        return f"artifacts/{self.histogram_base}{suffix}.hdr"

    def histogram(self, text: str, suffix: str = "") -> str:
        """Write an HDR histogram (``text``, base64) as the step's artifact at :meth:`histogram_path`, which it
        returns. Raises OSError as the write does."""
        self.bundle.artifact(f"{self.histogram_base}{suffix}.hdr").write_text(text + "\n", encoding="ascii")
        return self.histogram_path(suffix)

    def finish(self, row: ResultRow, said: str, lines: Sequence[str] = (), histogram: bool = True) -> ResultRow:
        """The step's end: ``row`` (what the filler measured) takes the window's repeat and samples
        (``interval_tps``); the ``step_finished`` event (``said``: what it measured, after the step's name) names
        the step's histogram (:meth:`histogram_path`; ``histogram`` False: the window has none); its console
        ``lines``; then its one result record with the hooks' parts (:func:`~workloads.steps.options.finished_row`),
        kept as :attr:`row` and returned."""
        row = replace(row, interval_tps=tuple(self.interval_tps), repeat=self.plan.repeat or None)
        self.event("step_finished", f"{self.name}: {said}", with_repeat=True, complete=row.complete,
                   **({"histogram": self.histogram_path()} if histogram else {}))
        for line in lines:
            self.say(line)
        self.row = finished_row(self.hooks, self.info, row)
        return self.row
