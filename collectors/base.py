"""The source contract: declare metrics, answer a probe, then start / sample / stop, plus step hooks.

Every source of a run (host, engine collectors, flush tracing, the fsync test,
profiles) is a :class:`Collector`, registered in :mod:`collectors.registry` and
driven by :mod:`collectors.lifecycle`. Two kinds:

- *sampled* (the default): runs in its own process (see :mod:`collectors.runner`),
  beside the workload's client processes. Each ``sample()`` returns one record (a
  dict of metric name -> raw value, counters uncooked; rates are computed later by
  :mod:`collectors.rates`) or a list of records, or None. The runner stamps each
  record with ``t`` (Unix seconds) and appends it to ``series/<name>--<target>.jsonl``.
- *in-process* (``sampled = False``): lives in the run's own process and works in
  ``start()`` (the fsync test) or in the step hooks (profiles); it writes no series.

``step_started`` / ``step_finished`` are called in the run's process on the source
object, so only in-process sources can use them; a sampled source that needs to
know about steps reads shared state (``CollectorContext.client_pids``). A source that
adds to a step's results.json row declares the fields it owns (``row_fields``) and
returns its part from ``step_finished``; it never sees or changes the row itself: the
lifecycle puts each part into the step's :class:`~diag.core.schema.ResultRow` through
:func:`diag.core.schema.with_part`, which refuses a field the source did not declare.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from collectors.lockgate import LockGate
from diag.core.bundle import BundleWriter
from diag.core.engines import Engine
from diag.core.fingerprint import fingerprint
from diag.core.targets import Target


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


@dataclass(frozen=True)
class ServerFacts:
    """What a run found out about one target's server (run-wide sources act on every target)."""

    label: str
    local: bool
    pid: int | None = None       # postmaster / mysqld, when local and found
    data_dir: str | None = None  # when the server says and it is on this machine
    binary: str | None = None    # executable of ``pid`` (perf symbol hints)
    engine: Engine | None = None  # where its log folder is (flush tracing's filesystem)


@dataclass
class CollectorContext:
    """What a collector may know about the run.

    ``server_pid``: the postmaster / mysqld PID when the server is local and known.
    ``data_dir``: the server's data directory when local. ``client_pids``: a
    callable returning the workload driver's current client PIDs.
    ``artifacts``: the bundle's artifacts/ folder for large files. ``servers``: every
    target of the run (run-wide sources). ``bundle``: the run's bundle writer, for
    in-process sources (events, artifacts); sampled ones get their own in their process.
    ``keep_literals``: store statement texts read from the server as sent (``--keep-literals``); by default
    :meth:`statement_text` stores their fingerprint (other sessions' literals are other people's data).
    ``lock_gate``: shared by one target's wait and blocking samplers (:mod:`collectors.lockgate`); None
    when they run alone, and then the blocking sampler reads the server every tick.
    """

    target: Target
    artifacts: Path
    server_pid: int | None = None
    data_dir: str | None = None
    main_pid: int | None = None
    client_pids: Any = None
    options: dict[str, Any] = field(default_factory=dict)
    servers: tuple[ServerFacts, ...] = ()
    bundle: BundleWriter | None = None
    keep_literals: bool = False
    lock_gate: LockGate | None = None

    def statement_text(self, text: str) -> str:
        """A statement text read from the server, as it may be stored: literals replaced (diag.core.fingerprint)
        unless the run keeps them."""
        return text if self.keep_literals or not text else fingerprint(text, self.target.dbms.string_backslashes)

    def server(self, label: str) -> ServerFacts | None:
        """The facts of target ``label`` among :attr:`servers`."""
        return next((s for s in self.servers if s.label == label), None)


class Collector(abc.ABC):
    """Base of all sources. Subclasses set ``name``, ``metrics`` and ``interval_s``."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""  # for people, in messages ("flush tracing"); ``name`` when empty
    metrics: ClassVar[tuple[Metric, ...]] = ()
    interval_s: float = 1.0  # a class default; a sampler that reads it from the options sets its own
    per_target: ClassVar[bool] = True  # False: one instance per run (host metrics)
    sampled: ClassVar[bool] = True  # False: lives in the run's process, no series (see the module docstring)
    # Seconds the run waits for this source's first record before clients connect (None: it does not
    # wait). Flush tracing needs it: a backend forked before perf attaches is never counted.
    ready_timeout_s: ClassVar[float | None] = None
    quiet: ClassVar[bool] = False  # True: a planned-off source; its probe is recorded, not announced
    # The results.json row fields this source's step_finished may return (its part of each step's row, fields of
    # diag.core.schema.ResultRow or names kept in its extra); a name not declared here is refused.
    row_fields: ClassVar[tuple[str, ...]] = ()

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

    def tail_s(self, duration_s: float) -> float:
        """Seconds of load this source needs after each step's measured part of ``duration_s`` (an expensive
        source records there, apart from the step's figures: workloads.steps.steptail). In-process sources only."""
        return 0.0

    def step_started(self, info: Any) -> None:
        """A measured step begins (``info``: workloads.driver.StepInfo). In-process sources only."""

    def step_finished(self, info: Any) -> Mapping[str, Any] | None:
        """A step ended: this source's part of its results.json row ({field: value}, only fields named in
        :attr:`row_fields`; :func:`diag.core.schema.with_part` puts it in), or None. In-process sources only."""
        return None

    def facts(self) -> dict[str, Any]:
        """run.json entries this source adds once started (the fsync test's ``flush_capability``)."""
        return {}

    @classmethod
    def declared(cls) -> list[dict[str, str]]:
        """The metric declarations as JSON for run.json."""
        return [{"name": m.name, "unit": m.unit, "kind": m.kind, "description": m.description}
                for m in cls.metrics]
