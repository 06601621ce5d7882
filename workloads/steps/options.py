"""What a sweep is asked to do and what it tells its caller: options, step info, hooks.

Re-exported by :mod:`workloads.driver` (the sweep's entry point); kept apart so
the step's pieces (:mod:`workloads.steps.step`, :mod:`workloads.steps.stepresult`) can use
them without importing the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from diag.core.argtypes import client_counts, step_seconds
from diag.core.schema import ResultRow


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
    tpcc_mode: str = "client"           # "client" | "sp": tpcc's statements from the client, or stored procedures
    # What a failed transaction does to the step, like pgbench: "continue" counts it and goes on (a lost
    # connection is re-established with a bounded back-off); "abort" ends the step at the first error
    # that is not a retried serialization failure or deadlock.
    on_error: str = "continue"
    # Each step this many times, interleaved across targets (A1 B1 A2 B2 ...) so a drift of the machine
    # hits every target alike; the run combines the repeats into one result row (workloads.steps.repeats).
    repeat: int = 1
    # A Dask scheduler (tcp://HOST:8786): each step's clients run on its workers (workloads.remote.dask_steps).
    workers: str | None = None
    # Seconds the load runs on after the measured part, for the run's profiles (perf's start-up, its window):
    # counted apart (the row's ``profile_tail``), never in the step's figures. 0: no tail (no profiles, Dask).
    tail_s: float = 0.0
    # Seconds a statement may run before it counts as stuck (named with the server's view of its wait, its
    # session ended, the step cut); None: only a statement still running AFTER_END_S past the step's end
    # (workloads.steps.stuck), and a load statement in one endless wait for LOAD_STUCK_S.
    statement_timeout_s: float | None = None
    # pgbench -C: each transaction on a new connection, its connect timed as a part of it (workloads.churn).
    connect_per_txn: bool = False

    def __post_init__(self) -> None:
        # --clients' and -T's rules (diag.core.argtypes), which the command line's parser also applies: every
        # caller (the commands, the durability probe, benchmarks, tests) builds this record before a step is planned.
        object.__setattr__(self, "clients", client_counts(self.clients))
        object.__setattr__(self, "duration_s", step_seconds(self.duration_s))

    def plans(self, target: str, workload: str, repeat: int = 0) -> list[StepPlan]:
        """The steps of ``workload`` against ``target``: one per client count, in the order swept."""
        return [StepPlan(target, workload, n, self, repeat) for n in self.clients]


@dataclass(frozen=True)
class StepPlan:
    """One step as planned, made once by the driver and handed to whatever fills it (:class:`workloads.step.Step`,
    a Dask step): which target (label), which workload, how many clients, for how long (``-T``, s), with which
    options, and which repeat (1..N under ``--repeat N``; 0 for a step run once)."""

    target: str
    workload: str
    clients: int
    options: DriverOptions
    repeat: int = 0

    @property
    def duration_s(self) -> float:
        """Seconds to measure (``-T``): the planned length; the row's ``measured_s`` is what was measured."""
        return self.options.duration_s

    @property
    def key(self) -> tuple[str, str, int]:
        """(target, workload, clients): how rows, series and findings name the step."""
        return (self.target, self.workload, self.clients)


ON_ERROR = ("continue", "abort")


@dataclass(frozen=True)
class StepInfo:
    target: str
    workload: str
    clients: int
    duration_s: float
    t_start: float  # unix seconds, start of the measured part
    client_pids: tuple[int, ...]
    # Processes on this host whose whole tree is the step's load generation (a Dask worker here: itself,
    # its share's child and the clients that forks, born after the step starts); host evidence counts them
    # as clients.
    client_roots: tuple[int, ...] = ()
    # Seconds the load runs on after the measured part (DriverOptions.tail_s): where profiles record.
    tail_s: float = 0.0


class StepHooks(Protocol):
    def step_started(self, info: StepInfo) -> None: ...

    def step_finished(self, info: StepInfo, row: ResultRow) -> ResultRow:
        """The step's row with what the hooks add (the sources' parts); the row passed in is not changed."""
        ...


def finished_row(hooks: StepHooks | None, info: StepInfo | None, row: ResultRow) -> ResultRow:
    """A step's one result record: what the step measured (``row``, as :func:`workloads.steps.stepresult.result_row`
    or the Dask merge built it), then the hooks' parts in it. A local step and a step on Dask workers both end
    here."""
    return hooks.step_finished(info, row) if hooks is not None and info is not None else row
