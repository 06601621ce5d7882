"""Who blocks whom, for every engine: the samples of one window folded into one blocking record.

The engines' blocking samplers (collectors/pg/blocking.py, collectors/mysql/blocking.py) each find, per
sample, the sessions waiting for a lock (:class:`Wait`: the waiter, the sessions blocking it, what it wants)
and what the blockers are doing (:class:`Seen`). :class:`WindowBuilder` adds the samples of one window and
makes the record of :class:`diag.core.schema.blocking.BlockingWindow` (the series' typed record).

A waiter counts the time since the previous sample of its kind (``period_s``, seconds) as time spent
waiting, so the waiters' total waiting time is estimated the way an ASH profile estimates it; the server's
own wait start (``wait_s``) is kept beside it as the longest wait seen.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from collectors.base import Metric
from collectors.lockgate import LockGate
from collectors.sampling import WINDOW_S
from diag.core.schema.blocking import Blocker, BlockingWindow

STATEMENT_CHARS = 200  # the SQL files cut statements to this many characters too
MAX_BLOCKERS = 20  # per record: a pile-up of hundreds of sessions keeps its 20 worst blockers
MAX_CHAINS = 10  # per record, the longest-lasting
MAX_DEPTH = 8  # sessions in one chain


@dataclass(frozen=True)
class Seen:
    """A session as one sample saw it (``xact_s``/``state_s``: seconds, None when the server does not say)."""

    pid: int
    user: str = ""
    client: str = ""
    state: str = ""
    statement: str = ""
    xact_s: float | None = None
    state_s: float | None = None


@dataclass(frozen=True)
class Wait:
    """One session waiting for a lock in one sample; ``blockers`` empty when no blocker was seen."""

    pid: int
    blockers: tuple[int, ...]
    lock: str
    period_s: float
    wait_s: float | None = None
    why_unattributed: str = ""  # when ``blockers`` is empty and the sampler knows why


@dataclass
class _Acc:
    first_t: float
    last_t: float = 0.0
    ticks: int = 0
    blocked_s: float = 0.0
    blocked: set[int] = field(default_factory=set)
    locks: Counter[str] = field(default_factory=Counter)
    waits_for: set[int] = field(default_factory=set)
    longest_wait_s: float | None = None
    seen: Seen | None = None


def blocking_metrics(ticks: str, who: str, since: str, blockers: str) -> tuple[Metric, ...]:
    """The metrics of a blocking sampler's records, in the engine's words: what a tick reads (``ticks``), what
    waits (``who``: "sessions", "threads"), the sample a waiter's time runs from (``since``), the fields of
    each blocker (``blockers``)."""
    return (
        Metric("ticks", "count", "gauge", ticks),
        Metric("window_s", "s", "gauge", "length of the window"),
        Metric("waiting_s", "s", "gauge", f"time the {who} spent waiting for locks this window (sum over "
               f"{who}, each sample counting the time since {since})"),
        Metric("unattributed_s", "s", "gauge", "part of waiting_s with no blocker seen"),
        Metric("blockers", who, "gauge", blockers),
        Metric("chains", "s", "gauge", "each blocking chain seen in one sample (waiter first, the holder last) -> "
               "seconds its waiter spent in it this window"),
    )


def _num(v: float | None, digits: int = 3) -> float | None:
    return None if v is None else round(float(v), digits)


class WindowBuilder:
    """The samples of one window; :meth:`record` makes its series record."""

    def __init__(self, statement_text: Callable[[str], str] = str) -> None:
        """``statement_text``: what of a blocker's statement text is stored (CollectorContext.statement_text)."""
        self.statement_text = statement_text
        self.t0 = time.monotonic()
        self.ticks = 0
        self.waiting_s = 0.0
        self.unattributed_s = 0.0
        self.why: Counter[str] = Counter()
        self.acc: dict[int, _Acc] = {}
        self.chains: dict[str, float] = {}  # "12 -> 11 -> 10" -> seconds the waiter spent in that chain

    def add(self, t: float, waits: Iterable[Wait], seen: Mapping[int, Seen]) -> None:
        """One sample at Unix time ``t``: its waits, and the sessions it saw (by pid)."""
        self.ticks += 1
        waits = list(waits)
        counted: set[int] = set()
        for w in waits:
            self.waiting_s += w.period_s
            if not w.blockers:
                self.unattributed_s += w.period_s
                if w.why_unattributed:
                    self.why[w.why_unattributed] += 1
                continue
            for pid in w.blockers:
                a = self.acc.setdefault(pid, _Acc(first_t=t))
                if pid not in counted:
                    a.ticks += 1
                    counted.add(pid)
                a.last_t = t
                a.blocked_s += w.period_s
                a.blocked.add(w.pid)
                a.locks[w.lock] += 1
                if w.wait_s is not None:
                    a.longest_wait_s = max(a.longest_wait_s or 0.0, w.wait_s)
                a.seen = seen.get(pid) or a.seen
        for w in waits:  # a blocker that waits itself: the next link of a chain
            if w.pid in self.acc:
                self.acc[w.pid].waits_for.update(w.blockers)
        for chain, period in tick_chains(waits):
            self.chains[chain] = self.chains.get(chain, 0.0) + period

    def record(self, t: float, parts_off: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The window's record (``t``: Unix s), worst blockers first."""
        blockers = []
        for pid, a in sorted(self.acc.items(), key=lambda kv: -kv[1].blocked_s)[:MAX_BLOCKERS]:
            s = a.seen or Seen(pid)
            blockers.append(Blocker(
                pid=pid, user=s.user, client=s.client, state=s.state,
                statement=self.statement_text(s.statement)[:STATEMENT_CHARS],
                xact_s=_num(s.xact_s), state_s=_num(s.state_s), first_t=round(a.first_t, 3),
                last_t=round(a.last_t, 3), ticks=a.ticks, blocked_s=round(a.blocked_s, 3),
                blocked=tuple(sorted(a.blocked)), lock=a.locks.most_common(1)[0][0] if a.locks else "",
                waits_for=tuple(sorted(a.waits_for - {pid})), longest_wait_s=_num(a.longest_wait_s)))
        return BlockingWindow(t=t, ticks=self.ticks, window_s=round(time.monotonic() - self.t0, 3),
                              waiting_s=round(self.waiting_s, 3), unattributed_s=round(self.unattributed_s, 3),
                              unattributed=self.why.most_common(1)[0][0] if self.why else "",
                              blockers=tuple(blockers), parts_off=dict(parts_off or {}),
                              chains={c: round(v, 3) for c, v in
                                      sorted(self.chains.items(), key=lambda kv: -kv[1])[:MAX_CHAINS]}).to_dict()


def tick_chains(waits: list[Wait]) -> list[tuple[str, float]]:
    """The blocking chain of each waiter in one sample, with its period: from the waiter along the sessions
    blocking it to one that waits for nobody (or back into a cycle, a deadlock the server will break).
    A waiter behind several sessions (a queue: InnoDB names the holder and every waiter ahead) gets its
    longest chain, the queue in order, so its waiting counts once, for one head. Chains of one sample only:
    links seen at different moments of a window are never joined."""
    blocked_by = {w.pid: w.blockers for w in waits if w.blockers}
    out: list[tuple[str, float]] = []
    for w in waits:
        if not w.blockers:
            continue
        stack: list[list[int]] = [[w.pid, b] for b in w.blockers]
        best: list[int] = []
        explored = 0
        while stack and explored < 16 * MAX_CHAINS:  # a bound for a pile-up of hundreds of sessions
            path = stack.pop()
            explored += 1
            last = path[-1]
            nxt = blocked_by.get(last, ())
            if not nxt or last in path[:-1] or len(path) >= MAX_DEPTH:
                best = max(best, path, key=lambda p: (len(p), [-x for x in p]))
                continue
            stack.extend([*path, b] for b in nxt)
        out.append((" -> ".join(str(p) for p in best), w.period_s))
    return out


def catch_up(waits: list[Wait], gap_s: float) -> list[Wait]:
    """The waits of the first read after ticks skipped on the lock gate's word (:mod:`collectors.lockgate`),
    each counting the time it has waited by the server's clock (``wait_s``; its period when the server says 0 or
    nothing), at most ``gap_s``: the gate opens a tick or more after a wait began, the ticks in between said
    nobody waited, and a slowed quiet tick (collectors.lockgate.QUIET_TICKS) would overstate a young wait.
    ``gap_s``: :func:`catch_up_gap`; the cap matters, InnoDB dates a lock wait in whole seconds."""
    return [replace(w, period_s=min(w.wait_s if w.wait_s else w.period_s, gap_s)) for w in waits]


def catch_up_gap(gate: LockGate | None, now: float, last_read: float | None) -> float:
    """The most a wait first seen at ``now`` (monotonic s) after skipped ticks can have waited unseen: back to
    the previous read of this kind (``last_read``) or to the wait sampler's last tick that saw no lock wait,
    whichever is later, and at most a window."""
    gaps = [WINDOW_S]
    if last_read is not None:
        gaps.append(now - last_read)
    since = gate.since_s(now) if gate is not None else None
    if since is not None:
        gaps.append(since)
    return max(0.0, min(gaps))


def text(v: Any) -> str:
    """A column as text (MySQL drivers may return bytes; NULL is "")."""
    if v is None:
        return ""
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def seconds(v: Any) -> float | None:
    """A column of seconds (numeric, Decimal) as float; None for NULL or a negative clock skew."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if f >= 0 else None
