"""CPU use of a step from the host series, and the workload's part of the step's perf profile.

Sources: the ``host`` series (machine CPU counters and per-process CPU and
context switches of the server and client groups; see collectors.host), a
target's own ``host--<label>`` series (node_exporter), and the perf profile of
each step (``profile.folded`` in the result row; see collectors.profile). The
accounting, the limits and the CPU findings (:mod:`reports.rules.cpu`) read
them through here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from collectors.profile.analyse import top_symbols
from collectors.profile.parse import load_folded
from collectors.rates import counter_delta
from diag.core.bundle import Bundle, safe_name
from diag.core.errors import DiagError
from reports.model.series import CPU_ALL, CPU_BUSY, MIN_COVERAGE, group_deltas, group_series, run_delay_delta
from reports.model.steps import Step

# Saturation: the server used this share of the CPU its backends could use
# (one CPU per client, at most the machine's CPUs). Short of 100% because the
# host's counters are read once a second and scheduling leaves gaps.
SERVER_SATURATED = 0.80
# The machine counts as busy when this share of all CPU time was not idle:
# then anything else that runs takes CPU from the server and the clients.
HOST_BUSY = 0.90
# The host source samples every second; an interval over the step this much longer than that, and longer
# than the step itself, means it stalled (measured: no sample from 1.4 s before to 6.3 s after a 4 s step of
# 200 clients on 2 CPUs at load 48): what it saw is the time around the step, not the step.
HOST_STALL_S = 3.0
# Process / thread kinds that run the workload's statements (collectors.profile).
WORKLOAD_KINDS = ("backend", "connection")


# --------------------------------------------------------------------------- CPU accounting


@dataclass(frozen=True)
class CpuUse:
    """CPU of one step in cores (CPU-seconds per second) and context switches, from the host series."""

    ncpu: int
    span_s: float
    host_busy: float  # share of all CPU time not idle (0..1)
    server_cores: float | None
    server_user_s: float
    server_sys_s: float
    server_ctx_vol: float
    server_ctx_invol: float
    client_cores: float | None
    host_ctx: float | None
    collector_cores: float | None = None  # dbdiag's own collectors and their perf children
    host_source: str = ""  # "" this machine's host series; else where the target's host was read (node_exporter)
    clients_elsewhere: bool = False  # the target's host is not this machine: clients and collectors use none of it
    steal: float = 0.0  # share of all CPU time the hypervisor gave to other guests (0..1; part of host_busy)
    # Seconds the server's threads waited on a run queue over the window (/proc schedstat); None when not known.
    server_run_delay_s: float | None = None

    @property
    def busy_cores(self) -> float:
        return self.host_busy * self.ncpu

    @property
    def others_cores(self) -> float:
        here = 0.0 if self.clients_elsewhere else (self.client_cores or 0.0) + (self.collector_cores or 0.0)
        return max(0.0, self.busy_cores - (self.server_cores or 0.0) - here)


def cpu_use(b: Bundle, step: Step) -> CpuUse | None:
    """CPU use over the step's measured window; None without host data, or when the host source stalled
    over the window (:data:`HOST_STALL_S`).

    Each host interval counts by the share of it that lies inside [t_start,
    t_end] (counters grow about evenly within one second), so a 3 s step is 3 s
    of CPU whatever the phase of the host collector's clock. Derived once per
    bundle and window (:meth:`diag.core.bundle.Bundle.memo`): the rules, the accounting
    and the limit all ask, and each answer scans the whole host series.
    """
    key = ("cpu_use", step.target, step.t0, step.t1, len(b.series.get("host", [])))
    return b.memo(key, lambda: _cpu_use(b, step))


def _whole_intervals(b: Bundle, group: str, label: str | None) -> dict[float, list[float]]:
    """The group's deltas per host interval, unweighted, by the interval's end (Unix s): what
    :func:`group_deltas` gives an interval that lies wholly inside a window (each PID's span is inside it
    too), shared with the charts' :func:`group_series` so an hour's step reads each interval once."""
    return b.memo(("whole_intervals", group, label, len(b.series.get("host", []))),
                  lambda: dict(group_series(b, group, label)))


def _cpu_use(b: Bundle, step: Step) -> CpuUse | None:
    host = b.series.get("host", [])
    recs = [r for r in host if isinstance(r.get("t"), (int, float))]
    whole = len(recs) == len(host)  # group_series pairs every record with the one before: the same pairs

    def deltas(group: str, label: str | None, p: dict[str, Any], c: dict[str, Any], t0: float, t1: float
               ) -> list[float]:
        if whole and step.t0 <= t0 and t1 <= step.t1:
            got = _whole_intervals(b, group, label).get(t1)
            if got is not None:
                return got
        return group_deltas(p, c, t0, t1, window)
    busy = total = span = cli_span = ctx = steal = 0.0
    srv = [0.0] * 7
    cli = [0.0] * 7
    own = [0.0] * 7
    have_srv = have_cli = have_own = False
    run_delay: float | None = None
    window = (step.t0, step.t1)  # process groups weight each PID by its own span (reports.model.series.group_deltas)
    for prev, cur in zip(recs, recs[1:]):
        dt = cur["t"] - prev["t"]
        overlap = min(cur["t"], step.t1) - max(prev["t"], step.t0)
        if dt <= 0 or overlap <= 0:
            continue
        if dt > max(HOST_STALL_S, step.duration):  # the source stalled over the step: no evidence of it
            return None
        w = overlap / dt
        d = [_delta(prev, cur, f"cpu.all.{f}") for f in CPU_ALL]
        if any(x is None for x in d):
            continue
        span += overlap
        total += w * sum(d)  # type: ignore[arg-type]
        busy += w * sum(_delta(prev, cur, f"cpu.all.{f}") or 0.0 for f in CPU_BUSY)
        steal += w * (_delta(prev, cur, "cpu.all.steal") or 0.0)
        ctx += w * (_delta(prev, cur, "ctx_switches") or 0.0)
        cs = (cur.get("procs.server") or {}).get(step.target)
        if cs:
            have_srv = True
            ps = (prev.get("procs.server") or {}).get(step.target) or {}
            srv = [a + x for a, x in zip(srv, deltas("server", step.target, ps, cs, prev["t"], cur["t"]))]
            rd = run_delay_delta(ps, cs, prev["t"], cur["t"], window)
            if rd is not None:
                run_delay = (run_delay or 0.0) + rd
        pc = prev.get("procs.client") or {}
        if cur.get("procs.client") and pc:
            # Client PIDs are registered when the measured part starts: an interval that begins before
            # that has no baseline for them, so client CPU is taken over the intervals that have one.
            have_cli = True
            cli_span += overlap
            cli = [a + x for a, x in zip(cli, deltas("client", None, pc, cur["procs.client"], prev["t"], cur["t"]))]
        po = prev.get("procs.collector") or {}
        if cur.get("procs.collector") and po:
            have_own = True
            own = [a + x for a, x in zip(own, deltas("collector", None, po, cur["procs.collector"], prev["t"],
                                                        cur["t"]))]
    ncpu = int(recs[-1].get("ncpu") or 0) if recs else 0
    proc_span, host_source = span, ""
    own_host = _target_host(b, step)
    if own_host is not None:  # the target's host read through node_exporter (--host-metrics)
        span, total, busy, ctx, ncpu, host_source = own_host
    if span <= 0 or total <= 0 or ncpu <= 0:
        return None
    per = proc_span if proc_span > 0 else 1.0
    return CpuUse(ncpu=ncpu, span_s=span, host_busy=busy / total,
                  server_cores=(srv[0] + srv[1]) / per if have_srv else None, server_user_s=srv[0],
                  server_sys_s=srv[1], server_ctx_vol=srv[2], server_ctx_invol=srv[3],
                  client_cores=(cli[0] + cli[1]) / cli_span if have_cli else None, host_ctx=ctx,
                  collector_cores=(own[0] + own[1]) / per if have_own else None, host_source=host_source,
                  clients_elsewhere=bool(host_source) and not _target_local(b, step.target),
                  steal=steal / total if not host_source and total > 0 else 0.0,
                  server_run_delay_s=run_delay if have_srv else None)


def _target_local(b: Bundle, label: str) -> bool:
    return any(t.get("label") == label and t.get("local") for t in b.run.get("targets") or [])


def _target_host(b: Bundle, step: Step) -> tuple[float, float, float, float, int, str] | None:
    """(span s, total CPU s, busy CPU s, context switches, CPUs, source) of the step from the target's own
    host series (``host--<label>``: node_exporter, see collectors.node_exporter); None without one.

    The same interval weighting as the local host series; per-process rows are not in it (they come
    from this machine's series)."""
    recs = [r for r in b.series.get(safe_name(f"host--{step.target}"), []) if isinstance(r.get("t"), (int, float))]
    if len(recs) < 2:
        return None
    span = total = busy = ctx = 0.0
    for prev, cur in zip(recs, recs[1:]):
        dt = cur["t"] - prev["t"]
        overlap = min(cur["t"], step.t1) - max(prev["t"], step.t0)
        d = [_delta(prev, cur, f"cpu.all.{f}") for f in CPU_ALL]
        if dt <= 0 or overlap <= 0 or any(x is None for x in d):
            continue
        w = overlap / dt
        span += overlap
        total += w * sum(d)  # type: ignore[arg-type]
        busy += w * sum(_delta(prev, cur, f"cpu.all.{f}") or 0.0 for f in CPU_BUSY)
        ctx += w * (_delta(prev, cur, "ctx_switches") or 0.0)
    ncpu, source = int(recs[-1].get("ncpu") or 0), str(recs[-1].get("source") or "")
    if span < MIN_COVERAGE * (step.t1 - step.t0):
        # node_exporter stopped answering early in the step (or before it): no host CPU for the step, rather
        # than a sliver taken for the whole step or this machine's CPU taken for that host's.
        return 0.0, 0.0, 0.0, 0.0, ncpu, source
    return span, total, busy, ctx, ncpu, source


def _delta(prev: Mapping[str, Any], cur: Mapping[str, Any], key: str) -> float | None:
    return counter_delta(prev.get(key), cur.get(key))


# --------------------------------------------------------------------------- profiles


def step_profile(b: Bundle, step: Step) -> dict[str, int] | None:
    """The step's folded profile restricted to the workload's backends / connection threads."""
    prof = step.row.profile or {}
    rel = prof.get("folded") if isinstance(prof, dict) else None
    if not rel:
        return None
    try:
        folded = load_folded(b.path / str(rel))
    except (OSError, DiagError):
        return None
    mine = {s: c for s, c in folded.items() if s.split(";", 1)[0] in WORKLOAD_KINDS}
    return mine or None


def top_symbols_text(folded: Mapping[str, int], n: int = 5) -> str:
    rows = top_symbols(folded, by_kind=False, n=n)
    return ", ".join(f"{r.symbol} {r.percent:.1f}%" for r in rows)
