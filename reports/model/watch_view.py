"""What a report says of a watch (``dbdiag watch``): its windows, the client's figures beside the server's,
the phases, and whether any load was seen at all. Reads the bundle only.

* A window saw load when the server counted at least :data:`MIN_TPS` transactions/s in it
  beyond dbdiag's own, or a workload session was seen running a statement.
* Phases: neighbouring windows with the same limit and throughput within
  :data:`PHASE_TPS_RATIO` of the phase's first window form one phase.
* The client's figure and the server's disagree when the server's transactions/s over
  the command's lifetime differ from the tool's own by more than the counting error:
  dbdiag's own reads (estimated) plus :data:`DISAGREE_SHARE` for the command's start-up
  and exit inside its lifetime and its set-up statements (pgbench's scale check).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from diag.core.bundle import Bundle, Memo
from diag.core.schema import ResultRow
from diag.core.schema.watch import WatchWindow
from reports.model.series import group_deltas

# A window shorter than this share of the longest (the one cut by the command's end, holding PostgreSQL's
# deferred counter flushes of the sessions that just ended) counts in the totals, not as a throughput sample.
SAMPLE_SHARE = 0.5
MIN_TPS = 2.0  # transactions/s: above what dbdiag's own reads can leave after their estimate
PHASE_TPS_RATIO = 0.25  # a window whose tps differs by more than 25% from its phase's start opens a new one
DISAGREE_SHARE = 0.10


def watch_rows(b: Bundle) -> list[ResultRow]:
    """The result rows of a watch's windows, in order ([] for a bundle that is not a watch)."""
    return [r for r in b.rows if r.source == "server"]


def _part(r: ResultRow) -> WatchWindow:
    """The watch part of a window's row (empty for a row without one)."""
    return r.watch or WatchWindow()


def _tps(r: ResultRow) -> float:
    return float(r.tps or 0)


def _secs(r: ResultRow) -> float:
    return float(r.measured_s or 0)


def is_watch(b: Bundle) -> bool:
    return b.run.get("kind") == "watch"


def no_load_seen(b: Bundle) -> str:
    """Why the watch saw no load ("" when it saw some): every window under MIN_TPS on every target."""
    rows = watch_rows(b)
    if not rows:
        return ""
    if any(_tps(r) >= MIN_TPS for r in rows):
        return ""
    secs = sum(_secs(r) for r in rows)
    labels = sorted({r.target for r in rows})
    return (f"the server counted no transactions beyond dbdiag's own reads in {secs:.0f} s of watching "
            f"({', '.join(labels)})")


@dataclass(frozen=True)
class Phase:
    """Neighbouring windows of one target with the same limit and similar throughput."""

    target: str
    first: int
    last: int
    t0: float
    t1: float
    limit: str
    tps: float

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "windows": f"{self.first}-{self.last}" if self.last > self.first
                else str(self.first), "t0": self.t0, "t1": self.t1, "limit": self.limit, "tps": round(self.tps, 1)}


def phases(rows: Sequence[ResultRow], limits: Mapping[tuple[str, str], str]) -> list[Phase]:
    """The phases of each target's windows; ``limits``: (target, workload) -> the window's limit kind ("idle"
    for a window without load)."""
    out: list[Phase] = []
    by_target: dict[str, list[ResultRow]] = {}
    for r in rows:
        by_target.setdefault(r.target, []).append(r)

    def limit(r: ResultRow) -> str:
        return "idle" if _tps(r) < MIN_TPS else limits.get((r.target, r.workload), "")

    for target, rs in by_target.items():
        cur: list[ResultRow] = []
        for r in rs:
            if cur:
                base = _tps(cur[0])
                similar = abs(_tps(r) - base) <= PHASE_TPS_RATIO * max(base, MIN_TPS)
                if limit(r) == limit(cur[0]) and similar:
                    cur.append(r)
                    continue
                out.append(_phase(target, cur, limit(cur[0])))
            cur = [r]
        if cur:
            out.append(_phase(target, cur, limit(cur[0])))
    return out


def _phase(target: str, rs: list[ResultRow], limit: str) -> Phase:
    secs = sum(_secs(r) for r in rs)
    txn = sum(float(r.transactions or 0) for r in rs)
    return Phase(target, _part(rs[0]).window or 0, _part(rs[-1]).window or 0, float(rs[0].t_start or 0),
                 float(rs[-1].t_end or 0), limit or "unknown", txn / secs if secs > 0 else 0.0)


