"""The limit of a step: the saturated resource (utilisation, the USE method), not the largest wait share.

Decided in this order, each from measured utilisation:

1. the client processes: each near a full CPU, or a saturated host where the clients hold most of the busy
   CPU (``client_cpu``; never from the server waiting for the next statement alone);
2. the host's CPUs busy (``host_cpu``, split into the server's and the clients' shares), busy mostly with
   other processes or other guests' steal time (``neighbours``), or the server's processes using the CPUs their
   backends can use (``server_cpu``);
3. the log device busy (flush calls/s x flush latency, the latency from the fsync test: ``commit_flush``);
4. a lock holder (``lock``: transactions queue behind one row), a latch (``latch``), data-file reads (``io``),
   from their share of the transaction's time;
5. nothing saturated: the serial chain's largest part, the server's CPU per transaction (``server_cpu``), the
   commit flush of a lone committer (``commit_flush``), or the round trips themselves (``round_trips``).

"Nothing saturated" is a claim about evidence: without a host series (``--no-collect``, no host source)
the CPUs' saturation was not observed, and without server wait samples neither were the round trips, locks
or flushes. Then the limit says what was not observed (``Limit.unobserved``), and where nothing measured
can name one it is ``unobserved``: the measured parts and the missing sources, no limit claimed.

A wait for a resource that is not the limit is queueing: a symptom, listed under the limit.
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle
from reports.model.accounting_records import Limit, StepAccounting
from reports.model.cpu import HOST_BUSY, SERVER_SATURATED, CpuUse, cpu_use, step_profile, top_symbols_text
from reports.model.durability_view import StepDurability, durability_rows
from reports.model.steps import Step, num, pct
from reports.model.wait_profiles import IO_READ_SHARE, LATCH_SHARE, LOCK_SHARE

# One client is one process with one query loop: at 80% of a CPU (sampled once a second, so short of 100%
# even when it never waits) it cannot send faster.
CLIENT_SATURATED = 0.80
# On a busy host, clients that cost this many times the server's CPU per transaction set the pace of the
# pair (reports.rules.client; measured: 6-8x on a 5 MB result per transaction, 0.3-0.9x otherwise).
CLIENT_COST_RATIO = 2.0
# The clients spend over half of each transaction's wall time on their own CPU: the client's work, not the
# server or the wire, is the serial bottleneck, even where the sampled per-process CPU of a client on a
# shared machine stays short of CLIENT_SATURATED (measured: a script with 1,500 \set lines per statement,
# 69% of the transaction on client CPU at 75% of a core; a chatty 8-statement transaction: under 30%).
CLIENT_TIME_SHARE = 0.50
# On a saturated host the clients are the limit when they hold two thirds of the CPU the run's processes got
# (server + clients): twice the server's, the CLIENT_COST_RATIO point. Below that the host is shared (host_cpu,
# with both shares). Not at one half: that line sat inside the spread of what a same-host point-select pair
# measures on short steps, so 1 s CPU samples tossed a coin between two names for one state. Measured: over
# 8 s rounds at 4 clients, point selects cost our clients 11.1 and the server 20.5 µs/txn (35%; pgbench -S
# 11.2 / 20.6, BENCHMARKS.md), while the suite's 2 s steps at 8 clients read 52.3% once in CI. The default
# run's server 1.16 cores and clients 0.66 is a shared host; a 5 MB result per transaction (clients 0.31,
# server 0.04) is the clients.
CLIENT_MAJORITY = 2 / 3
# On a saturated host the server alone is the limit when it holds nearly all of the busy CPU.
SERVER_MAJORITY = 0.80
# The run saturates the host when its own processes (server and clients) hold at least half of the busy
# CPU; a host kept busy mostly by other processes is a shared machine (host_contention says so), and the
# step's limit is looked for further down, with the contention stated in the evidence.
OWN_SHARE_OF_BUSY = 0.50
# Steal time worth naming in a neighbours limit: a tenth of the CPU time given to other guests.
STEAL_SHARE = 0.10
# The log device counts as saturated at this busy share (flush calls/s x flush latency).
DEVICE_SATURATED = 0.80
# A wait class at this share of the transaction's time is worth showing as a symptom under the limit.
SYMPTOM_SHARE = 0.10

_CAUSE_SHARES = (("lock", "wait:lock", LOCK_SHARE), ("latch", "wait:latch", LATCH_SHARE),
                 ("io", "wait:data_io", IO_READ_SHARE))
_KIND_OF_WAIT = {"wait:commit_flush": "commit_flush", "wait:lock": "lock", "wait:latch": "latch",
                 "wait:data_io": "io", "wait:cpu": "host_cpu"}


def limit_of(b: Bundle, step: Step, acc: StepAccounting) -> Limit:
    """The limit of one step (every step gets one), with the symptoms seen under it."""
    u = cpu_use(b, step)
    dev = _device(b, step)
    ev: dict[str, Any] = {"window": step.window()}
    lim = _client_limit(step, acc, u, ev) or _cpu_limit(b, step, acc, u, ev) or _device_limit(acc, dev, ev)
    saturated = lim is not None
    if lim is not None:
        # A resource at capacity explains the waits queueing behind it too, so it ranks above each of them
        # (seed 004: CPUs 98% busy, 83% of backend time in commit waits behind group commit).
        queue = _queueing(acc, lim.kind)
        if queue > 0:
            ev["own_share_of_txn_pct"] = num(100 * lim.impact)
            ev["queueing_share_of_txn_pct"] = num(100 * queue)
        impact = lim.impact + queue
    else:
        lim = _churn_limit(acc, ev) or _wait_limit(step, acc, ev) or _serial_limit(b, step, acc, u, dev, ev)
        impact = lim.impact
    missing = () if saturated else unobserved(u, acc)
    if missing:
        ev["not_observed"] = "; ".join(missing)
    lim_ev = dict(lim.evidence)
    if acc.evidence.get("unaccounted_why"):  # 10% or more of the transaction no source saw: which part, and why
        lim_ev["unaccounted"] = acc.evidence["unaccounted_why"]
    return Limit(lim.kind, lim.title, lim.utilisation, lim_ev, lim.advice,
                 _symptoms(acc, lim.kind, dev, saturated),
                 round(max(0.0, min(1.0, impact)), 4), saturated, missing)


def unobserved(u: CpuUse | None, acc: StepAccounting) -> tuple[str, ...]:
    """The evidence a step lacks to rule out a saturated resource: the host's CPUs (no host series over the
    window), the server's CPU (no per-process CPU of its processes), the server's waits (no wait sampler)."""
    out = []
    if u is None:
        out.append("host CPU (no host sample over the step)")
    elif u.server_cores is None:
        out.append("server CPU (no per-process CPU of the server's processes)")
    if acc.get("round_trips") is None:
        out.append("server waits (no wait samples: round trips, locks, flushes unseen)")
    return tuple(out)


def _queueing(acc: StepAccounting, kind: str) -> float:
    """Share of the transaction's time in waits for something other than a saturated limit ``kind`` (the
    CPU run queue is already a part of a CPU limit's own share). On a saturated host the round trips are
    queueing too: the backend waits for a client that waits for a CPU to send its next statement from
    (measured: PostgreSQL point selects at 16 clients on 2 busy CPUs, 92% of the time in round trips)."""
    own = {"host_cpu", "server_cpu"} if kind in ("host_cpu", "server_cpu") else {kind}
    waits = sum(acc.share(key) for key, k in _KIND_OF_WAIT.items() if k not in own)
    return waits + (acc.share("round_trips") if kind == "host_cpu" else 0.0)


def _shares(acc: StepAccounting, *keys: str) -> float:
    return sum(acc.share(k) for k in keys)


def _cpu_ev(u: CpuUse, step: Step, ev: dict[str, Any]) -> None:
    ev["cpus"] = u.ncpu
    ev["host_busy_pct"] = num(100 * u.host_busy)
    if u.server_cores is not None:
        ev["server_cpu_cores"] = num(u.server_cores, 2)
    if u.client_cores is not None:
        ev["client_cpu_cores"] = num(u.client_cores, 2)
        ev["client_cpu_per_client_pct"] = num(100 * u.client_cores / step.clients)


def _client_limit(step: Step, acc: StepAccounting, u: CpuUse | None, ev: dict[str, Any]) -> Limit | None:
    """The client processes, only with client CPU evidence."""
    if u is None or u.client_cores is None:
        return None
    per_client = u.client_cores / step.clients
    own = u.client_cores + (u.server_cores or 0.0)
    share = u.client_cores / own if own > 0 else 0.0
    # the run saturates the host itself (a host kept busy by others says nothing of the clients' share)
    saturated_host = u.host_busy >= HOST_BUSY and u.busy_cores > 0 and own / u.busy_cores >= OWN_SHARE_OF_BUSY
    ratio = u.client_cores / u.server_cores if u.server_cores else 0.0
    costly = u.host_busy >= HOST_BUSY and ratio >= CLIENT_COST_RATIO
    busy_share = acc.share("client_cpu")
    if per_client < CLIENT_SATURATED and busy_share < CLIENT_TIME_SHARE and not costly and \
            not (saturated_host and share >= CLIENT_MAJORITY):
        return None
    _cpu_ev(u, step, ev)
    ev["client_share_of_run_cpu_pct"] = num(100 * share)
    ev["client_cpu_share_of_txn_pct"] = num(100 * busy_share)
    if u.server_cores:
        ev["client_to_server_cpu_per_txn"] = num(ratio, 2)
    why = (f"each client process used {pct(per_client)} of a CPU" if per_client >= CLIENT_SATURATED else
           f"the clients spent {pct(busy_share)} of each transaction's time on their own CPU"
           if busy_share >= CLIENT_TIME_SHARE else
           f"on a busy machine the clients spent {num(ratio, 2):g}x the server's CPU per transaction" if costly else
           f"on a saturated machine the clients used {pct(share)} of the CPU the server and clients got")
    return Limit("client_cpu", f"Client CPU: {why}", min(1.0, max(per_client, busy_share)),
                 ev, "The measured rate is the load generator's limit, not the server's: run the clients on "
                 "another machine or give them more CPU, use more client processes, and check that the "
                 "application does no slow work between statements. Compare servers only where this is absent.",
                 impact=_shares(acc, "client_cpu", "round_trips"))


def _cpu_limit(b: Bundle, step: Step, acc: StepAccounting, u: CpuUse | None, ev: dict[str, Any]) -> Limit | None:
    """The host's CPUs (shared by server and clients) or the server's CPU."""
    if u is None or u.server_cores is None:
        return None
    usable = float(min(u.ncpu, step.clients))
    saturation = u.server_cores / usable
    cpu_impact = _shares(acc, "server_cpu_user", "server_cpu_system", "wait:cpu")
    own = (u.server_cores + (u.client_cores or 0.0)) / u.busy_cores if u.busy_cores > 0 else 0.0
    if u.host_busy >= HOST_BUSY and own < OWN_SHARE_OF_BUSY:
        if cpu_impact >= max(_shares(acc, key) for key in _KIND_OF_WAIT if key != "wait:cpu"):
            return _neighbour_limit(step, acc, u, own, ev)
        # a wait for something else (a lock, the log) takes more of each transaction than the CPU does: the
        # neighbours slow the CPU parts, but the limit is looked for further down, with them in the evidence
        ev["host_busy_pct"] = num(100 * u.host_busy)
        ev["other_processes_cpu_cores"] = num(u.others_cores, 2)
        ev["host_note"] = ("the host was busy mostly with other processes, but the transactions spent more time "
                           "waiting for something else than on or for a CPU")
    if u.host_busy >= HOST_BUSY and own >= OWN_SHARE_OF_BUSY:
        _cpu_ev(u, step, ev)
        srv = u.server_cores / u.busy_cores if u.busy_cores > 0 else 0.0
        cli = (u.client_cores or 0.0) / u.busy_cores if u.busy_cores > 0 else 0.0
        ev["server_share_of_busy_cpu_pct"] = num(100 * srv)
        ev["client_share_of_busy_cpu_pct"] = num(100 * cli)
        _server_cpu_ev(b, step, u, ev)  # what cpu_bound said beside it before the limit did
        if srv < SERVER_MAJORITY:
            gain = (u.server_cores + (u.client_cores or 0.0)) / u.server_cores if u.server_cores > 0 else 1.0
            ev["server_cores_with_clients_elsewhere"] = num(u.server_cores * gain, 2)
            return Limit(
                "host_cpu", f"Host CPU: {u.ncpu} CPUs {pct(u.host_busy)} busy, shared by the server "
                f"({num(u.server_cores, 2):g} cores, {pct(srv)}) and the clients "
                f"({num(u.client_cores or 0.0, 2):g} cores, {pct(cli)})", u.host_busy, ev,
                f"The machine's CPUs are the saturated resource, shared by server and clients. With the clients "
                f"on another machine the server could have about {num(u.server_cores * gain, 2):g} cores, up to "
                f"{num(gain, 2):g}x this rate if it scales; more clients here will not help.",
                impact=cpu_impact + acc.share("client_cpu"))
    elif saturation < SERVER_SATURATED:
        return None
    _cpu_ev(u, step, ev)
    ev["server_cpu_of_usable_pct"] = num(100 * saturation)
    _server_cpu_ev(b, step, u, ev)
    return Limit("server_cpu", f"Server CPU: {num(u.server_cores, 2):g} of the {usable:g} CPUs its "
                 f"{step.clients} backend{'s' if step.clients != 1 else ''} could use", min(1.0, saturation), ev,
                 "Throughput is set by the CPU each transaction costs: see the top symbols (and the flame graph). "
                 "Fewer instructions per transaction (prepared statements, fewer round trips, covering indexes) "
                 "or more CPUs raise it; more clients will not.", impact=cpu_impact)


def _neighbour_limit(step: Step, acc: StepAccounting, u: CpuUse, own: float, ev: dict[str, Any]) -> Limit:
    """The host's CPUs saturated mostly by other processes (or, in a VM, by the hypervisor's other guests:
    steal time): this run got what they left, so they set its pace (issue 22, neighbours)."""
    _cpu_ev(u, step, ev)
    ev["other_processes_cpu_cores"] = num(u.others_cores, 2)
    ev["run_share_of_busy_cpu_pct"] = num(100 * own)
    if u.collector_cores is not None:
        ev["dbdiag_collectors_cpu_cores"] = num(u.collector_cores, 2)
    ev["steal_pct"] = num(100 * u.steal)
    stolen = (f"; the hypervisor took {pct(u.steal)} of the CPU time for other guests (steal)"
              if u.steal >= STEAL_SHARE else "")
    return Limit("neighbours", f"Neighbours: other processes used {num(u.others_cores, 2):g} of the host's {u.ncpu} "
                 f"CPUs ({pct(u.host_busy)} busy), this run's server and clients {pct(own)} of the busy CPU{stolen}",
                 u.host_busy, ev,
                 "The machine was shared and its CPUs saturated by others: this rate is what they left, not what "
                 "the server can do. Stop or move the other work (or, in a VM, ask for dedicated CPUs when steal "
                 "is high) before tuning the database or comparing this run with another.",
                 impact=_shares(acc, "server_cpu_user", "server_cpu_system", "wait:cpu", "round_trips"))


def _server_cpu_ev(b: Bundle, step: Step, u: CpuUse, ev: dict[str, Any]) -> None:
    """The server's system CPU share and the profile's top symbols."""
    ev["server_system_cpu_pct"] = num(100 * u.server_sys_s / max(1e-9, u.server_user_s + u.server_sys_s))
    _top(b, step, ev)


def _top(b: Bundle, step: Step, ev: dict[str, Any]) -> None:
    folded = step_profile(b, step)
    if folded:
        ev["top_symbols"] = top_symbols_text(folded)


def _device(b: Bundle, step: Step) -> StepDurability | None:
    return next((s for s in durability_rows(b) if s.key == step.key), None)


def _device_busy(dev: StepDurability | None) -> float | None:
    """Busy share of the log device: flush calls/s x flush latency (1 / the fsync test's flushes/s)."""
    if dev is None or dev.S is None or not dev.F:
        return None
    return dev.S / dev.F


def _device_limit(acc: StepAccounting, dev: StepDurability | None, ev: dict[str, Any]) -> Limit | None:
    busy = _device_busy(dev)
    if busy is None or busy < DEVICE_SATURATED or dev is None:
        return None
    _device_ev(dev, busy, ev)
    return Limit("commit_flush", f"Log device: busy {pct(min(1.0, busy))} flushing commits", min(1.0, busy), ev,
                 _FLUSH_ADVICE, impact=acc.share("wait:commit_flush"))


def _device_ev(dev: StepDurability, busy: float, ev: dict[str, Any]) -> None:
    ev["flush_calls_per_s"] = num(dev.S or 0.0)
    ev["flush_capability_per_s"] = num(dev.F or 0.0)
    ev["flush_capability_source"] = dev.F_source
    ev["log_device_busy_pct"] = num(100 * busy)
    if dev.S_per_commit is not None:
        ev["flush_calls_per_commit"] = num(dev.S_per_commit, 2)


_FLUSH_ADVICE = ("Each commit waits for its log flush, so the device's flush latency sets the commit rate. Keeping "
                 "durability: more changes per transaction, more concurrent clients so one flush carries several "
                 "commits (group commit), or a log device with a power-protected write cache.")


def _churn_limit(acc: StepAccounting, ev: dict[str, Any]) -> Limit | None:
    """Connection churn (``--connect-per-transaction``): opening connections is the largest part of each
    transaction's time and nothing is saturated."""
    share = acc.share("connect")
    if share <= 0 or share < max((c.share for c in acc.components if c.key not in ("connect", "unaccounted")),
                                 default=0.0):
        return None
    ev["connect_share_of_txn_pct"] = num(100 * share)
    ev["connect_us_per_txn"] = num(acc.us("connect"))
    return Limit("connect", f"Connection churn: {pct(share)} of transaction time opening a new connection",
                 None, ev, "Each transaction waits for a connection to be opened, authenticated and its statements "
                 "prepared: a connection pool (in the application, or PgBouncer / ProxySQL) keeps connections open "
                 "and removes this part; more clients raise throughput only while CPUs are free.", impact=share)


def _wait_limit(step: Step, acc: StepAccounting, ev: dict[str, Any]) -> Limit | None:
    """A lock holder, a latch or data reads: the largest of them over its threshold."""
    best = max(((acc.share(key), kind, key) for kind, key, floor in _CAUSE_SHARES if acc.share(key) >= floor),
               default=None)
    if best is None:
        return None
    share, kind, key = best
    c = acc.get(key)
    ev[f"{kind}_share_of_txn_pct"] = num(100 * share)
    ev[f"{kind}_waits"] = ", ".join(f"{k} {v:g} µs" for k, v in list((c.detail if c else {}).items())[:4])
    title, advice = _WAIT_WORDS[kind]
    return Limit(kind, f"{title}: {pct(share)} of transaction time", None, ev, advice, impact=share)


_WAIT_WORDS = {
    "lock": ("Lock holder: transactions queue behind a row or table lock",
             "Transactions queue for the same rows: keep the transactions that write them short (no round trips "
             "between the write and COMMIT), take the hot row last, spread a hot counter over several rows. More "
             "clients will not raise throughput while this lock is the bottleneck."),
    "latch": ("Latch: backends queue on an internal latch",
              "Fewer concurrent backends (a pool sized near the CPU count) usually raises throughput under latch "
              "contention; see the wait finding for the structure it protects."),
    "io": ("Data reads: the working set does not fit in memory",
           "Make the buffer pool (and the OS cache) hold the working set, or make queries read less."),
}


def _serial_limit(b: Bundle, step: Step, acc: StepAccounting, u: CpuUse | None, dev: StepDurability | None,
                  ev: dict[str, Any]) -> Limit:
    """Nothing saturated: the largest part of the serial chain client -> server -> log device."""
    rt = _shares(acc, "round_trips", "client_cpu")
    srv = _shares(acc, "server_cpu_user", "server_cpu_system")
    flush = acc.share("wait:commit_flush")
    if u is not None:
        _cpu_ev(u, step, ev)
    # the flush against each other part on its own: the client's CPU and the wire are two parts, not one
    # (measured: PostgreSQL 1-client durable insert, flush 63 µs, round trips 55, server 55, client CPU 22)
    # The largest part is the limit even below commit_flush's own 25% (FLUSH_SHARE): CI at load 7 measured flush
    # 23% against server CPU 18%, and naming the smaller part contradicted this function's rule.
    if flush >= SYMPTOM_SHARE and flush >= max(acc.share("round_trips"), acc.share("client_cpu"), srv):
        busy = _device_busy(dev)
        if dev is not None and busy is not None:
            _device_ev(dev, busy, ev)
        ev["commit_flush_share_of_txn_pct"] = num(100 * flush)
        return Limit("commit_flush", f"Commit flush: {pct(flush)} of transaction time waiting for the "
                     f"{step.engine.log_name} flush", None if busy is None else min(1.0, busy), ev, _FLUSH_ADVICE,
                     impact=flush)
    if srv > rt and u is not None and u.server_cores is not None:
        usable = float(min(u.ncpu, step.clients))
        _top(b, step, ev)
        return Limit("server_cpu", f"Server CPU per transaction: {pct(srv)} of transaction time (server at "
                     f"{pct(u.server_cores / usable)} of the CPUs its backends could use)",
                     min(1.0, u.server_cores / usable), ev,
                     "Each transaction waits for the server's CPU work: fewer instructions per transaction "
                     "(prepared statements, covering indexes) cut its time; more clients raise throughput "
                     "while CPUs are free.", impact=srv)
    missing = unobserved(u, acc)
    if acc.get("round_trips") is None:  # no wait samples: the round trips were not measured
        return _unobserved_limit(acc, u, missing)
    ev["round_trips_share_of_txn_pct"] = num(100 * acc.share("round_trips"))
    ev["client_cpu_share_of_txn_pct"] = num(100 * acc.share("client_cpu"))
    if "round_trip_gap_us" in acc.evidence:
        ev["round_trip_gap_us"] = acc.evidence["round_trip_gap_us"]
    if "statements_per_txn" in acc.evidence:
        ev["statements_per_txn"] = acc.evidence["statements_per_txn"]
    if missing:  # the waits were sampled, the CPUs not: their saturation is not ruled out
        return Limit("round_trips", f"Round trips: {pct(rt)} of transaction time waiting for the next statement; "
                     f"CPU saturation not observed ({', '.join(m.split(' (')[0] for m in missing)} missing)", None,
                     ev, "Each transaction waits for its statements to travel, but whether a CPU was saturated "
                     "was not observed: run with the host source on before reading this as the limit. Fewer "
                     "round trips per transaction (multi-row statements, stored procedures) cut its latency.",
                     impact=rt)
    return Limit("round_trips", f"Round trips: {pct(rt)} of transaction time waiting for the next statement, "
                 "nothing saturated", None, ev,
                 "No resource is saturated: each transaction waits for its statements to travel. More clients "
                 "raise throughput; fewer round trips per transaction (multi-row statements, one statement "
                 "instead of several, stored procedures) cut its latency.", impact=rt)


def _unobserved_limit(acc: StepAccounting, u: CpuUse | None, missing: tuple[str, ...]) -> Limit:
    """No limit can be named from what was measured: say what was (the parts with a share, the host's CPU
    when seen) and what was not, and claim nothing about saturation."""
    seen = [f"{c.label.split(' (')[0]} {pct(c.share)}" for c in acc.components if c.share > 0]
    host = f"host CPUs {pct(u.host_busy)} busy, " if u is not None else ""
    ev: dict[str, Any] = {"not_observed": "; ".join(missing),
                          "measured_shares_of_txn": ", ".join(seen)}
    return Limit("unobserved", f"Limit not observed: no {' and no '.join(m.split(' (')[0] for m in missing)} "
                 f"evidence for this step ({host}measured: {', '.join(seen) or 'nothing'} of transaction time)",
                 None, ev, "The sources that name a limit were off or saw nothing (--no-collect, or no host or "
                 "wait source for this target): whether the CPUs, a lock, the log device or the round trips "
                 "limited this step was not observed. Run with the sources on to name it.", impact=0.0)


def _symptoms(acc: StepAccounting, kind: str, dev: StepDurability | None, saturated: bool) -> tuple[str, ...]:
    """Waits of at least :data:`SYMPTOM_SHARE` of the transaction's time for something that is not the limit:
    queueing behind a saturated limit, else a part of the serial chain that is not its largest."""
    out = []
    for c in acc.components:
        k = _KIND_OF_WAIT.get(c.key)
        if k is None or k == kind or c.share < SYMPTOM_SHARE or (kind == "server_cpu" and k == "host_cpu"):
            continue
        why = "queueing, not the limit" if saturated else "a part of each transaction, not the limit"
        if k == "commit_flush" and saturated:
            busy = _device_busy(dev)
            why = "queueing behind group commit" + (f" (log device {pct(min(1.0, busy))} busy)" if busy else "")
        top = next(iter(c.detail), "")
        out.append(f"{c.label} {pct(c.share)} of transaction time{f' ({top})' if top else ''}: {why}")
    if kind == "host_cpu" and acc.share("round_trips") >= SYMPTOM_SHARE:
        out.append(f"round trips {pct(acc.share('round_trips'))} of transaction time: queueing, the clients "
                   "wait for a CPU to send the next statement from")
    return tuple(out)
