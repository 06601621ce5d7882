"""CPU findings: parse/plan time in the server's profile, a saturated server, a busy host, context switches.

Sources: the ``host`` series (machine CPU counters and per-process CPU and
context switches of the server and client groups; see collectors.host) and
the perf profile of each step (``profile.folded`` in the result row; see
collectors.profile), read through :mod:`reports.model.cpu` (CPU use, the workload's profile, and the
saturation and busy-host thresholds :data:`reports.model.cpu.SERVER_SATURATED` and
:data:`reports.model.cpu.HOST_BUSY` that the limits share).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from collectors.profile.parse import KERNEL_SUFFIX
from diag.core.bundle import Bundle
from diag.core.engines import Engine
from reports.model.cpu import HOST_BUSY, SERVER_SATURATED, CpuUse, cpu_use, step_profile, top_symbols_text
from reports.model.steps import Finding, Step, num, pct, steps
from reports.rules.base import counter_in_step

# A profile of fewer samples cannot tell 10% from 20% (at 100 samples the
# standard error of a 20% share is 4 points); perf at ~500 Hz gives this in
# 0.2 CPU-seconds, i.e. any step where the server does real work.
MIN_PROFILE_SAMPLES = 100
# Parse + plan share of the workload threads' user-space CPU samples (kernel
# time, mostly network I/O for short statements, is left out: parsing does not
# change it). Measured here: PostgreSQL 0% with prepared statements (plan
# cached), 14% with the simple protocol on point selects; MariaDB 38-42% on point
# selects. At 10% skipping the work would raise throughput by a ninth, worth a
# driver setting; 0% vs 14% leaves room on both sides.
PARSE_PLAN_SHARE = 0.10
# The finding is a warning when parse/plan is also a tenth of all the server's
# CPU (kernel included); below that (a step dominated by network or flush
# waits: 6% on MariaDB inserts) it is info: true, but not what limits the step.
PARSE_PLAN_WARNING_SHARE = 0.10
# With the host busy, the server's share of the busy CPU that makes it the
# consumer that saturates the machine (the largest, by a majority).
SERVER_SHARE_OF_BUSY = 0.50
# With the host busy, processes that are neither the server nor the clients
# using a quarter of the machine take CPU the run would otherwise have had:
# its numbers are those of a shared machine.
OTHERS_SHARE = 0.25
# A backend blocks about once per statement round trip (it sleeps in recv
# until the next statement arrives): 0.75-0.9 per point select measured here. A
# commit that waits for its WAL flush adds a few (up to 4 per single-insert
# transaction), a lock queue too (3.3 per statement with 3 of 4 clients queued
# on one row, 6.5 with 15 of 16). Eight per statement is twice what such waits
# explain: switching for its own sake (a herd woken at once, spin-then-sleep
# latches, more runnable backends than CPUs; 31 of 32 clients queued on one
# row: 13.6).
CTX_PER_STATEMENT = 8.0
# ... and switching must cost: a switch takes a few microseconds of CPU (the
# switch itself plus caches refilled after it); SWITCH_COST_US is that estimate.
# At 20 switches per ms of server CPU that is ~8% of the server's CPU. Heavy
# statements that wait on I/O switch often per statement but rarely per unit of
# work (measured: 7.5 per CPU-ms for 2,000-row inserts, 7.2 for 5 MB results;
# 44-53 for 16-32 clients queued on one row lock, 22-32 for single inserts).
CTX_PER_CPU_MS = 20.0
SWITCH_COST_US = 4.0
# Condition findings rank at most half-way (see reports.rules.base).
CONDITION_WEIGHT = 0.5

# The engine's parser and planner frames are its own (Engine.parse_plan_frames, parse_frames, execution_frames).


_NO_FRAME = re.compile(r"(?!)")  # an engine that names no parse/plan frames: none matches


@functools.cache
def _frames(pattern: str) -> re.Pattern[str] | None:
    """An engine's frame pattern compiled once ("" = none)."""
    return re.compile(pattern) if pattern else None


# --------------------------------------------------------------------------- CPU evidence


def _cpu_evidence(u: CpuUse, step: Step) -> dict[str, Any]:
    where = f"host CPU counters from {u.host_source}" if u.host_source else "host CPU counters"
    ev: dict[str, Any] = {"source": f"{where} and per-process CPU (psutil), {u.span_s:.1f} s of intervals",
                          "cpus": u.ncpu, "host_busy_pct": num(100 * u.host_busy)}
    if u.server_cores is not None:
        ev["server_cpu_cores"] = num(u.server_cores, 2)
        if step.transactions:
            ev["server_cpu_us_per_txn"] = num((u.server_user_s + u.server_sys_s) * 1e6 / step.transactions)
    if u.client_cores is not None:
        ev["client_cpu_cores"] = num(u.client_cores, 2)
    ev["other_processes_cpu_cores"] = num(u.others_cores, 2)
    return ev


