"""Who blocked whom during a step: the blocking series folded per session, as evidence of lock_contention.

Source: series ``<Engine.blocking_series>--<label>`` (:mod:`diag.core.schema.blocking`, written by the
blocking samplers at the wait-sampling rate). A session's blocking time is from the first to the last
sample that saw it blocking, inside the step's measured window (so a hold that began in the warmup counts
from the step's start); the blocked sessions' waiting time is the samplers' estimate (each sample
stands for the time since the previous one), summed over the waiters it blocked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from diag.core.bundle import Bundle
from diag.core.schema.blocking import Blocker, BlockingWindow
from reports.model.steps import Step, num, series_in_window

SHOWN_BLOCKERS = 3
# Below this share of the waiting behind heads of chains, the worst head did not block alone: the lock
# passed between sessions (a hot row the workload's own transactions queue on), and naming one session,
# or its first-to-last time, as "the" blocker would mislead. Measured (tests/integration): planted outside
# blockers head 97-100% of the waiting; 4 clients updating one row, the worst head 53-55%.
SOLE_HEAD_SHARE = 0.7
CHAIN_PATHS = 3
STATEMENT_SHOWN = 120


@dataclass
class BlockerInStep:
    """One session's blocking over a step, merged from its window records (times Unix s, durations s)."""

    last: Blocker  # the latest record's view of it: who, state, statement
    first_t: float
    last_t: float
    blocked_s: float = 0.0
    blocked: set[int] = field(default_factory=set)
    waits_for: set[int] = field(default_factory=set)
    longest_wait_s: float | None = None
    lock_s: dict[str, float] = field(default_factory=dict)  # lock text -> blocked_s under it
    behind_s: float = 0.0  # waiters' seconds in chains it heads (directly or through other waiters)
    behind: set[int] = field(default_factory=set)  # the waiters of those chains
    waiter_s: dict[int, float] = field(default_factory=dict)  # each of them: seconds behind it (sampled)

    @property
    def pid(self) -> int:
        return self.last.pid

    @property
    def span_s(self) -> float:
        return max(0.0, self.last_t - self.first_t)

    @property
    def lock(self) -> str:
        return max(self.lock_s.items(), key=lambda kv: kv[1])[0] if self.lock_s else ""


@dataclass(frozen=True)
class StepBlocking:
    """A step's blocking: its blockers, worst (most waiting behind it) first, and the waits nobody was seen
    holding."""

    blockers: tuple[BlockerInStep, ...]
    waiting_s: float
    unattributed_s: float
    unattributed: str
    chain_s: dict[str, float] = field(default_factory=dict)  # "12 -> 11 -> 10" -> seconds, as sampled


def step_blocking(b: Bundle, step: Step) -> StepBlocking | None:
    """The blocking seen during ``step``, or None when no blocking sampler ran for its target (computed once
    per bundle and step: lock_contention, the limit and the report section all ask)."""
    return b.memo(("step_blocking", step.target, step.workload, step.clients, step.t0, step.t1),
                  lambda: _step_blocking(b, step))


def _step_blocking(b: Bundle, step: Step) -> StepBlocking | None:
    name = step.engine.blocking_series
    raw = series_in_window(b, name, step) if name else []
    if not raw:
        return None
    where = f"series/{name}--{step.target}.jsonl"
    merged: dict[int, BlockerInStep] = {}
    waiting = unattributed = 0.0
    why: dict[str, float] = {}
    chain_s: dict[str, float] = {}
    for i, r in enumerate(raw):
        w = BlockingWindow.from_dict(r, f"{where}: record {i}")
        waiting += w.waiting_s
        unattributed += w.unattributed_s
        for c, secs in w.chains.items():
            chain_s[c] = chain_s.get(c, 0.0) + secs
        if w.unattributed:
            why[w.unattributed] = why.get(w.unattributed, 0.0) + w.unattributed_s
        for bl in w.blockers:
            first, last = max(bl.first_t, step.t0), min(bl.last_t, step.t1)
            if last < first:
                continue  # seen blocking only outside the measured window
            m = merged.get(bl.pid)
            if m is None:
                m = merged[bl.pid] = BlockerInStep(bl, first, last)
            m.first_t, m.last_t = min(m.first_t, first), max(m.last_t, last)
            if bl.last_t >= m.last.last_t and (bl.state or bl.statement or not m.last.state):
                m.last = bl  # the latest view of it, unless that one saw less (it had just gone)
            m.blocked_s += bl.blocked_s
            m.blocked.update(bl.blocked)
            m.waits_for.update(bl.waits_for)
            if bl.longest_wait_s is not None:
                m.longest_wait_s = max(m.longest_wait_s or 0.0, bl.longest_wait_s)
            m.lock_s[bl.lock] = m.lock_s.get(bl.lock, 0.0) + bl.blocked_s
    _heads(merged, chain_s)
    # the session at the head of the chains that cost the most waiting first: in a queue for one row the
    # first waiter blocks the rest, but the session holding the row is the one to name
    order = sorted(merged.values(), key=lambda m: (-m.behind_s, -m.blocked_s, m.pid))
    reason = max(why.items(), key=lambda kv: kv[1])[0] if why else ""
    return StepBlocking(tuple(order), waiting, unattributed, reason, chain_s)