@dataclass(frozen=True)
class ClientVsServer:
    """The load command's own transactions/s beside the server's over the windows it ran in."""

    target: str
    tool: str
    client_tps: float
    server_tps: float
    allowed: float  # the counting error, as a share of the client's figure
    detail: str

    @property
    def gap(self) -> float:
        return (self.server_tps - self.client_tps) / self.client_tps if self.client_tps > 0 else 0.0

    @property
    def disagrees(self) -> bool:
        return abs(self.gap) > self.allowed


def client_vs_server(b: Bundle) -> list[ClientVsServer]:
    """Per target: the tool's summary tps (else the mean of its interval lines) against the server's count over
    the command's lifetime (the windows' span without one); [] without a load command that printed figures.

    The server's total is read after the command's sessions ended, so PostgreSQL's deferred counter flushes
    are in it; what is left of the counting error is dbdiag's own reads (estimated, taken out) and the
    command's start-up and exit inside its lifetime (the tool's own time leaves them out)."""
    cmd = (b.run.get("watch") or {}).get("command") or {}
    summary = cmd.get("summary") or {}
    rows = watch_rows(b)
    out: list[ClientVsServer] = []
    for target in sorted({r.target for r in rows}):
        rs = [r for r in rows if r.target == target]
        span = sum(_secs(r) for r in rs)
        life = (float(cmd["ended"]) - float(cmd["started"])
                if isinstance(cmd.get("ended"), (int, float)) and isinstance(cmd.get("started"), (int, float)) else 0)
        secs = life if 0 < life <= span + 1.0 else span
        txn = sum(float(r.transactions or 0) for r in rs)
        own = sum(float(_part(r).own_transactions or 0) for r in rs)
        if secs <= 0:
            continue
        with_client = [(r, c) for r in rs if (c := _part(r).client) is not None]
        if len({r.target for r in rows}) > 1 and not with_client:
            continue  # several targets: the command did not load this one (diag.watch gives it no client figures)
        if isinstance(summary.get("tps"), (int, float)):
            ctps, tool, how = float(summary["tps"]), str(summary.get("tool") or ""), "its summary line"
        elif with_client:
            dur = sum(_secs(r) for r, _c in with_client)
            ctps = sum(float(c.tps) * _secs(r) for r, c in with_client) / max(dur, 1e-9)
            tool, how = with_client[0][1].tool, "its interval lines"
        else:
            continue
        stps = txn / secs
        allowed = DISAGREE_SHARE + (own / secs) / max(ctps, MIN_TPS)
        out.append(ClientVsServer(target, tool, ctps, stps, allowed,
                                  f"{tool} says {ctps:.1f} tps ({how}); the server counted {stps:.1f} tps over "
                                  f"{secs:.1f} s ({txn:.0f} transactions, {own:.0f} of dbdiag's own reads "
                                  "taken out)"))
    return out


