"""The collector contract: declare metrics, answer a probe, then start / sample / stop.

A collector runs in its own process (see :mod:`collectors.runner`), beside the
workload's client processes. Each ``sample()`` returns one record (a dict of
metric name -> raw value, counters uncooked; rates are computed later by
:mod:`collectors.rates`) or a list of records, or None. The runner stamps each
record with ``t`` (Unix seconds) and appends it to ``series/<name>--<target>.jsonl``.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from diag.targets import Target


@dataclass(frozen=True)
class Metric:
    """One declared metric: ``kind`` counter (monotonic, rate it) or gauge (use as is)."""

    name: str
    unit: str
    kind: Literal["counter", "gauge"]
    description: str


@dataclass(frozen=True)
class Probe:
    """Whether a collector can run here; when not, why and what would fix it."""

    ok: bool
    reason: str = ""
    hint: str = ""
    missing: tuple[str, ...] = ()  # parts that are off (e.g. "pg_stat_statements: not installed")

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "reason": self.reason, "hint": self.hint, "missing": list(self.missing)}


@dataclass
class CollectorContext:
    """What a collector may know about the run.

    ``server_pid``: the postmaster / mysqld PID when the server is local and known.
    ``data_dir``: the server's data directory when local. ``client_pids``: a
    callable returning the workload driver's current client PIDs.
    ``artifacts``: the bundle's artifacts/ folder for large files.
    """

    target: Target
    artifacts: Path
    server_pid: int | None = None
    data_dir: str | None = None
    main_pid: int | None = None
    client_pids: Any = None
    options: dict[str, Any] = field(default_factory=dict)


class Collector(abc.ABC):
    """Base of all collectors. Subclasses set ``name``, ``metrics`` and ``interval_s``."""

    name: ClassVar[str] = ""
    metrics: ClassVar[tuple[Metric, ...]] = ()
    interval_s: ClassVar[float] = 1.0
    engines: ClassVar[tuple[str, ...]] = ("postgres", "mysql")  # which targets it applies to
    per_target: ClassVar[bool] = True  # False: one instance per run (host metrics)

    def __init__(self, ctx: CollectorContext) -> None:
        self.ctx = ctx

    @abc.abstractmethod
    def probe(self) -> Probe:
        """Can this collector run against this target here? Cheap; runs before the workload."""

    def start(self) -> None:
        """Open connections, take first snapshots (in the collector's own process)."""

    @abc.abstractmethod
    def sample(self) -> dict[str, Any] | list[dict[str, Any]] | None:
        """One record of raw values (or several, or None)."""

    def stop(self) -> list[dict[str, Any]] | None:
        """Close; may return final records (e.g. a settings snapshot at the end)."""
        return None

    @classmethod
    def declared(cls) -> list[dict[str, str]]:
        """The metric declarations as JSON for run.json."""
        return [{"name": m.name, "unit": m.unit, "kind": m.kind, "description": m.description}
                for m in cls.metrics]