# --------------------------------------------------------------------------- profiles


@dataclass(frozen=True)
class ParsePlan:
    """Samples of a profile: all, user-space (leaf not a kernel frame), parse/plan (by outermost frame)."""

    total: int
    user: int
    hit: int
    by_frame: dict[str, int]


def parse_plan_samples(folded: Mapping[str, int], engine: Engine) -> ParsePlan:
    """Count the samples whose stack passes through a parse/plan frame (and not into execution below it)."""
    plan, execution = _frames(engine.parse_plan_frames) or _NO_FRAME, _frames(engine.execution_frames)
    total = user = hit = 0
    by: dict[str, int] = {}
    for stack, count in folded.items():
        frames = stack.split(";")[2:]  # kind;comm;frames (root first)
        total += count
        if not frames or not frames[-1].endswith(KERNEL_SUFFIX):
            user += count
        for i, frame in enumerate(frames):
            if plan.match(frame):
                below = frames[i + 1:]
                if execution is None or not any(execution.match(f) for f in below):
                    hit += count
                    by[frame] = by.get(frame, 0) + count
                break
    return ParsePlan(total, user, hit, by)


def cpu_parse_plan(b: Bundle) -> list[Finding]:
    """Parsing and planning take at least :data:`PARSE_PLAN_SHARE` of the workload threads' CPU samples."""
    out: list[Finding] = []
    for step in steps(b):
        folded = step_profile(b, step)
        if not folded:
            continue
        pp = parse_plan_samples(folded, step.engine)
        if pp.total < MIN_PROFILE_SAMPLES or not pp.user or pp.hit / pp.user < PARSE_PLAN_SHARE:
            continue
        share = pp.hit / pp.total
        ev: dict[str, Any] = {
            "source": "perf profile of the server in the middle of the step (workload backends / connection threads)",
            "profile_samples": pp.total,
            "user_space_samples": pp.user,
            "parse_plan_pct_of_user_cpu": num(100 * pp.hit / pp.user),
            "parse_plan_pct_of_server_cpu": num(100 * share),
            "parse_plan_frames": ", ".join(f"{k} {pct(v / pp.total)}" for k, v in
                                           sorted(pp.by_frame.items(), key=lambda kv: (-kv[1], kv[0]))[:5]),
            "top_symbols": top_symbols_text(folded),
            "protocol": step.row.protocol or "unknown",
        }
        u = cpu_use(b, step)
        if u is not None and u.server_cores is not None and step.transactions:
            per_txn = (u.server_user_s + u.server_sys_s) * 1e6 / step.transactions
            ev["server_cpu_us_per_txn"] = num(per_txn)
            ev["parse_plan_us_per_txn_est"] = num(per_txn * share)
        _engine_evidence(b, step, pp, ev)
        advice = step.engine.parse_plan_advice
        severity = "warning" if share >= PARSE_PLAN_WARNING_SHARE else "info"
        out.append(step.finding("cpu_parse_plan", severity,
                                f"Parsing and planning take {pct(share)} of server CPU "
                                f"({pct(pp.hit / pp.user)} of its user-space CPU)",
                                ev, advice, share, share=share))
    return out


def cpu_bound(b: Bundle) -> list[Finding]:
    """The server's processes used the CPU they could get (saturated), with the profile's top symbols."""
    out: list[Finding] = []
    for step in steps(b):
        u = cpu_use(b, step)
        if u is None or u.server_cores is None:
            continue
        usable = float(min(u.ncpu, step.clients))
        saturation = u.server_cores / usable
        host_bound = u.host_busy >= HOST_BUSY and u.server_cores >= SERVER_SHARE_OF_BUSY * u.busy_cores
        if saturation < SERVER_SATURATED and not host_bound:
            continue
        ev = _cpu_evidence(u, step)
        ev["server_cpu_of_usable_pct"] = num(100 * saturation)
        ev["server_system_cpu_pct"] = num(100 * u.server_sys_s / max(1e-9, u.server_user_s + u.server_sys_s))
        folded = step_profile(b, step)
        if folded:
            ev["top_symbols"] = top_symbols_text(folded)
        why = (f"the server used {num(u.server_cores, 2)} of the {usable:g} CPUs its {step.clients} backends could use"
               if saturation >= SERVER_SATURATED else
               f"the machine was {pct(u.host_busy)} busy and the server used most of it")
        out.append(step.finding(
            "cpu_bound", "info", f"Server CPU-bound: {why}", ev,
            "Throughput is set by the CPU each transaction costs: see the top symbols (and the flame graph) "
            "for where it goes. Fewer instructions per transaction (prepared statements, fewer round trips, "
            "covering indexes) or more CPUs raise it; more clients will not.",
            CONDITION_WEIGHT * min(1.0, saturation), saturation=saturation))
    return out