def _heads(merged: dict[int, BlockerInStep], chain_s: dict[str, float]) -> None:
    """Each blocker's waiting behind it through whole chains: a chain's seconds count for its head (its last
    session). Records without chains: a blocker that waited for nobody heads its direct waiters."""
    if not chain_s:
        for m in merged.values():
            if not m.waits_for:
                m.behind_s, m.behind = m.blocked_s, set(m.blocked)
        return
    for c, secs in chain_s.items():
        pids = [int(p) for p in c.split(" -> ")]
        head = merged.get(pids[-1])
        if head is not None:
            head.behind_s += secs
            head.behind.add(pids[0])
            head.waiter_s[pids[0]] = head.waiter_s.get(pids[0], 0.0) + secs


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= STATEMENT_SHOWN else text[: STATEMENT_SHOWN - 3] + "..."


def describe(m: BlockerInStep) -> str:
    """"pid 4711 (user app, psql (127.0.0.1)): idle in transaction, transaction open 2.4 s; statement: ..."."""
    s = m.last
    who = ", ".join(x for x in (f"user {s.user}" if s.user else "", s.client) if x)
    out = f"pid {s.pid}" + (f" ({who})" if who else "")
    state = s.state or "state not visible to this user"
    out += f": {state}"
    if s.xact_s is not None:
        out += f", transaction open {s.xact_s:.1f} s"
    out += f"; statement: {_short(s.statement)}" if s.statement else "; statement not known"
    return out


def chains(sb: StepBlocking) -> str:
    """Blocking chains, waiter first, the longest-lasting first: "4713 -> 4712 -> 4711 (idle in transaction)
    1.4 s"; several joined by "; ". Each chain as one sample saw it, with the seconds its waiter spent in it."""
    if not sb.chain_s:
        return _union_chains(sb)
    by_pid = {m.pid: m for m in sb.blockers}
    paths = []
    for c, secs in sorted(sb.chain_s.items(), key=lambda kv: (-kv[1], kv[0])):
        root = by_pid.get(int(c.rsplit(" -> ", 1)[-1]))
        tail = f" ({root.last.state})" if root is not None and root.last.state else ""
        paths.append(f"{c}{tail} {secs:.1f} s")
    if len(paths) > CHAIN_PATHS:
        return "; ".join(paths[:CHAIN_PATHS]) + f"; and {len(paths) - CHAIN_PATHS} more"
    return "; ".join(paths)


def _union_chains(sb: StepBlocking) -> str:
    """Chains from each blocker's waiters and the sessions it waited for over the step (records written
    before they carried their own ``chains``): links seen at different moments may be joined."""
    by_pid = {m.pid: m for m in sb.blockers}
    paths: list[str] = []
    for m in sb.blockers:
        for w in sorted(m.blocked - set(by_pid)):  # start from waiters that block nobody
            path, cur = [w, m.pid], m
            while cur.waits_for and len(path) < 8:
                nxt = min(cur.waits_for)
                if nxt in path:  # a cycle: a deadlock the server will break
                    path.append(nxt)
                    break
                path.append(nxt)
                if nxt not in by_pid:
                    break
                cur = by_pid[nxt]
            root = by_pid.get(path[-1])
            tail = f" ({root.last.state})" if root is not None and root.last.state else ""
            text = " -> ".join(str(p) for p in path) + tail
            if text not in paths:
                paths.append(text)
    if len(paths) > CHAIN_PATHS:
        return "; ".join(paths[:CHAIN_PATHS]) + f"; and {len(paths) - CHAIN_PATHS} more"
    return "; ".join(paths)


