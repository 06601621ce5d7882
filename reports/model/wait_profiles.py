"""The sampled wait profile of a step, who sampled it, and the wait-share thresholds.

Source: series ``pg_waits--<label>`` (pg_stat_activity at 10 Hz) and
``my_waits--<label>`` (performance_schema current waits, or processlist
states plus INNODB_TRX at 10 Hz). Each record counts (backend, tick) samples
of sessions inside a transaction; a class's share is its samples over all
samples in the step's window: the share of the backends' time spent there.
The accounting, the limits and the wait findings (:mod:`reports.rules.waits`)
read them through here, so a limit and a finding name a class from the same
share and the same threshold.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from diag.core.bundle import Bundle, safe_name
from diag.core.engines import Engine
from reports.model.steps import Step, pct, series_in_window

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


def wait_class(engine: Engine, key: str) -> str:
    """The class of one wait-profile key (one of :data:`diag.core.engines.WAIT_CLASSES`): the engine maps it."""
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
    """The merged wait samples of a step, or None when no wait sampler ran for its target; made once per
    bundle and step (the rules, the accounting and the views ask ~15 times; an hour's step has 36,000 ticks)."""
    series = b.series.get(safe_name(f"{step.engine.waits_series}--{step.target}"), [])
    key = ("wait_profile", step.target, step.workload, step.clients, step.t0, step.t1, len(series))
    return b.memo(key, lambda: _wait_profile(b, step))


def _wait_profile(b: Bundle, step: Step) -> WaitProfile | None:
    recs = series_in_window(b, step.engine.waits_series, step)
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
    """Who took the samples of a profile, in words (its engine's sampler of the profile's source)."""
    texts = p.engine.wait_samplers
    return texts.get(p.source) or texts.get("", "")
