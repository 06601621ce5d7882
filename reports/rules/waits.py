"""Findings from the sampled wait profile: lock, latch, commit-flush and read waits.

Source: series ``pg_waits--<label>`` (pg_stat_activity at 10 Hz) and
``my_waits--<label>`` (performance_schema current waits, or processlist
states plus INNODB_TRX at 10 Hz). Each record counts (backend, tick) samples
of sessions inside a transaction; a class's share is its samples over all
samples in the step's window: the share of the backends' time spent there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from diag.bundle import Bundle
from diag.engines import MYSQL, POSTGRES, WAIT_CLASSES, Engine
from reports.durability_view import durability_rows
from reports.rules.base import Finding, Step, counter_in_step, gauge_mean, in_window, num, pct, series, steps
from reports.rules.blocking import advice_part, blocking_evidence, title_part

# Below this many samples in a step a single sample moves a share by more than
# 6 points: too coarse to call a cause. One busy backend sampled at 10 Hz gives
# 30 samples in a 3 s step, so the shortest useful step still qualifies.
MIN_WAIT_SAMPLES = 15

# A lock class holding a tenth of the backends' time is already a queue: with
# no contention it is ~0 (row locks are granted at once), so 10% cannot be noise.
# Measured: 0% in every run without a shared row; 64-92% with 4-32 clients
# updating one row.
LOCK_SHARE = 0.10
# Latches (LWLocks, InnoDB mutexes / rw-locks) are held for microseconds: 0-3%
# of samples in every run here (LWLock:LockManager under a 4-client lock queue
# the highest). At 10% they cost as much as a noticeable lock queue.
LATCH_SHARE = 0.10
# A commit that waits for its own flush shows that wait in every transaction;
# a quarter of all backend time means the flush latency, not the work, sets the
# pace. Measured: 73-95% for single-row durable inserts, 54% for 2,000-row
# inserts, 0% with fsync=off.
FLUSH_SHARE = 0.25
# Reads that miss the cache: a fifth of backend time waiting for data files
# means the working set does not fit in memory. Measured: 0% whenever the data
# was cached (PostgreSQL reads from the OS cache too, even with 128 kB of
# shared_buffers); 49% for MariaDB point selects with a 6 MB buffer pool over
# 1M rows (O_DIRECT: every miss is a disk read).
IO_READ_SHARE = 0.20

CLASSES = WAIT_CLASSES


def wait_class(engine: Engine, key: str) -> str:
    """The class of one wait-profile key (one of :data:`diag.engines.WAIT_CLASSES`): the engine maps it."""
    return engine.wait_class(key)


@dataclass(frozen=True)
class WaitProfile:
    """Samples of one step: counts per wait key, with the sampler that took them."""

    engine: Engine
    samples: int
    counts: Counter[str]
    source: str
    ticks: int
    idle: int = 0  # (backend, tick) samples of workload backends idle between transactions (not in counts)

    def share(self, cls: str) -> float:
        return self.class_samples(cls) / self.samples if self.samples else 0.0

    def class_samples(self, cls: str) -> int:
        return sum(n for k, n in self.counts.items() if wait_class(self.engine, k) == cls)

    def keys_of(self, cls: str) -> list[tuple[str, int]]:
        return sorted(((k, n) for k, n in self.counts.items() if wait_class(self.engine, k) == cls),
                      key=lambda kv: (-kv[1], kv[0]))

    def describe(self, items: Iterable[tuple[str, int]], n: int = 4) -> str:
        """'Lock:transactionid 107 (69.0%), Lock:tuple 2 (1.3%)'."""
        return ", ".join(f"{k} {c} ({pct(c / self.samples)})" for k, c in list(items)[:n]) if self.samples else ""

    def top(self, n: int = 5) -> str:
        return self.describe(sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0])), n)


def wait_profile(b: Bundle, step: Step) -> WaitProfile | None:
    """The merged wait samples of a step, or None when no wait sampler ran for its target."""
    recs = in_window(series(b, step.engine.waits_series, step.target), step)
    if not recs:
        return None
    counts: Counter[str] = Counter()
    samples = ticks = idle = 0
    sources: Counter[str] = Counter()
    for r in recs:
        waits = {k: int(v) for k, v in (r.get("waits") or {}).items() if isinstance(v, (int, float))}
        # performance_schema does not instrument MariaDB 10.8+ redo writes and fsyncs: a commit
        # waiting for its flush is "CPU" there, and only its thread state ("Commit") tells.
        commit = int((r.get("cpu_states") or {}).get("Commit", 0))
        if commit and waits.get("CPU", 0) >= commit:
            waits["CPU"] -= commit
            waits["State:Commit"] = waits.get("State:Commit", 0) + commit
        counts.update(waits)
        samples += int(r.get("samples") or 0)
        ticks += int(r.get("ticks") or 0)
        idle += int(r.get("idle") or 0)
        sources[str(r.get("source") or "pg_stat_activity")] += 1
    source = sources.most_common(1)[0][0] if sources else ""
    # A step's workload is its clients' sessions, one per client: at most clients x ticks (backend, tick)
    # samples. Idle sessions beyond that are someone else's, dbdiag's own collector and statement sessions
    # among them (one session of each idles between its queries), and counting them would call their
    # idleness the workload's round trips (measured: a lone committer on a 2 ms log device sampled 51% idle
    # with six such sessions; polled alone at 500 Hz its backend was idle 3% of the time).
    idle = max(0, min(idle, step.clients * ticks - samples)) if ticks else idle
    return WaitProfile(step.engine, samples, counts, source, ticks, idle)


def sampler(p: WaitProfile) -> str:
    """Who took the samples of a profile, in words (its engine's sampler and source)."""
    return _vocabulary(p.engine).sampler(p.source)


def _pg_sampler(source: str) -> str:
    return "pg_stat_activity sampled at 10 Hz (sessions inside a transaction)"


def _my_sampler(source: str) -> str:
    if source == "performance_schema":
        return "performance_schema current waits sampled at 10 Hz (threads inside a transaction)"
    return "processlist states and INNODB_TRX sampled at 10 Hz (threads inside a transaction; no wait events)"


def _base_evidence(p: WaitProfile, cls: str, label: str) -> dict[str, Any]:
    return {
        "source": sampler(p),
        "backend_samples": p.samples,
        f"{label}_pct": num(100.0 * p.share(cls)),
        label: p.describe(p.keys_of(cls)),
        "top_waits": p.top(),
    }


def _steps_over(b: Bundle, cls: str, threshold: float, label: str
                ) -> Iterator[tuple[Step, WaitProfile, float, dict[str, Any]]]:
    """(step, profile, share, evidence) of each step whose wait class ``cls`` takes at least ``threshold``.

    Steps with fewer than :data:`MIN_WAIT_SAMPLES` samples are left out. The
    evidence starts as :func:`_base_evidence` with ``label`` naming the class's
    waits; the rule adds its own counters to it.
    """
    for step in steps(b):
        p = wait_profile(b, step)
        if p is None or p.samples < MIN_WAIT_SAMPLES or p.share(cls) < threshold:
            continue
        yield step, p, p.share(cls), _base_evidence(p, cls, label)


def _wait_finding(step: Step, category: str, title: str, ev: dict[str, Any], advice: str,
                  share: float) -> Finding:
    """A wait rule's finding: a warning whose impact is the class's share of the backends' time."""
    return step.finding(category, "warning", title, ev, advice, share, share=share)


# --------------------------------------------------------------------------- lock_contention


def lock_contention(b: Bundle) -> list[Finding]:
    """Row / transaction lock waits take at least :data:`LOCK_SHARE` of the backends' time."""
    out: list[Finding] = []
    for step, p, share, ev in _steps_over(b, "lock", LOCK_SHARE, "lock_waits"):
        top = p.keys_of("lock")[0][0]
        ev.update(_vocabulary(step.engine).lock_counters(b, step))
        ev.update(blocking_evidence(b, step))  # who blocked, how long, the chain (when a blocking sampler ran)
        if step.row.get("retries"):
            ev["retries"] = int(step.row["retries"])
        errors = step.row.get("errors") or {}
        if isinstance(errors, dict) and errors:
            ev["errors"] = ", ".join(f"{k}: {v}" for k, v in sorted(errors.items()))
        out.append(_wait_finding(
            step, "lock_contention",
            f"Lock waits take {pct(share)} of backend time ({top}){title_part(b, step)}", ev,
            "Transactions queue for the same rows. Keep the transactions that write them short: no client "
            "round trips, sleeps or slow statements between the write and COMMIT; take the hot row last; "
            "spread a hot counter over several rows; for work queues use SELECT ... FOR UPDATE SKIP LOCKED. "
            "More clients will not raise throughput while this lock is the bottleneck." + advice_part(b, step),
            share))
    return out


def _pg_lock_counters(b: Bundle, step: Step) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    stats = step.engine.stats_series
    waiting = gauge_mean(in_window(series(b, stats, step.target), step), "locks.waiting")
    if waiting is not None:
        ev["waiting_lock_requests_avg"] = num(waiting)
    d = counter_in_step(b, step, stats, "db.deadlocks")
    if d:
        ev["deadlocks"] = round(d)
    return ev


def _my_lock_counters(b: Bundle, step: Step) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    stats = step.engine.stats_series
    waits = counter_in_step(b, step, stats, "status.Innodb_row_lock_waits")
    ms = counter_in_step(b, step, stats, "status.Innodb_row_lock_time")
    if waits is not None:
        ev["row_lock_waits_per_s"] = num(waits / step.duration)
    if ms is not None and step.transactions:
        ev["row_lock_time_ms_per_txn"] = num(ms / step.transactions, 2)
    d = counter_in_step(b, step, stats, "status.Innodb_deadlocks")
    if d:
        ev["deadlocks"] = round(d)
    return ev


# --------------------------------------------------------------------------- latch_contention


def latch_contention(b: Bundle) -> list[Finding]:
    """LWLock / InnoDB mutex and rw-lock waits take at least :data:`LATCH_SHARE` of the backends' time."""
    out: list[Finding] = []
    for step, p, share, ev in _steps_over(b, "latch", LATCH_SHARE, "latch_waits"):
        top = p.keys_of("latch")[0][0]
        ev.update(_vocabulary(step.engine).latch_counters(b, step))
        advice = ("Backends queue on an internal latch, not on rows. " + _LATCH_ADVICE.get(
            top.lower(), "Look at which structure the latch protects (the top waits above) and at the top "
                         "symbols of the CPU profile; fewer concurrent clients (a connection pool sized near the "
                         "CPU count) usually raises throughput under latch contention."))
        out.append(_wait_finding(step, "latch_contention", f"Latch waits take {pct(share)} of backend time ({top})",
                                 ev, advice, share))
    return out


_LATCH_ADVICE = {
    "lwlock:lockmanager": "LockManager: many backends take locks on the same relations at once (more than the "
                          "16 fast-path slots per backend, e.g. partitions or many indexes); fewer partitions "
                          "touched per query or fewer connections help.",
    "lwlock:buffercontent": "BufferContent: backends write the same data pages at once (hot rows or an "
                            "ever-increasing index key); spread the writes or use fillfactor < 100.",
    "lwlock:buffermapping": "BufferMapping: buffers are being replaced fast; a larger shared_buffers helps.",
    "lwlock:walinsert": "WALInsert: many backends write WAL at once; fewer concurrent writers or larger "
                        "transactions help.",
    "lwlock:procarray": "ProcArray: many connections start and end transactions at once; a connection pool "
                        "sized near the CPU count helps.",
    "timeout:spindelay": "SpinDelay: a spinlock is so contended that backends sleep in it: fewer concurrent "
                         "backends than CPUs help.",
}


def _no_counters(b: Bundle, step: Step) -> dict[str, Any]:
    return {}


def _innodb_semaphores(b: Bundle, step: Step) -> dict[str, Any]:
    os_waits = [counter_in_step(b, step, step.engine.stats_series, f"innodb.semaphores.{k}") for k in
                ("mutex_os_waits", "rw_shared_os_waits", "rw_excl_os_waits", "rw_sx_os_waits")]
    got = [w for w in os_waits if w is not None]
    if not got or not step.transactions:
        return {}
    return {"innodb_latch_os_waits_per_txn": num(sum(got) / step.transactions, 3)}


# --------------------------------------------------------------------------- commit_flush_bound


def commit_flush_bound(b: Bundle) -> list[Finding]:
    """Waits for the WAL / redo flush at commit take at least :data:`FLUSH_SHARE` of the backends' time."""
    out: list[Finding] = []
    flushes = _flushes_per_commit(b)
    for step, p, share, ev in _steps_over(b, "commit_flush", FLUSH_SHARE, "flush_waits"):
        note = _vocabulary(p.engine).flush_note(p.source)
        if note:
            ev["note"] = note
        f = flushes.get((step.target, step.workload, step.clients))
        if f is not None:
            ev.update(f)
        lat = step.row.get("latency_ms") or {}
        if isinstance(lat.get("p50"), (int, float)):
            ev["latency_p50_ms"] = num(lat["p50"], 3)
        what = step.engine.log_name
        knobs = step.engine.group_commit_knobs
        if step.engine.group_commit_condition:
            knobs += f" ({step.engine.group_commit_condition})"
        out.append(_wait_finding(
            step, "commit_flush_bound", f"Commits wait for the {what} flush: {pct(share)} of backend time", ev,
            f"Each commit waits for its {what} to reach stable storage, so the disk's flush latency sets the "
            "commit rate. Keeping durability: group more changes per transaction, run more concurrent clients "
            f"so one flush carries several commits (group commit; {knobs}), or put the {what} on a device with "
            "a power-protected write cache. Relaxing the commit flush (synchronous_commit=off, "
            "innodb_flush_log_at_trx_commit=2) trades committed data for speed: say so beside any result.",
            share))
    return out


def _flushes_per_commit(b: Bundle) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Per step: commits/s and flush calls per commit, from the durability view."""
    out: dict[tuple[str, str, int], dict[str, Any]] = {}
    for s in durability_rows(b):
        ev: dict[str, Any] = {}
        if s.C is not None:
            ev["commits_per_s"] = num(s.C)
        if s.S_per_commit is not None:
            ev["flush_calls_per_commit"] = num(s.S_per_commit, 2)
            ev["flush_calls_source"] = s.S_source
        out[(s.target, s.workload, s.clients)] = ev
    return out


# --------------------------------------------------------------------------- io_read_bound


def io_read_bound(b: Bundle) -> list[Finding]:
    """Data-file read waits take at least :data:`IO_READ_SHARE` of the backends' time."""
    out: list[Finding] = []
    for step, _p, share, ev in _steps_over(b, "data_io", IO_READ_SHARE, "read_waits"):
        ev.update(_vocabulary(step.engine).cache_counters(b, step))
        cache = step.engine.buffer_pool_setting
        out.append(_wait_finding(
            step, "io_read_bound", f"Reads from disk take {pct(share)} of backend time", ev,
            f"The working set does not fit in memory: make {cache} (and the OS cache) large enough to hold it, "
            "or make queries read less (an index for a scanned predicate, fewer columns, smaller rows).",
            share))
    return out


def _pg_cache_counters(b: Bundle, step: Step) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    txn = step.transactions
    stats = step.engine.stats_series
    read = counter_in_step(b, step, stats, "db.blks_read")
    hit = counter_in_step(b, step, stats, "db.blks_hit")
    rtime = counter_in_step(b, step, stats, "db.blk_read_time")
    if read is not None and hit is not None and read + hit > 0:
        ev["shared_buffers_hit_pct"] = num(100.0 * hit / (read + hit), 2)
        if txn:
            ev["blocks_read_per_txn"] = num(read / txn, 2)
    if rtime and txn:
        ev["read_time_ms_per_txn"] = num(rtime / txn, 3)
    return ev


def _my_cache_counters(b: Bundle, step: Step) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    txn = step.transactions
    stats = step.engine.stats_series
    reads = counter_in_step(b, step, stats, "status.Innodb_buffer_pool_reads")
    reqs = counter_in_step(b, step, stats, "status.Innodb_buffer_pool_read_requests")
    if reads is not None and reqs:
        ev["buffer_pool_hit_pct"] = num(100.0 * (1 - reads / reqs), 2)
        if txn:
            ev["pages_read_from_disk_per_txn"] = num(reads / txn, 2)
    return ev


# --------------------------------------------------------------------------- per-engine vocabulary

Counters = Callable[[Bundle, Step], dict[str, Any]]


@dataclass(frozen=True)
class WaitVocabulary:
    """How one engine's wait samples read: who sampled them, the counters beside them."""

    sampler: Callable[[str], str]  # the records' source -> who sampled, in words
    flush_note: Callable[[str], str]  # the records' source -> what to know about its flush waits ("" = nothing)
    lock_counters: Counters  # the engine's own lock counters over a step (evidence of lock_contention)
    latch_counters: Counters  # ... of latch_contention
    cache_counters: Counters  # ... of io_read_bound


def _my_flush_note(source: str) -> str:
    if source == "performance_schema":
        return ""
    return ("thread state 'Commit' stands for the redo flush here: without performance_schema "
            "there are no wait events")


def _no_note(source: str) -> str:
    return ""


# Explicit registry, keyed by Engine.name.
VOCABULARY: dict[str, WaitVocabulary] = {
    POSTGRES.name: WaitVocabulary(_pg_sampler, _no_note, _pg_lock_counters, _no_counters,
                                  _pg_cache_counters),
    MYSQL.name: WaitVocabulary(_my_sampler, _my_flush_note, _my_lock_counters, _innodb_semaphores,
                               _my_cache_counters),
}


def _vocabulary(engine: Engine) -> WaitVocabulary:
    return VOCABULARY[engine.name]


def cache_counters(b: Bundle, step: Step) -> dict[str, Any]:
    """The engine's buffer pool counters over a step: hit share and reads from outside the pool per transaction
    (the evidence of io_read_bound and of reports.rules.cache)."""
    return _vocabulary(step.engine).cache_counters(b, step)