def in_turn(sb: StepBlocking) -> tuple[int, float]:
    """(sessions heading chains, the worst head's share of the waiting behind heads); share 1.0 alone."""
    heads = [m for m in sb.blockers if m.behind_s > 0]
    total = sum(m.behind_s for m in heads)
    if not heads or total <= 0:
        return len(heads), 1.0
    return len(heads), sb.blockers[0].behind_s / total


def blocking_evidence(b: Bundle, step: Step) -> dict[str, Any]:
    """lock_contention's evidence of who blocked: the worst blocker, how long, the chain ({} without a sampler)."""
    sb = step_blocking(b, step)
    if sb is None:
        return {}
    if not sb.blockers:
        why = sb.unattributed or "no session was seen holding the lock the waiters wanted"
        return {"blocker": f"none seen: {why}", "lock_wait_s": num(sb.waiting_s, 2)}
    top = sb.blockers[0]
    ev: dict[str, Any] = {
        "blocker": describe(top),
        "blocker_lock": top.lock,
        "blocked_for_s": num(top.span_s, 2),
        "blocked_sessions": len(top.behind or top.blocked),
        "blocked_wait_s": num(top.behind_s or top.blocked_s, 2),
        "blocking_chain": chains(sb),
    }
    if top.waiter_s:  # the sampled time of its longest-waiting victim: blocked_for_s misses up to a sample
        ev["longest_blocked_s"] = num(max(top.waiter_s.values()), 2)  # period at each end, this does not
    if top.longest_wait_s is not None:
        ev["longest_wait_s"] = num(top.longest_wait_s, 2)
    heads, share = in_turn(sb)
    if heads > 1:
        ev["head_share_pct"] = num(100 * share)
    if share < SOLE_HEAD_SHARE:
        ev["blocker_note"] = (f"the lock passed between {heads} sessions, each holding it in turn (transactions "
                              f"queueing on the same rows); the one named heads {100 * share:.0f}% of the waiting, "
                              "and its blocked_for_s spans its first to last turn")
    if len(sb.blockers) > 1:
        ev["blocking_sessions"] = len(sb.blockers)
        ev["other_blockers"] = "; ".join(f"{describe(m)} (blocked {m.span_s:.1f} s, {m.blocked_s:.1f} s waited)"
                                         for m in sb.blockers[1:SHOWN_BLOCKERS])
    if sb.unattributed_s > 0:
        ev["lock_wait_no_blocker_s"] = num(sb.unattributed_s, 2)
        if sb.unattributed:
            ev["lock_wait_no_blocker"] = sb.unattributed
    return ev


def title_part(b: Bundle, step: Step) -> str:
    """", blocked by pid 4711 (idle in transaction) for 2.4 s" for a finding's title ("" when none was seen)."""
    sb = step_blocking(b, step)
    if sb is None or not sb.blockers:
        return ""
    top = sb.blockers[0]
    heads, share = in_turn(sb)
    if share < SOLE_HEAD_SHARE:
        return f", blocked in turn by {heads} sessions (most by pid {top.pid}: {100 * share:.0f}% of the waiting)"
    state = f" ({top.last.state})" if top.last.state else ""
    # the sampled time of its longest-waiting victim where known: first-to-last misses up to a sample
    # period at each end, and a busy machine stretches the periods (measured: 0.2 s first-to-last for a
    # 1.2 s hold seen by two InnoDB lock-table reads 0.6 s apart, 1.15 s sampled)
    held = max(top.waiter_s.values()) if top.waiter_s else top.span_s
    return f", blocked by pid {top.pid}{state} for {held:.1f} s"


def advice_part(b: Bundle, step: Step) -> str:
    """A sentence for lock_contention's advice when the worst blocker sat idle holding the lock ("" otherwise)."""
    sb = step_blocking(b, step)
    if sb is None or not sb.blockers:
        return ""
    top = sb.blockers[0]
    state = top.last.state.lower()
    if "idle in transaction" not in state and state != "sleep":
        return ""
    return (f" The worst blocker, pid {top.pid}, was idle while it held the lock: the waits lasted as long as its "
            "client kept its transaction (or LOCK TABLES) open, not as long as any statement ran. Find that "
            "client by its user and address above and have it end the transaction sooner; a server-side "
            "timeout for idle transactions bounds the damage.")