def host_contention(b: Bundle) -> list[Finding]:
    """The machine was busy and processes other than the server and its clients took a good part of it."""
    out: list[Finding] = []
    for step in steps(b):
        u = cpu_use(b, step)
        if u is None or u.host_busy < HOST_BUSY:
            continue
        share = u.others_cores / u.ncpu
        if share < OTHERS_SHARE:
            continue
        ev = _cpu_evidence(u, step)
        ev["other_processes_cpu_pct"] = num(100 * share)
        if u.collector_cores is not None:
            ev["dbdiag_collectors_cpu_cores"] = num(u.collector_cores, 2)
            ev["note"] = "other processes = machine busy CPU - server - clients - dbdiag's collectors"
        else:
            ev["note"] = ("other processes = machine busy CPU - server - clients; this bundle does not measure "
                          "dbdiag's own collectors apart, so they are among them")
        out.append(step.finding(
            "host_contention", "warning",
            f"Other processes used {num(u.others_cores, 2)} of {u.ncpu} CPUs during the step", ev,
            "The machine was shared: the server and the clients competed with other processes for the CPU, so "
            "throughput and latency are lower and noisier than this server can do. Re-run on an otherwise idle "
            "machine before comparing these numbers with another run.",
            CONDITION_WEIGHT * share, share=share))
    return out


def context_switch_storm(b: Bundle) -> list[Finding]:
    """The server's processes switch context at least :data:`CTX_PER_STATEMENT` times per statement and
    :data:`CTX_PER_CPU_MS` times per ms of server CPU. Impact: the estimated share of server CPU spent
    switching (:data:`SWITCH_COST_US` per switch).

    Needs per-process counts of every server thread: engines with one process
    per connection (PostgreSQL) only. For mysqld / mariadbd the host collector
    reads the main thread's counters, which say nothing about the connection
    threads.
    """
    out: list[Finding] = []
    for step in steps(b):
        if not step.engine.process_per_connection or not step.statements:
            continue
        u = cpu_use(b, step)
        if u is None or u.server_cores is None:
            continue
        ctx = u.server_ctx_vol + u.server_ctx_invol
        cpu_s = u.server_user_s + u.server_sys_s
        per_stmt = ctx / step.statements
        per_cpu_ms = ctx / (cpu_s * 1000) if cpu_s > 0 else 0.0
        if per_stmt < CTX_PER_STATEMENT or per_cpu_ms < CTX_PER_CPU_MS:
            continue
        sys_share = u.server_sys_s / cpu_s
        cost = min(1.0, per_cpu_ms * SWITCH_COST_US / 1000)
        ev: dict[str, Any] = {
            "source": "per-process context switch counters of the server's processes (psutil)",
            "server_ctx_per_statement": num(per_stmt, 2),
            "server_ctx_per_txn": num(ctx / step.transactions, 2) if step.transactions else None,
            "server_ctx_per_s": num(ctx / u.span_s),
            "server_ctx_per_cpu_ms": num(per_cpu_ms),
            "switching_cpu_pct_est": num(100 * cost),
            "involuntary_pct": num(100 * u.server_ctx_invol / ctx) if ctx else 0.0,
            "server_system_cpu_pct": num(100 * sys_share),
            "statements_per_txn": num(step.statements / step.transactions, 2) if step.transactions else None,
        }
        if u.host_ctx is not None:
            ev["host_ctx_per_s"] = num(u.host_ctx / u.span_s)
        invol = u.server_ctx_invol >= 0.5 * ctx
        advice = ("Mostly involuntary switches: more runnable server processes than CPUs; fewer connections "
                  "(a pool sized near the CPU count) help." if invol else
                  "Mostly voluntary switches: backends sleep and wake far more than once per statement, as on "
                  "a contended latch or lock (see the wait findings) or a busy-wait that falls back to sleeping; "
                  "fewer concurrent backends or removing the hot spot helps.")
        out.append(step.finding(
            "context_switch_storm", "warning",
            f"{num(per_stmt, 2):g} context switches per statement (norm: about 1)", ev, advice,
            min(CONDITION_WEIGHT, cost), per_statement=per_stmt, per_cpu_ms=per_cpu_ms))
    return out


# --------------------------------------------------------------------------- per-engine parse/plan


def _engine_evidence(b: Bundle, step: Step, pp: ParsePlan, ev: dict[str, Any]) -> None:
    """Adds the parse-only share (where the engine tells parse frames apart) and the prepared executions per
    transaction (where it counts them) to ``ev``."""
    engine = step.engine
    parse = _frames(engine.parse_frames)
    if parse is not None:
        ev["parse_pct_of_server_cpu"] = num(100 * sum(v for k, v in pp.by_frame.items() if parse.match(k)) / pp.total)
    if engine.prepared_executions_counter:
        executes = counter_in_step(b, step, engine.stats_series, engine.prepared_executions_counter)
        if executes is not None and step.transactions:
            ev["prepared_executions_per_txn"] = num(executes / step.transactions, 2)
