"""Every source a run can have, registered in one place, and the plan that says which ones run.

:data:`SOURCES` is an explicit tuple (no folder scan): each entry turns a
:class:`SourcePlan` and a context into source objects, for the whole run
(``scope="run"``: started once, before the first target's sweep) or for one
target (``scope="target"``: started around that target's sweep). An engine's
collectors are its package's (``collectors.pg.PARTS``, ``collectors.mysql.PARTS``), found through
:func:`collectors.engines.source_parts`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from collectors.base import Collector, CollectorContext, Probe
from collectors.engines import source_parts
from collectors.flush import DeviceFlushCollector, FlushCollector
from collectors.flush_capability import FlushCapabilitySource
from collectors.flush_tail import FlushTailSource
from collectors.host import HostCollector
from collectors.node_exporter import NodeExporterHost
from collectors.ssh_fsync import SshFsyncTest
from collectors.ssh_host import SshFlushCollector, SshProfileSource
from collectors.step_profiles import ClientProfileSource, ServerProfileSource
from diag.core.engines import Engine

Scope = Literal["run", "target"]


@dataclass(frozen=True)
class SourcePlan:
    """Which sources a run starts, and how (times in seconds).

    ``engine``: "all" of the engine's collectors, "stats" (only its global
    counters, series ``Engine.stats_series``: the log-flush count beside flush
    tracing), or "none". ``flush_off``: when set, flush tracing is not started
    and this reason is recorded as its probe. ``strict``: a source that must be
    ready before clients connect (flush tracing) and is not fails the run.
    ``fsync_test_s``: seconds per fsync test when measuring F; None: F is not measured.
    ``flush_window``: where flush calls are counted on a local server: "run" all along (the durability
    probe, ``watch --flush-trace``), "tail" only in each step's tail after its measured part (``dbdiag run``:
    counting them costs the load; the measured part samples the device flush counters alone), "devices" never
    (a watch: only the device flush counters, ``flush_note`` saying why).
    """

    host: bool = True
    engine: Literal["all", "stats", "none"] = "all"
    flush: bool = True
    flush_off: str = ""
    flush_interval_s: float | None = None
    flush_window: Literal["run", "tail", "devices"] = "run"
    flush_note: str = ""
    strict: bool = False
    fsync_test_s: float | None = None
    profile: bool = False  # perf of local servers in each step
    client_profile: bool = False  # py-spy of the clients in each step
    profile_s: float = 3.0  # window of either, centred on the step

    def to_dict(self) -> dict[str, Any]:
        """For run.json ``options``: only what is not implied by the other options."""
        return {"flush_interval_s": self.flush_interval_s} if self.flush_interval_s else {}


class FlushOff(Collector):
    """Flush tracing planned off: recorded in run.json with why, not announced (it is the plan, not a fault)."""

    name = FlushCollector.name
    quiet = True

    def probe(self) -> Probe:
        return Probe(False, str(self.ctx.options.get("reason", "")))

    def sample(self) -> None:
        return None


def _with(ctx: CollectorContext, **options: Any) -> CollectorContext:
    """``ctx`` with more options (each source gets its own context; the run's stays as it was)."""
    return replace(ctx, options={**ctx.options, **options})


def _fsync_test(plan: SourcePlan, ctx: CollectorContext) -> list[Collector]:
    if plan.fsync_test_s is None:
        return []
    return [FlushCapabilitySource(_with(ctx, seconds_per_test=plan.fsync_test_s))]


def _host(plan: SourcePlan, ctx: CollectorContext) -> list[Collector]:
    return [HostCollector(ctx)] if plan.host else []


def _node_host(plan: SourcePlan, ctx: CollectorContext) -> list[Collector]:
    """The target's own host from node_exporter, when the run names one for it (``--host-metrics``)."""
    return [NodeExporterHost(ctx)] if plan.host and ctx.options.get("host_metrics") else []


def _ssh_profile(plan: SourcePlan, ctx: CollectorContext) -> list[Collector]:
    """Profiles of the target's server on its own host over ssh, when the run names one (``--ssh``)."""
    if not (plan.profile and ctx.options.get("ssh")):
        return []
    return [SshProfileSource(_with(ctx, profile_seconds=plan.profile_s))]


def _ssh_fsync(plan: SourcePlan, ctx: CollectorContext) -> list[Collector]:
    """F measured on the target's own host over ssh, when F is measured at all (``fsync_test_s``)."""
    if plan.fsync_test_s is None or not ctx.options.get("ssh"):
        return []
    return [SshFsyncTest(_with(ctx, fsync_seconds=plan.fsync_test_s))]


def _server_profile(plan: SourcePlan, ctx: CollectorContext) -> list[Collector]:
    return [ServerProfileSource(_with(ctx, profile_seconds=plan.profile_s))] if plan.profile else []


def _client_profile(plan: SourcePlan, ctx: CollectorContext) -> list[Collector]:
    if not plan.client_profile:
        return []
    return [ClientProfileSource(_with(ctx, profile_seconds=plan.profile_s))]


def engine_collectors(engine: Engine, which: str = "all") -> tuple[type[Collector], ...]:
    """The collector classes of ``engine``: all, only its global counters ("stats"), or none."""
    classes = source_parts(engine).collectors
    if which == "stats":
        return tuple(c for c in classes if c.name == engine.stats_series)
    return classes if which == "all" else ()


def _engine(plan: SourcePlan, ctx: CollectorContext) -> list[Collector]:
    return [cls(ctx) for cls in engine_collectors(ctx.target.dbms, plan.engine)]


def _flush(plan: SourcePlan, ctx: CollectorContext) -> list[Collector]:
    if plan.flush_off:
        return [FlushOff(_with(ctx, reason=plan.flush_off))]
    if not plan.flush:
        return []
    if ctx.options.get("ssh"):  # the server's host is reached over ssh: count its flush calls there
        return [SshFlushCollector(ctx)]
    if plan.flush_window != "run":  # counted in each step's tail (_flush_tail), or not at all (flush_note)
        return [DeviceFlushCollector(_with(ctx, flush_note=plan.flush_note) if plan.flush_note else ctx)]
    return [FlushCollector(_with(ctx, flush_interval_s=plan.flush_interval_s) if plan.flush_interval_s else ctx)]


def _flush_tail(plan: SourcePlan, ctx: CollectorContext) -> list[Collector]:
    """Flush calls of the run's local servers counted in each step's tail, when the plan puts them there."""
    if not (plan.flush and not plan.flush_off and plan.flush_window == "tail"):
        return []
    return [FlushTailSource(ctx)] if any(s.local and s.pid for s in ctx.servers) else []


@dataclass(frozen=True)
class Registered:
    """One entry of the registry: a name, a scope, and how to make its sources from a plan."""

    name: str
    scope: Scope
    make: Callable[[SourcePlan, CollectorContext], list[Collector]]


# Order matters within a scope: in-process sources start in this order before the sampled ones,
# so the fsync test runs before host sampling starts (it would show in the host's disk and CPU).
SOURCES: tuple[Registered, ...] = (
    Registered("flush_capability", "run", _fsync_test),
    Registered("host", "run", _host),
    Registered("profile", "run", _server_profile),
    Registered("client_profile", "run", _client_profile),
    Registered("flush_tail", "run", _flush_tail),
    Registered("ssh_fsync", "target", _ssh_fsync),  # first: before the target's sampled sources start
    Registered("engine", "target", _engine),
    Registered("node_host", "target", _node_host),
    Registered("ssh_profile", "target", _ssh_profile),
    Registered("flush", "target", _flush),
)


def sources_for(scope: Scope, plan: SourcePlan, ctx: CollectorContext) -> list[Collector]:
    """The sources of ``scope`` this plan asks for, made for ``ctx`` (a target's, or the run's)."""
    return [s for r in SOURCES if r.scope == scope for s in r.make(plan, ctx)]