def _limit_titles(findings: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    return {(str(f.get("target")), str(f.get("workload"))): f for f in findings if f.get("category") == "limit"}


def _local_clients(rows: Sequence[ResultRow]) -> str:
    """What a watch without a load command knew of its clients: the local processes connected to the server
    (their CPU measured), or that none was found; either way clients elsewhere are not known."""
    names: dict[str, None] = {}
    unreadable = unmatched = 0
    for r in rows:
        lc = _part(r).local_clients
        if lc is None:
            continue
        names.update(dict.fromkeys(lc.names))
        unreadable = max(unreadable, lc.unreadable)
        unmatched = max(unmatched, lc.unmatched)
    hid = (f"; {unreadable} connection(s) of processes this user cannot read (run as root to count them)"
           if unreadable else "")
    if unmatched:
        hid += (f"; up to {unmatched} of the connections measured are sessions this role cannot see (another "
                "role's: on the watched database or another), counted as the watched load's clients")
    if names:
        return (f"client CPU: measured for the processes of this host connected to the server ({', '.join(names)}"
                f"); clients on other hosts or over a unix socket are not known: their time is in the round trips "
                f"and unaccounted{hid}")
    return ("client CPU: not known: the watch ran no load command and found no process of this host connected "
            "to the server's TCP port (the clients are on another host, or use a unix socket); the accounting "
            f"leaves that part out rather than guess{hid}")


def unseen(b: Bundle) -> list[str]:
    """What the watch could not see, one sentence each: sources that were off (with what would turn them on),
    parts missing, and the clients' CPU when no load command named the client processes (:func:`_local_clients`)."""
    out = []
    for key, p in sorted((b.run.get("collectors") or {}).items()):
        if not isinstance(p, Mapping):
            continue
        if not p.get("ok") and p.get("reason"):
            out.append(f"{key}: {p['reason']}" + (f" ({p['hint']})" if p.get("hint") else ""))
        out.extend(f"{key}: {m}" for m in p.get("missing") or [])
    if not (b.run.get("watch") or {}).get("command"):
        out.append(_local_clients(watch_rows(b)))
    hidden = max((_part(r).sessions_hidden or 0 for r in watch_rows(b)), default=0)
    if hidden:
        out.append(f"up to {hidden} session(s) of other roles (on any database of the server): their database "
                   "and state are hidden from this role, so the clients and their waits were not seen (needs "
                   "pg_monitor or pg_read_all_stats); their transactions are counted all the same")
    return out


def _cores(recs: list[dict[str, Any]], pick: Callable[[dict[str, Any]], dict[str, Any]],
           window: tuple[float, float]) -> float | None:
    """CPU (user + system) of the processes ``pick(record)`` selects (pid -> process row) over ``window``, in
    cores; None when no interval inside the window has them."""
    cpu = span = 0.0
    seen = False
    for prev, cur in zip(recs, recs[1:]):
        overlap = min(cur["t"], window[1]) - max(prev["t"], window[0])
        if cur["t"] <= prev["t"] or overlap <= 0:
            continue
        span += overlap
        a, c = pick(prev), pick(cur)
        if c and a:
            seen = True
            d = group_deltas(a, c, prev["t"], cur["t"], window)
            cpu += d[0] + d[1]
    return cpu / span if seen and span > 0 else None


def own_cost(b: Bundle) -> list[str]:
    """What the watch itself cost, one sentence each: dbdiag's reads the server counted (estimated and taken
    out), the server CPU of dbdiag's own sessions (PostgreSQL on this host: their backends in the host series),
    and dbdiag's own processes on this host."""
    rows = watch_rows(b)
    recs = [r for r in b.series.get("host", []) if isinstance(r.get("t"), (int, float))]
    if not rows:
        return []
    out = []
    for target in dict.fromkeys(r.target for r in rows):
        rs = [r for r in rows if r.target == target]
        window = (float(rs[0].t_start or 0), float(rs[-1].t_end or 0))
        secs = sum(_secs(r) for r in rs)
        reads = sum(float(_part(r).own_estimate or 0) for r in rs) / max(secs, 1e-9)
        pids = {str(p) for r in rs for p in _part(r).own_backends}
        cores = _cores(recs, lambda rec: {k: v for k, v in ((rec.get("procs.server") or {}).get(target) or {})
                                          .items() if k in pids}, window) if pids else None
        if cores is not None:
            cpu = (f"its {len(pids)} session(s)' backends used {100 * cores:.2f}% of one core of server CPU "
                   "(host series)")
        elif pids:
            cpu = "its sessions' server CPU is not known (the server's processes are not on this host)"
        else:
            cpu = ("its sessions' server CPU is not told apart here (MySQL/MariaDB: sessions are threads of one "
                   "process; PostgreSQL: the server is not on this host)")
        out.append(f"{target}: dbdiag's own reads, about {reads:.1f} a second as the server counts them "
                   f"(estimated, taken out of the counts); {cpu}")
    if recs:
        window = (float(rows[0].t_start or 0), max(float(r.t_end or 0) for r in rows))
        here = _cores(recs, lambda rec: rec.get("procs.collector") or {}, window)
        if here is not None:
            out.append(f"dbdiag's sources on this host used {100 * here:.1f}% of one core (the watch's own process "
                       "is not in this figure); the cost on a saturated server is measured in BENCHMARKS.md "
                       "(bench/watch_cost.py)")
    return out


def watch_section(b: Bundle, findings: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """What the report's watch section shows (None for a bundle that is not a watch)."""
    if not is_watch(b):
        return None
    rows = watch_rows(b)
    lims = _limit_titles(findings)
    windows = []
    for r in rows:
        f = lims.get((r.target, r.workload))
        c = _part(r).client
        windows.append({"target": r.target, "window": r.workload, "t0": r.t_start,
                        "seconds": r.measured_s, "tps": r.tps, "qps": r.qps,
                        "clients": r.clients, "client_tps": c.tps if c is not None else None,
                        "latency_ms": r.latency_ms.get("mean"),
                        "limit": f.get("title") if f else ("no load seen" if _tps(r) < MIN_TPS
                                                           else "no limit named")})
    kinds = {k: str((f.get("extra") or {}).get("kind") or str(f.get("title", "")).split(":")[0])
             for k, f in lims.items()}
    watch = b.run.get("watch") or {}
    return {"info": watch, "windows": windows, "phases": [p.to_dict() for p in phases(rows, kinds)],
            "versus": [{"target": c.target, "text": c.detail, "disagrees": c.disagrees,
                        "gap_pct": round(100 * c.gap, 1), "allowed_pct": round(100 * c.allowed, 1)}
                       for c in client_vs_server(b)],
            "no_load": no_load_seen(b), "unseen": unseen(b), "cost": own_cost(b),
            "counted": sorted({str(w.counted) for r in rows if (w := _part(r)).counted})}


def _merge_statements(rows: Sequence[ResultRow]) -> dict[str, Any] | None:
    """The windows' statement digests as one step's: each statement's counters summed by its key."""
    parts = [r.statements for r in rows if r.statements is not None]
    if not parts:
        return None
    merged: dict[str, dict[str, Any]] = {}
    for p in parts:
        for s in p.get("statements") or []:
            cur = merged.setdefault(str(s.get("key")), {**s, "calls": 0, "total_ms": 0.0, "rows": 0})
            for k in ("calls", "total_ms", "rows"):
                cur[k] = (cur.get(k) or 0) + (s.get(k) or 0)
    out = {k: v for k, v in parts[0].items() if k != "statements"}
    out.update({"calls": sum(int(p.get("calls") or 0) for p in parts),
                "total_ms": sum(float(p.get("total_ms") or 0) for p in parts),
                "statements": sorted(merged.values(), key=lambda s: -float(s.get("total_ms") or 0))})
    return out


def command_life(b: Bundle) -> tuple[float, float] | None:
    """When the watch's load command ran (Unix s, started and ended), None without one (or not ended)."""
    cmd = (b.run.get("watch") or {}).get("command") or {}
    t0, t1 = cmd.get("started"), cmd.get("ended")
    if isinstance(t0, (int, float)) and isinstance(t1, (int, float)) and t1 > t0:
        return float(t0), float(t1)
    return None


def sample_windows(rows: Sequence[ResultRow], life: tuple[float, float] | None) -> list[ResultRow]:
    """The windows whose transactions/s are samples of the load's throughput: with a load command, those wholly
    inside its life (the window it started in holds the time before its clients connected, the one it ended in
    its exit and the servers' deferred counts: in the totals, not samples), a stalled one (0 tps) included;
    without one, the loaded windows. Either way only windows at least :data:`SAMPLE_SHARE` of the longest."""
    if life is not None:
        inside = [r for r in rows if float(r.t_start or 0) >= life[0] and float(r.t_end or 0) <= life[1]]
    else:
        inside = [r for r in rows if _tps(r) >= MIN_TPS]
    longest = max((_secs(r) for r in inside), default=0.0)
    return [r for r in inside if _secs(r) >= SAMPLE_SHARE * longest]


def one_step_row(rows: Sequence[ResultRow], samples: Sequence[ResultRow] | None = None) -> ResultRow:
    """One target's loaded windows as one step (workload ``watch``): counts summed over their span, clients the
    time-weighted mean over the samples, the transactions/s of each window of ``samples`` (default: :func:`sample_windows` of
    ``rows``) a sample of the step's throughput (``interval_tps``)."""
    txn = sum(int(r.transactions or 0) for r in rows)
    t0, t1 = float(rows[0].t_start or 0), float(rows[-1].t_end or 0)
    span = max(t1 - t0, 1e-9)
    if samples is None:
        samples = sample_windows(rows, None)
    # the clients while the load ran: over the sample windows (the window a command started in holds the time
    # before its clients connected), else over every loaded window
    basis = samples or rows
    clients = max(1, round(sum(float(r.clients or 1) * _secs(r) for r in basis)
                           / max(sum(_secs(r) for r in basis), 1e-9)))
    qps = rows[0].qps
    if all(r.qps is not None for r in rows):
        qps = round(sum(float(r.qps or 0) * _secs(r) for r in rows) / span, 2)
    extra = {k: v for k, v in rows[0].extra.items() if k != "client"}
    return replace(rows[0], workload="watch", clients=clients, t_start=t0, t_end=t1, measured_s=round(span, 3),
                   transactions=txn, tps=round(txn / span, 2), qps=qps, profile=None,
                   statements=_merge_statements(rows), interval_tps=tuple(_tps(r) for r in samples),
                   extra={**extra, "windows": [_part(r).window for r in rows]})


def as_one_step(b: Bundle) -> Bundle:
    """A watch as one step per target (its windows that saw load; its samples: :func:`sample_windows`), for
    ``dbdiag compare WATCH_A WATCH_B``; any other bundle as it is."""
    if not is_watch(b):
        return b
    out = []
    life = command_life(b)
    windows = watch_rows(b)
    for target in dict.fromkeys(r.target for r in windows):
        rows = [r for r in windows if r.target == target]
        loaded = [r for r in rows if _tps(r) >= MIN_TPS]
        if loaded:
            out.append(one_step_row(loaded, sample_windows(rows, life)).to_dict())
    return replace(b, results=out, derived=Memo())
