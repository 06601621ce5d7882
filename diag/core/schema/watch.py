"""results.json rows of a ``dbdiag watch`` window (``source: "server"``): what the server's counters gave
beside the step's own fields, as written by :mod:`workloads.watch.watchresult` and :mod:`diag.watch`.

* ``window``: the window's index (1-based); ``windows``: the indexes a whole watch's one step
  (:func:`reports.model.watch_view.one_step_row`) was made of;
* ``counted``: how the transactions were counted (the engine's rule); ``server_transactions``: the server's raw
  count; ``own_estimate`` / ``own_transactions``: dbdiag's own reads estimated in it and taken out of it;
* ``sessions_seen``: the workload's sessions at each look; ``sessions_hidden``: sessions of other roles whose
  state this role cannot see; ``own_backends``: the pids of dbdiag's own sessions' backends (PostgreSQL);
* ``client``: the load command's own figures over the window (:class:`ClientFigures`);
* ``local_clients``: the processes of this host connected to the server (:class:`LocalClients`).

A row without ``source: "server"`` is not a watch window: :meth:`WatchWindow.from_row` gives None.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from diag.core.schema.base import NUM, as_object, get_field


@dataclass(frozen=True)
class ClientFigures:
    """The load command's interval lines inside the window: ``tps`` (their mean, transactions/s), ``qps``
    (statements/s), ``latency_ms`` (ms, of the kind ``latency_kind``: "mean" or "p95"), ``lines`` (how many)."""

    tool: str = ""
    tps: float = 0.0
    lines: int = 0
    qps: float | None = None
    latency_ms: float | None = None
    latency_kind: str | None = None

    @classmethod
    def from_dict(cls, d: Any, where: str = "client") -> ClientFigures:
        d = as_object(d, where)
        return cls(tool=get_field(d, "tool", (str,), where, ""), tps=get_field(d, "tps", NUM, where, required=True),
                   lines=get_field(d, "lines", (int,), where, 0), qps=get_field(d, "qps", NUM, where),
                   latency_ms=get_field(d, "latency_ms", NUM, where),
                   latency_kind=get_field(d, "latency_kind", (str,), where))


@dataclass(frozen=True)
class LocalClients:
    """The processes of this host connected to the watched server (:class:`collectors.peers.Peers`): their
    names, connections of processes this user cannot read, sessions the role cannot match."""

    names: tuple[str, ...] = ()
    unreadable: int = 0
    unmatched: int = 0

    @classmethod
    def from_dict(cls, d: Any, where: str = "local_clients") -> LocalClients:
        d = as_object(d, where)
        return cls(names=tuple(str(n) for n in get_field(d, "names", (list,), where, [])),
                   unreadable=get_field(d, "unreadable", (int,), where, 0),
                   unmatched=get_field(d, "unmatched", (int,), where, 0))


@dataclass(frozen=True)
class WatchWindow:
    """The watch part of one row (see the module docstring)."""

    window: int | None = None
    windows: tuple[int | None, ...] = ()
    counted: str | None = None
    server_transactions: float | None = None
    own_estimate: float | None = None
    own_transactions: float | None = None
    sessions_seen: tuple[int, ...] = ()
    sessions_hidden: int | None = None
    own_backends: tuple[int, ...] = ()
    client: ClientFigures | None = None
    local_clients: LocalClients | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any], where: str = "row") -> WatchWindow | None:
        """The row's watch fields as a record; None for a row that is not a watch window."""
        if row.get("source") != "server":
            return None
        client = get_field(row, "client", (dict,), where)
        local = get_field(row, "local_clients", (dict,), where)
        return cls(window=get_field(row, "window", (int,), where),
                   windows=tuple(get_field(row, "windows", (list,), where, [])),
                   counted=get_field(row, "counted", (str,), where),
                   server_transactions=get_field(row, "server_transactions", NUM, where),
                   own_estimate=get_field(row, "own_estimate", NUM, where),
                   own_transactions=get_field(row, "own_transactions", NUM, where),
                   sessions_seen=tuple(get_field(row, "sessions_seen", (list,), where, [])),
                   sessions_hidden=get_field(row, "sessions_hidden", (int,), where),
                   own_backends=tuple(get_field(row, "own_backends", (list,), where, [])),
                   client=ClientFigures.from_dict(client, f"{where}: client") if client is not None else None,
                   local_clients=LocalClients.from_dict(local, f"{where}: local_clients") if local is not None else None)
