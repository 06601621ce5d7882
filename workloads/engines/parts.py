"""What an engine contributes to the workloads layer: :class:`WorkloadParts`, one per engine module beside this one
(:mod:`workloads.engines.pg`, :mod:`workloads.engines.mysql`), found through :func:`workloads.engines.workload_parts`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from diag.core.db import DriverInfo, Session
from diag.core.errors import DbError
from diag.core.targets import Target
from workloads.clients.clientbase import Client
from workloads.tables import Dataset, Table
from workloads.watch.readings import Reading, WindowCounts

if TYPE_CHECKING:  # type hints only: the reader finds its engine's parts through the registry
    from workloads.watch.watch_counters import CounterReader

# Seconds the native executor waits for a connection.
NATIVE_CONNECT_TIMEOUT_S = 5


@dataclass(frozen=True)
class NativeBinding:
    """How the native executor (workloads/native/_native.c) talks to the engine."""

    # (target, isolation, nonblock) -> a connection owned by the C side, None when the client library is not
    # found; DbError when the server refuses. ``isolation`` is set at connect where Engine.isolation_at_connect.
    open: Callable[[Target, str, bool], Any]
    error: Callable[[str, bytes, bytes, bool], DbError]  # (label, code, message, lost) -> our error
    library: Callable[[], str | None]  # the client library the C side opens, None when not installed


@dataclass(frozen=True)
class WatchReading:
    """How ``dbdiag watch`` reads a server's own counters and turns two readings into a window's counts."""

    read: Callable[[CounterReader], Reading]  # counters and sessions, at a window's edges
    look: Callable[[CounterReader], Reading]  # the sessions at least, inside a window
    counts: Callable[[Reading, Reading, float], WindowCounts]  # (a, b, dbdiag's own reads) -> the window's counts
    by_port: bool  # whether its sessions are told apart by client port (one process per connection)


@dataclass(frozen=True)
class WorkloadParts:
    """One engine's part of the workloads layer: its clients, its bulk load, its native binding, its watch."""

    clients: Mapping[str, type[Client]]  # the workload client class per driver name (DriverInfo.name)
    workload_driver: Callable[[], DriverInfo | None]  # a driver only workload clients use, tried first (None: none)
    load_table: Callable[[Session, Table, TextIO | None], None]  # create and bulk-load one table
    loaded_current: Callable[[Session, Dataset], bool]  # tables loaded earlier are as this dbdiag would make them
    native: NativeBinding
    watch: WatchReading


def no_workload_driver() -> DriverInfo | None:
    """An engine whose workload clients use the engine's own driver pick (Engine.pick_driver)."""
    return None


def always_current(s: Session, ds: Dataset) -> bool:
    """An engine whose loaded tables do not go stale between dbdiag versions."""
    return True
