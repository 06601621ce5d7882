"""Findings from the sampled wait profile: lock, latch, commit-flush and read waits.

Source: series ``pg_waits--<label>`` (pg_stat_activity at 10 Hz) and
``my_waits--<label>`` (performance_schema current waits, or processlist
states plus INNODB_TRX at 10 Hz). Each record counts (backend, tick) samples
of sessions inside a transaction; a class's share is its samples over all
samples in the step's window: the share of the backends' time spent there.
The profile, who sampled it and the share thresholds are :mod:`reports.model.wait_profiles`' (the
limits read the same ones).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from diag.core.bundle import Bundle
from diag.core.engines import WAIT_CLASSES
from reports.model.durability_view import durability_rows
from reports.model.steps import Finding, Step, num, pct, steps
from reports.model.wait_profiles import (FLUSH_SHARE, IO_READ_SHARE, LATCH_SHARE, LOCK_SHARE, MIN_WAIT_SAMPLES,
                                         WaitProfile, sampler, wait_profile)
from reports.rules.blocking import advice_part, blocking_evidence, title_part
from reports.rules.engines import rule_parts
from reports.rules.pool import page_cache_misses

CLASSES = WAIT_CLASSES


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
        ev.update(rule_parts(step.engine).lock_counters(b, step))
        ev.update(blocking_evidence(b, step))  # who blocked, how long, the chain (when a blocking sampler ran)
        if step.row.retries:
            ev["retries"] = step.row.retries
        errors = step.row.errors
        if errors:
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


# --------------------------------------------------------------------------- latch_contention


def latch_contention(b: Bundle) -> list[Finding]:
    """LWLock / InnoDB mutex and rw-lock waits take at least :data:`LATCH_SHARE` of the backends' time."""
    out: list[Finding] = []
    for step, p, share, ev in _steps_over(b, "latch", LATCH_SHARE, "latch_waits"):
        top = p.keys_of("latch")[0][0]
        ev.update(rule_parts(step.engine).latch_counters(b, step))
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


# --------------------------------------------------------------------------- commit_flush_bound


def commit_flush_bound(b: Bundle) -> list[Finding]:
    """Waits for the WAL / redo flush at commit take at least :data:`FLUSH_SHARE` of the backends' time."""
    out: list[Finding] = []
    flushes = _flushes_per_commit(b)
    for step, p, share, ev in _steps_over(b, "commit_flush", FLUSH_SHARE, "flush_waits"):
        note = rule_parts(p.engine).flush_note(p.source)
        if note:
            ev["note"] = note
        f = flushes.get(step.key)
        if f is not None:
            ev.update(f)
        lat = step.row.latency_ms
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
        out[s.key] = ev
    return out


# --------------------------------------------------------------------------- io_read_bound


def io_read_bound(b: Bundle) -> list[Finding]:
    """Data-file read waits take at least :data:`IO_READ_SHARE` of the backends' time, unless the pool's
    counters name the reads and the server timed them at memory speed (:func:`reports.rules.pool.page_cache_misses`:
    :func:`reports.rules.cache.buffer_pool_misses` names those)."""
    out: list[Finding] = []
    for step, _p, share, ev in _steps_over(b, "data_io", IO_READ_SHARE, "read_waits"):
        ev.update(rule_parts(step.engine).cache_counters(b, step))
        if page_cache_misses(ev):
            continue
        cache = step.engine.buffer_pool_setting
        out.append(_wait_finding(
            step, "io_read_bound", f"Reads from disk take {pct(share)} of backend time", ev,
            f"The working set does not fit in memory: make {cache} (and the OS cache) large enough to hold it, "
            "or make queries read less (an index for a scanned predicate, fewer columns, smaller rows).",
            share))
    return out


def cache_counters(b: Bundle, step: Step) -> dict[str, Any]:
    """The engine's buffer pool counters over a step: hit share and reads from outside the pool per transaction
    (the evidence of io_read_bound and of reports.rules.cache)."""
    return rule_parts(step.engine).cache_counters(b, step)
