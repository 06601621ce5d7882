"""A sweep's result rows as results.json holds them, for tests that read a row by its keys.

:func:`workloads.driver.run_sweep` returns typed :class:`diag.core.schema.ResultRow` records; these tests check
the written form (its keys, a workload's own fields such as TPC-C's ``tpm``, the Dask shares), so they read
``to_dict()``: the same dict the bundle writer stores.
"""

from __future__ import annotations

import os
import signal
import threading
from dataclasses import replace
from typing import Any

from diag.core import servers

from diag.core.schema import ResultRow
from workloads.driver import run_sweep
from workloads.steps.options import StepInfo


def sweep_rows(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """:func:`run_sweep`'s rows, each as results.json stores it."""
    return [r.to_dict() for r in run_sweep(*args, **kwargs)]


class RecordingHooks:
    """Step hooks that record what a step tells them; with ``part``, they add it to the row's extra as a source
    adds its part."""

    def __init__(self, part: dict[str, Any] | None = None) -> None:
        self.part = part or {}
        self.started: list[StepInfo] = []
        self.finished: list[tuple[StepInfo, ResultRow]] = []

    def step_started(self, info: StepInfo) -> None:
        self.started.append(info)

    def step_finished(self, info: StepInfo, row: ResultRow) -> ResultRow:
        self.finished.append((info, row))
        return replace(row, extra={**row.extra, **self.part}) if self.part else row


class KillServerAfter:
    """Step hooks that SIGKILL the whole server (its process group: a postmaster and its backends, or mariadbd)
    ``delay`` s into the first step."""

    def __init__(self, srv: servers.ThrowawayServer, delay: float) -> None:
        self.srv, self.delay = srv, delay
        self.timer: threading.Timer | None = None

    def step_started(self, info: StepInfo) -> None:
        if self.timer is None:
            assert self.srv.process is not None
            self.timer = threading.Timer(self.delay, os.killpg, (self.srv.process.pid, signal.SIGKILL))
            self.timer.start()

    def step_finished(self, info: StepInfo, row: ResultRow) -> ResultRow:
        return row
