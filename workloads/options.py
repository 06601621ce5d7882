"""What a sweep is asked to do and what it tells its caller: options, step info, hooks.

Re-exported by :mod:`workloads.driver` (the sweep's entry point); kept apart so
the step's pieces (:mod:`workloads.step`, :mod:`workloads.stepresult`) can use
them without importing the driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


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
    # hits every target alike; the run combines the repeats into one result row (workloads.repeats).
    repeat: int = 1
    # A Dask scheduler (tcp://HOST:8786): each step's clients run on its workers (workloads.dask_steps).
    workers: str | None = None
    # Seconds the load runs on after the measured part, for the run's profiles (perf's start-up, its window):
    # counted apart (the row's ``profile_tail``), never in the step's figures. 0: no tail (no profiles, Dask).
    tail_s: float = 0.0
    # Seconds a statement may run before it counts as stuck (named with the server's view of its wait, its
    # session ended, the step cut); None: only a statement still running AFTER_END_S past the step's end
    # (workloads.stuck), and a load statement in one endless wait for LOAD_STUCK_S.
    statement_timeout_s: float | None = None
    # pgbench -C: each transaction on a new connection, its connect timed as a part of it (workloads.churn).
    connect_per_txn: bool = False


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

    def step_finished(self, info: StepInfo, result: dict) -> None: ...
