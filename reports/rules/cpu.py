"""CPU findings: parse/plan time in the server's profile, a saturated server, a busy host, context switches.

Sources: the ``host`` series (machine CPU counters and per-process CPU and
context switches of the server and client groups; see collectors.host) and
the perf profile of each step (``profile.folded`` in the result row; see
collectors.profile).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from collectors.profile.analyse import top_symbols
from collectors.profile.parse import KERNEL_SUFFIX, load_folded
from collectors.rates import counter_delta
from diag.bundle import Bundle, safe_name
from diag.engines import MYSQL, POSTGRES, Engine
from diag.errors import DiagError
from reports.rules.base import Finding, Step, counter_in_step, num, pct, steps
from reports.series import CPU_ALL, CPU_BUSY, MIN_COVERAGE, group_deltas

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

# Frames of the parser, parse analysis, rewriter and planner (PostgreSQL), and
# of the parser and optimizer (MySQL / MariaDB). A sample counts when any frame
# of its stack is one of them, so callees (allocations made by the planner)
# count too where perf recorded the call chain.
_PG_PARSE_PLAN = re.compile(
    r"^(raw_parser|base_yyparse|core_yylex|core_yy\w+|scanner_init|pg_parse_query|parse_analyze\w*|"
    r"transform[A-Z]\w*|pg_analyze_and_rewrite\w*|pg_rewrite_query|QueryRewrite|pg_plan_quer(y|ies)|planner|"
    r"standard_planner|subquery_planner|grouping_planner|query_planner|make_one_rel|set_base_rel_\w+|"
    r"create_plan|create_plan_recurse|set_plan_references|preprocess_expression|eval_const_expressions|"
    r"get_relation_info|build_simple_rel|create_index_paths|add_paths_to_joinrel|BuildCachedPlan)$")
_MY_PARSE_PLAN = re.compile(
    r"^(parse_sql|MYSQLparse|ORAparse|MYSQLlex|my_sql_parser_parse|THD::sql_parser|Lex_input_stream::\w+|"
    r"lex_start|JOIN::optimize\w*|JOIN::prepare|make_join_statistics|Query_block::prepare|"
    r"st_select_lex::prepare|SELECT_LEX::prepare|SQL_SELECT::test_quick_select|test_quick_select|"
    r"Optimize_table_order::\w+|choose_plan|greedy_search|best_access_path)$")
_MY_PARSE = re.compile(r"^(parse_sql|MYSQLparse|ORAparse|MYSQLlex|my_sql_parser_parse|THD::sql_parser|"
                       r"Lex_input_stream::\w+|lex_start)$")
# MySQL reads "const" tables (a primary-key lookup) inside JOIN::optimize: those
# frames below a plan frame are execution, not planning.
_MY_EXECUTION = re.compile(r"^(handler::|ha_\w+::|row_search|row_sel|btr_|buf_page_|join_read_const|read_const)")
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
    bundle and window (:meth:`diag.bundle.Bundle.memo`): the rules, the accounting
    and the limit all ask, and each answer scans the whole host series.
    """
    key = ("cpu_use", step.target, step.t0, step.t1, len(b.series.get("host", [])))
    return b.memo(key, lambda: _cpu_use(b, step))


def _cpu_use(b: Bundle, step: Step) -> CpuUse | None:
    recs = [r for r in b.series.get("host", []) if isinstance(r.get("t"), (int, float))]
    busy = total = span = cli_span = ctx = steal = 0.0
    srv = [0.0] * 7
    cli = [0.0] * 7
    own = [0.0] * 7
    have_srv = have_cli = have_own = False
    window = (step.t0, step.t1)  # process groups weight each PID by its own span (reports.series.group_deltas)
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
            srv = [a + x for a, x in zip(srv, group_deltas(ps, cs, prev["t"], cur["t"], window))]
        pc = prev.get("procs.client") or {}
        if cur.get("procs.client") and pc:
            # Client PIDs are registered when the measured part starts: an interval that begins before
            # that has no baseline for them, so client CPU is taken over the intervals that have one.
            have_cli = True
            cli_span += overlap
            cli = [a + x for a, x in zip(cli, group_deltas(pc, cur["procs.client"], prev["t"], cur["t"], window))]
        po = prev.get("procs.collector") or {}
        if cur.get("procs.collector") and po:
            have_own = True
            own = [a + x for a, x in zip(own, group_deltas(po, cur["procs.collector"], prev["t"], cur["t"], window))]
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
                  steal=steal / total if not host_source and total > 0 else 0.0)


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


