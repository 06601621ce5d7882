"""The local processes connected to a server: the clients of a load nobody named (``dbdiag watch`` without a
load command).

A client of a server on this host (or on another host, the client being here) holds a TCP socket whose remote
end is the server's address and port; psutil finds the socket's process by matching the socket's inode
against every process's open descriptors (/proc/net/tcp and /proc/PID/fd). What this cannot find, and the
report says so: clients on other hosts, clients over a unix socket (the client's end names no server), and
processes of other users when dbdiag is not root (their descriptors are not readable). A server that counts
per database (PostgreSQL) names each session's client port: a process connected to another database is left
out (a role that cannot see other roles' sessions cannot tell, and keeps them: the report says how many).

One look costs ~35 ms of this process's CPU with 200 processes (measured here): a watch looks once a window.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Collection
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class Peers:
    """What one look found: the client PIDs (with their command names), and connections whose process could
    not be read (another user's, without root)."""

    pids: tuple[int, ...]
    names: tuple[str, ...]
    unreadable: int
    unmatched: int = 0  # connections kept whose session the server did not show (another role's, hidden)
    elsewhere: int = 0  # connections left out: the server shows them as sessions of another database

    def to_dict(self) -> dict[str, object]:
        return {"pids": list(self.pids), "names": list(self.names), "unreadable": self.unreadable,
                "unmatched": self.unmatched, "elsewhere": self.elsewhere}


def server_addresses(host: str | None) -> frozenset[str]:
    """The IP addresses a client's socket names for ``host`` (a name resolves to every address it has;
    a loopback name to both loopback addresses). Empty for a unix socket or a name that does not resolve."""
    if not host or host.startswith("/"):
        return frozenset()
    out = set()
    try:
        for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP):
            out.add(str(info[4][0]))
    except OSError:
        return frozenset()
    if out & {"127.0.0.1", "::1"}:
        out |= {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
    return frozenset(out)


def own_tree() -> set[int]:
    """This process and every process under it (dbdiag's collectors: their sessions are not the load's)."""
    try:
        me = psutil.Process(os.getpid())
        return {me.pid, *(c.pid for c in me.children(recursive=True))}
    except psutil.Error:
        return {os.getpid()}


def connected_clients(addresses: Collection[str], port: int, exclude: Collection[int] = (),
                      ports: tuple[Collection[int], Collection[int]] | None = None) -> Peers:
    """The processes of this host with an open TCP connection to ``port`` at one of ``addresses``, but those
    in ``exclude`` (dbdiag's own, the server's). ``ports``: (the client ports of the watched database's
    sessions, those of the server's other sessions) as the server shows them: a connection from a port of the
    second is not the watched load's; one from neither is kept and counted as unmatched."""
    if not addresses:
        return Peers((), (), 0)
    pids: set[int] = set()
    unreadable = unmatched = elsewhere = 0
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return Peers((), (), 0)
    for c in conns:
        if not c.raddr or c.raddr.port != port or c.raddr.ip not in addresses:
            continue
        if c.status != psutil.CONN_ESTABLISHED:
            continue
        if c.pid is not None and c.pid in exclude:
            continue
        local_port = getattr(c.laddr, "port", None)  # an established TCP connection always has one
        if ports is not None and local_port in ports[1] and local_port not in ports[0]:
            elsewhere += 1
            continue
        if c.pid is None:
            unreadable += 1
            continue
        pids.add(c.pid)
        if ports is not None and local_port not in ports[0]:
            unmatched += 1
    names = []
    for pid in sorted(pids):
        try:
            names.append(psutil.Process(pid).name())
        except psutil.Error:
            names.append("?")
    return Peers(tuple(sorted(pids)), tuple(names), unreadable, unmatched, elsewhere)
