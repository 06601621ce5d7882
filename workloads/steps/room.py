"""Room for the clients: a step never starts more clients than the server takes.

Before a sweep (:func:`check_room`) the server's connection limits are read
(:meth:`~diag.core.engines.base.Engine.connection_room`: max_connections less the
slots reserved for superusers and the connections in use; max_user_connections
or a role's CONNECTION LIMIT where set) and a client count that does not fit is
refused with one line. Other sessions may take slots between that check and the
step, so the clients' own refusals (errors of kind ``connection_limit``) are
gathered too (:func:`refused_line`): the step does not start with the clients
that got in, and the run stops with the same kind of line.
"""

from __future__ import annotations

import resource

from diag.core.db import Session, own_app_name
from diag.core.engines.base import ConnectionRoom
from diag.core.errors import DbError, DiagError
from diag.core.targets import Target

LIMIT_KIND = "connection_limit"   # DbError.kind of a connection the server refused at its limit
# File descriptors the driver process holds per client (its pipe end, the process sentinel, and the
# multiprocessing bookkeeping: measured 609 for 200 clients) and for everything else (bundle, collectors).
FDS_PER_CLIENT = 3
FDS_BASE = 256


class TooManyClients(DiagError):
    """More clients than the server's connection limit lets in (exit code 2: fix the options or the server)."""


def _fit(room: ConnectionRoom) -> str:
    return f"{room.free} client{' fits' if room.free == 1 else 's fit'}"


def _advice(room: ConnectionRoom) -> str:
    return (f"run -c {room.free} or fewer, or " if room.free else "") + f"raise {room.setting}"


def too_many_line(label: str, n: int, room: ConnectionRoom) -> str:
    """One line: the setting, its value and what uses it, the count that fits, what to do."""
    return f"{label}: {n} clients do not fit: {room.text()}, so {_fit(room)}; {_advice(room)}"


def read_room(s: Session) -> ConnectionRoom:
    """The server's room for this session's user (the asking session not counted)."""
    return s.dbms.connection_room(s.query)


def check_room(s: Session, target: Target, n: int) -> ConnectionRoom | None:
    """Raise :class:`TooManyClients` when ``n`` clients do not fit beside what is connected now (``s``, the
    session asking, closes before the clients open); the room otherwise, None when the server would not say
    (a catalog this user cannot read: the clients' own refusals are still gathered into one line)."""
    try:
        room = read_room(s)
    except DbError:
        return None
    if n > room.free:
        raise TooManyClients(too_many_line(target.label, n, room))
    return room


def ensure_fds(n: int) -> None:
    """Make room for ``n`` clients' file descriptors in this process: raise the soft RLIMIT_NOFILE up to the
    hard limit when it is short (as servers do at start); :class:`TooManyClients` when the hard limit is."""
    need = FDS_BASE + FDS_PER_CLIENT * n
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    if hard != resource.RLIM_INFINITY and hard < need:
        raise TooManyClients(f"{n} clients need about {need} open files in the driver; its limit is {hard} "
                             f"(ulimit -Hn): run -c {max((hard - FDS_BASE) // FDS_PER_CLIENT, 1)} or fewer, "
                             "or raise the limit")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def refused_line(target: Target, n: int, refused: int, message: str) -> str:
    """The line for a step whose clients the server refused at its limit (read after they are gone):
    how many were refused and why, the setting and the count that fits."""
    head = f"{target.label}: the server refused {refused} of {n} clients ({message.split(': ', 1)[-1]})"
    try:
        with Session(target, application_name=own_app_name("room")) as s:
            room = read_room(s)
    except DbError as e:
        return f"{head}; its connection limit could not be read ({e})"
    return f"{head}: {room.text()}, so {_fit(room)}; {_advice(room)}"