def step_profile(b: Bundle, step: Step) -> dict[str, int] | None:
    """The step's folded profile restricted to the workload's backends / connection threads."""
    prof = step.row.get("profile") or {}
    rel = prof.get("folded") if isinstance(prof, dict) else None
    if not rel:
        return None
    try:
        folded = load_folded(b.path / str(rel))
    except (OSError, DiagError):
        return None
    mine = {s: c for s, c in folded.items() if s.split(";", 1)[0] in WORKLOAD_KINDS}
    return mine or None


@dataclass(frozen=True)
class ParsePlan:
    """Samples of a profile: all, user-space (leaf not a kernel frame), parse/plan (by outermost frame)."""

    total: int
    user: int
    hit: int
    by_frame: dict[str, int]


def parse_plan_samples(folded: Mapping[str, int], engine: Engine) -> ParsePlan:
    """Count the samples whose stack passes through a parse/plan frame (and not into execution below it)."""
    frames_of = PARSE_PLAN[engine.name]
    total = user = hit = 0
    by: dict[str, int] = {}
    for stack, count in folded.items():
        frames = stack.split(";")[2:]  # kind;comm;frames (root first)
        total += count
        if not frames or not frames[-1].endswith(KERNEL_SUFFIX):
            user += count
        for i, frame in enumerate(frames):
            if frames_of.plan.match(frame):
                below = frames[i + 1:]
                if frames_of.execution is None or not any(frames_of.execution.match(f) for f in below):
                    hit += count
                    by[frame] = by.get(frame, 0) + count
                break
    return ParsePlan(total, user, hit, by)


def top_symbols_text(folded: Mapping[str, int], n: int = 5) -> str:
    rows = top_symbols(folded, by_kind=False, n=n)
    return ", ".join(f"{r.symbol} {r.percent:.1f}%" for r in rows)


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
            "protocol": str(step.row.get("protocol") or "unknown"),
        }
        u = cpu_use(b, step)
        if u is not None and u.server_cores is not None and step.transactions:
            per_txn = (u.server_user_s + u.server_sys_s) * 1e6 / step.transactions
            ev["server_cpu_us_per_txn"] = num(per_txn)
            ev["parse_plan_us_per_txn_est"] = num(per_txn * share)
        advice = PARSE_PLAN[step.engine.name].advise(b, step, pp, ev)
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


def _pg_parse_plan_advice(b: Bundle, step: Step, pp: ParsePlan, ev: dict[str, Any]) -> str:
    return ("Every statement is parsed and planned again. Use prepared statements (server-side: "
            "psycopg prepare=True, JDBC prepareThreshold, pgbench -M prepared; dbdiag --protocol "
            "prepared) so the plan is cached; a pooler in transaction mode needs protocol-level "
            "prepared statement support (PgBouncer 1.21+).")


def _my_parse_plan_advice(b: Bundle, step: Step, pp: ParsePlan, ev: dict[str, Any]) -> str:
    """Adds the parse-only share and the prepared executions per transaction to ``ev``; returns the advice."""
    parse = sum(v for k, v in pp.by_frame.items() if _MY_PARSE.match(k))
    ev["parse_pct_of_server_cpu"] = num(100 * parse / pp.total)
    executes = counter_in_step(b, step, step.engine.stats_series, "status.Com_stmt_execute")
    if executes is not None and step.transactions:
        # protocol-level and SQL-level EXECUTE both count (Com_stmt_execute)
        ev["prepared_executions_per_txn"] = num(executes / step.transactions, 2)
    return ("Every statement is parsed and optimized again. Server-side prepared statements "
            "(COM_STMT_PREPARE: a driver option such as useServerPrepStmts, or PREPARE/EXECUTE) skip "
            "the parse; MySQL and MariaDB still optimize each execution, so for many tiny statements "
            "fewer round trips (multi-row statements, stored procedures) cut the rest.")


@dataclass(frozen=True)
class ParsePlanFrames:
    """An engine's parse/plan frames, the frames below them that are execution, and its advice."""

    plan: re.Pattern[str]
    execution: re.Pattern[str] | None  # None: every frame below a plan frame is planning
    advise: Callable[[Bundle, Step, ParsePlan, dict[str, Any]], str]  # may add the engine's evidence


# Explicit registry, keyed by Engine.name.
PARSE_PLAN: dict[str, ParsePlanFrames] = {
    POSTGRES.name: ParsePlanFrames(_PG_PARSE_PLAN, None, _pg_parse_plan_advice),
    MYSQL.name: ParsePlanFrames(_MY_PARSE_PLAN, _MY_EXECUTION, _my_parse_plan_advice),
}
