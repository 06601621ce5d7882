"""Series ``pg_blocking--LABEL`` / ``my_blocking--LABEL``: who blocks whom, one record per sampling window.

The blocking samplers (collectors/pg/blocking.py, collectors/mysql/blocking.py) look at the sessions waiting
for a lock at the wait-sampling rate and, for each, at the sessions that block it. A window's record::

    {"t": 1764590000.0, "ticks": 10, "window_s": 1.0, "waiting_s": 1.8, "unattributed_s": 0.0,
     "unattributed": "", "blockers": [{"pid": 4711, "user": "app", "client": "psql 127.0.0.1",
       "state": "idle in transaction", "statement": "LOCK TABLE t IN EXCLUSIVE MODE", "xact_s": 2.4,
       "state_s": 2.3, "first_t": 1764589999.1, "last_t": 1764590000.0, "ticks": 10, "blocked_s": 1.8,
       "blocked": [4712, 4713], "lock": "RowExclusiveLock on relation t (held: ExclusiveLock)",
       "waits_for": [], "longest_wait_s": 2.2}]}

Times: ``t``, ``first_t``, ``last_t`` are Unix seconds (the first and last sample that saw the session
blocking); durations in seconds. ``waiting_s`` estimates the waiters' time in lock waits this window
(each waiter seen in a sample counts the sample's period); ``blocked_s`` the part of it behind that
blocker (a waiter behind two blockers counts for both); ``unattributed_s`` the part with no blocker seen,
``unattributed`` why, when known. ``waits_for``: the sessions that block this blocker itself (a chain).
``longest_wait_s``: the longest wait of its waiters as the server dates it (lock wait start, statement
time), None when the server does not say. ``chains`` (``"4713 -> 4712 -> 4711": 0.8``, waiter first, the
holder last): each chain seen within one sample, with the seconds its waiter spent in it this window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from diag.core.schema.base import NUM, BundleFormatError, as_object, get_field

_STR = ("user", "client", "state", "statement", "lock")


def _int_list(d: Any, key: str, where: str) -> tuple[int, ...]:
    items = get_field(d, key, (list,), where, [])
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in items):
        raise BundleFormatError(f"{where}: {key} should be a list of integers")
    return tuple(items)


def _chains(d: Any, where: str) -> dict[str, float]:
    got = get_field(d, "chains", (dict,), where, {})
    if not all(isinstance(v, NUM) and not isinstance(v, bool) for v in got.values()):
        raise BundleFormatError(f"{where}: chains should map each chain to seconds")
    return dict(got)


@dataclass(frozen=True)
class Blocker:
    """One session seen blocking others in a window (``pid``: backend PID / MySQL thread id)."""

    pid: int
    user: str = ""
    client: str = ""  # application name and client address (PostgreSQL), host (MySQL)
    state: str = ""  # "idle in transaction", "active", MySQL "Sleep", "Query: Updating"...
    statement: str = ""  # its current statement, or the last one when idle (first 200 characters)
    xact_s: float | None = None  # age of its transaction at the last sample (s), when the server says
    state_s: float | None = None  # time in its current state at the last sample (s)
    first_t: float = 0.0
    last_t: float = 0.0
    ticks: int = 0  # samples that saw it blocking
    blocked_s: float = 0.0
    blocked: tuple[int, ...] = ()
    lock: str = ""  # what its waiters want, and what it holds when the server says
    waits_for: tuple[int, ...] = ()
    longest_wait_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, **{k: getattr(self, k) for k in _STR}, "xact_s": self.xact_s,
                "state_s": self.state_s, "first_t": self.first_t, "last_t": self.last_t, "ticks": self.ticks,
                "blocked_s": self.blocked_s, "blocked": list(self.blocked), "waits_for": list(self.waits_for),
                "longest_wait_s": self.longest_wait_s}

    @classmethod
    def from_dict(cls, d: Any, where: str = "blocker") -> Blocker:
        d = as_object(d, where)
        return cls(pid=get_field(d, "pid", (int,), where, required=True),
                   **{k: get_field(d, k, (str,), where, "") for k in _STR},
                   xact_s=get_field(d, "xact_s", NUM, where), state_s=get_field(d, "state_s", NUM, where),
                   first_t=get_field(d, "first_t", NUM, where, 0.0), last_t=get_field(d, "last_t", NUM, where, 0.0),
                   ticks=get_field(d, "ticks", (int,), where, 0), blocked_s=get_field(d, "blocked_s", NUM, where, 0.0),
                   blocked=_int_list(d, "blocked", where), waits_for=_int_list(d, "waits_for", where),
                   longest_wait_s=get_field(d, "longest_wait_s", NUM, where))


@dataclass(frozen=True)
class BlockingWindow:
    """One record of a blocking series (see the module docstring)."""

    t: float
    ticks: int = 0
    window_s: float = 0.0
    waiting_s: float = 0.0
    unattributed_s: float = 0.0
    unattributed: str = ""
    blockers: tuple[Blocker, ...] = ()
    parts_off: Mapping[str, str] = field(default_factory=dict)  # part -> why, switched off since the last record
    chains: Mapping[str, float] = field(default_factory=dict)  # "12 -> 11 -> 10" (waiter first) -> seconds

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"t": self.t, "ticks": self.ticks, "window_s": self.window_s,
                             "waiting_s": self.waiting_s, "unattributed_s": self.unattributed_s,
                             "unattributed": self.unattributed, "blockers": [b.to_dict() for b in self.blockers]}
        if self.chains:
            d["chains"] = dict(self.chains)
        if self.parts_off:
            d["parts_off"] = dict(self.parts_off)
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "blocking record") -> BlockingWindow:
        d = as_object(d, where)
        blockers = get_field(d, "blockers", (list,), where, [])
        return cls(t=get_field(d, "t", NUM, where, required=True), ticks=get_field(d, "ticks", (int,), where, 0),
                   window_s=get_field(d, "window_s", NUM, where, 0.0),
                   waiting_s=get_field(d, "waiting_s", NUM, where, 0.0),
                   unattributed_s=get_field(d, "unattributed_s", NUM, where, 0.0),
                   unattributed=get_field(d, "unattributed", (str,), where, ""),
                   blockers=tuple(Blocker.from_dict(b, f"{where}: blockers[{i}]") for i, b in enumerate(blockers)),
                   parts_off=get_field(d, "parts_off", (dict,), where, {}), chains=_chains(d, where))
