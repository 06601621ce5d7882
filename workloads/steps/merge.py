"""Merging many clients' figures into one step: per-interval records and the step's totals.

Pure: no processes, no pipes, no clock reads, no output. The caller feeds it
the clients' messages (:mod:`workloads.steps.messages`) with the client's index and
asks, when it wakes up, which intervals are ready to write (:meth:`IntervalMerger.ready`),
and at the end for the rest (:meth:`IntervalMerger.rest`).

An interval is ready when every client still running has reported it (a client
that reported a later interval has nothing more for it), or, for a client that
is late or gone silent, ``grace_ns`` after the interval's end, and only when the
caller has read every message the clients had sent (``drained``): a parent that
is behind (200 clients on 2 CPUs: it got its reports seconds late) must not take
its own lateness for the clients'. The step's last interval waits for every
client (:meth:`IntervalMerger.rest`). A late report that arrives after its
interval was written counts in the first interval not yet written (``moved``
counts those transactions), so nothing is lost and nothing is counted twice. Latency counts
(and each statement's) are summed as ``{µs: count}`` dicts and go into the step's HDR histograms once,
when an interval is merged: recording each client's part in Python cost the parent about one HDR
``record_value`` per transaction (200 clients' reports of ~280 distinct values each per second at 57,000
tps: 3.7 µs per transaction, a fifth of a core taken from the server's CPUs, issue 26).

An interval's percentiles are read from its sparse counts (:func:`summary_ms`),
with the values an HDR histogram of them would give, but without one: a fresh
histogram per interval (188 KB of counts; it and its encoder refer to each
other, so only the cyclic garbage collector frees it) piled up between
collections and fragmented the heap, and the orchestrator's resident memory
grew through a long step (BENCHMARKS.md, Soak).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from itertools import accumulate

from hdrh.histogram import HdrHistogram

from workloads import hist
from workloads.steps.messages import Done, Go, IntervalCounts

SAMPLES_PER_CODE = 3
INTERVAL_PERCENTILES = {k: p for k, p in hist.PERCENTILES.items() if k != "p999"}
_SHAPE = hist.new()  # only its bucket layout is used (never recorded into): the value a latency reads back as


def summary_ms(counts: Mapping[int, int]) -> dict[str, float]:
    """p50, p95, p99 and max (ms) of sparse ``{µs: count}``: equal to ``hist.summary_ms(h, with_p999=False)``
    of an HDR histogram ``h`` recorded with them (``hist.record``), computed as HdrHistogram does (the
    target count of a percentile, the first value whose cumulative count reaches it, read back as the
    highest value of its bucket), without allocating one. One sort and one running sum at C speed: an
    interval at 200 clients holds thousands of distinct values, and a Python pass per percentile over them
    was the orchestrator's largest cost (issue 26)."""
    keys = sorted(counts)  # clamping (below) keeps this order
    cum = list(accumulate(int(counts[us]) for us in keys))
    total = cum[-1] if cum else 0
    if total == 0:
        return {**{k: 0.0 for k in INTERVAL_PERCENTILES}, "max": 0.0}

    def read(us: int) -> float:
        us = min(max(int(us), hist.LOWEST_US), hist.HIGHEST_US)
        return round(_SHAPE.get_highest_equivalent_value(us) / 1000.0, 3)

    out: dict[str, float] = {}
    for key, pct in INTERVAL_PERCENTILES.items():
        target = max(int((min(pct, 100.0) * total / 100) + 0.5), 1)  # HdrHistogram's target count
        out[key] = read(keys[bisect_left(cum, target)])
    out["max"] = read(keys[-1])
    return out


@dataclass(frozen=True)
class Merged:
    """One report interval of all clients. Times in ``perf_counter_ns``; ``seconds`` is its length
    (the last one may be cut short by the end or a stop); latency in ms (p50, p95, p99, max)."""

    k: int
    end_ns: int
    seconds: float
    transactions: int
    queries: int
    errors: int
    retries: int
    latency_ms: dict[str, float]
    cpu_s: float   # client processes' CPU seconds, summed
    reconnects: int = 0   # connections re-established by the clients in the interval
    latency_us: Mapping[int, int] | None = None  # the interval's sparse latencies {µs: count} (its histogram)
    connect_ns: int = 0   # spent opening connections (--connect-per-transaction), inside the latencies


class Totals:
    """The whole step's sums, from the first measured interval on (warmup excluded by the clients)."""

    __slots__ = ("transactions", "queries", "retries", "reconnects", "errors", "samples", "extra", "cpu_s",
                 "cpu_by_client", "latency", "statements", "connect_ns")

    def __init__(self) -> None:
        self.transactions = self.queries = self.retries = self.reconnects = self.connect_ns = 0
        self.errors: Counter[str] = Counter()        # {code: count}: failed transactions and failed clients
        self.samples: dict[str, list[str]] = {}     # {code: up to SAMPLES_PER_CODE messages}
        self.extra: Counter[str] = Counter()         # workload counters
        self.cpu_s = 0.0                             # client processes' CPU seconds, all clients
        self.cpu_by_client: dict[int, float] = {}    # {client index: CPU seconds}
        self.latency: HdrHistogram = hist.new()      # every merged interval's latencies, µs
        self.statements: dict[str, HdrHistogram] = {}  # per statement (native executor), µs

    def client_error(self, code: str, message: str) -> None:
        """A client that failed as a whole (could not start, timed out, vanished): one error of ``code``."""
        self.errors[code] += 1
        self._sample(code, message)

    def client_done(self, idx: int, msg: Done) -> None:
        self.cpu_s += msg.cpu_s
        self.cpu_by_client[idx] = msg.cpu_s
        for code, messages in msg.samples.items():
            for m in messages:
                self._sample(code, m)

    def _sample(self, code: str, message: str) -> None:
        s = self.samples.setdefault(code, [])
        if len(s) < SAMPLES_PER_CODE and message not in s:
            s.append(message)


class _Interval:
    """One report interval being gathered."""

    __slots__ = ("txns", "queries", "errors", "retries", "reconnects", "counts", "statements", "cpu", "reported",
                 "connect_ns")

    def __init__(self) -> None:
        self.txns = self.queries = self.errors = self.retries = self.reconnects = self.connect_ns = 0
        self.counts: Counter[int] = Counter()
        self.statements: dict[str, Counter[int]] = {}  # per statement, {µs: count}, summed as counts is
        self.cpu = 0.0
        self.reported: set[int] = set()   # indexes of the clients that are through with it


class IntervalMerger:
    """Intervals of the step planned by ``plan``, merged from every client's :class:`IntervalCounts`.

    ``totals`` (a new one when not given) takes every figure too. Intervals are
    handed out once each, in order, from 0 up to the one holding ``plan.end_ns``.
    With a ``tail`` (:class:`Totals`), intervals from ``measured_k`` on (the load's run-on after the measured
    part, where profiles record) add into it instead of ``totals``.
    """

    def __init__(self, plan: Go, totals: Totals | None = None, tail: Totals | None = None,
                 measured_k: int | None = None) -> None:
        self.plan = plan
        self.totals = totals if totals is not None else Totals()
        self.tail = tail
        self.measured_k = measured_k if tail is not None and measured_k is not None else None
        # A client's report is due at its first tick past the interval's end; a busy machine delays a tick
        # by a transaction's latency (measured: p99 0.3-0.5 s, max 1.2 s at 200 clients on 2 loaded CPUs).
        self.grace_ns = max(plan.interval_ns, 2_000_000_000)
        self.next_k = 0   # the first interval not handed out yet
        self.moved = 0    # transactions of late reports counted in a later interval than their own
        last = max((plan.end_ns - plan.measure_ns - 1) // plan.interval_ns, 0)
        self._waits = {last} | ({self.measured_k - 1} if self.measured_k else set())  # never by grace
        self._open: dict[int, _Interval] = {}

    def add(self, idx: int, m: IntervalCounts) -> None:
        """Client ``idx`` reports interval ``m.k``."""
        t = self.totals_of(max(m.k, self.next_k))
        t.transactions += m.transactions
        t.queries += m.queries
        t.retries += m.retries
        t.reconnects += m.reconnects
        t.connect_ns += m.connect_ns
        t.errors.update(m.errors)
        t.extra.update(m.extra)
        k = max(m.k, self.next_k)  # late: into the first interval still open (the last waits for all)
        if k != m.k:
            self.moved += m.transactions
        iv = self._open.get(k)
        if iv is None:
            iv = self._open[k] = _Interval()
        for stmt, counts in m.statement_latency_us.items():
            if stmt not in t.statements:  # here, so the statements keep the order they were first seen in
                t.statements[stmt] = hist.new()
            c = iv.statements.get(stmt)
            if c is None:
                c = iv.statements[stmt] = Counter()
            c.update(counts)
        iv.txns += m.transactions
        iv.queries += m.queries
        iv.retries += m.retries
        iv.reconnects += m.reconnects
        iv.connect_ns += m.connect_ns
        iv.errors += sum(m.errors.values())
        iv.cpu += m.cpu_s
        iv.counts.update(m.latency_us)
        iv.reported.add(idx)
        for kk in range(self.next_k, m.k):  # a client that passed k has nothing more for earlier ones
            self._open.setdefault(kk, _Interval()).reported.add(idx)

    def totals_of(self, k: int) -> Totals:
        """The sums interval ``k`` adds into: the tail's past the measured part, else the step's."""
        if self.tail is not None and self.measured_k is not None and k >= self.measured_k:
            return self.tail
        return self.totals

    def in_tail(self, k: int) -> bool:
        """Interval ``k`` is past the measured part (the tail)."""
        return self.totals_of(k) is not self.totals

    def ready(self, now_ns: int, live: Collection[int], drained: bool = True) -> list[Merged]:
        """The intervals over by ``now_ns`` that every client in ``live`` has reported, or that are overdue
        when ``drained`` (the caller read all that the clients had sent) and not the last of the step or of
        its measured part (so a late report is never counted past it)."""
        out: list[Merged] = []
        p = self.plan
        while True:
            k = self.next_k
            b_start = p.measure_ns + k * p.interval_ns
            if b_start >= p.end_ns:
                return out
            b_end = min(b_start + p.interval_ns, p.end_ns)
            if now_ns < b_end:
                return out
            iv = self._open.get(k)
            complete = iv is not None and iv.reported.issuperset(live)
            if not complete and (not drained or k in self._waits or now_ns < b_end + self.grace_ns):
                return out
            out.append(self._merge(k, b_end))

    def rest(self, stopped_ns: int) -> list[Merged]:
        """At the step's end (``stopped_ns``: the end, or earlier on a stop): every interval not handed out
        up to the stop, empty ones included, and any later one that has figures; the last is cut at the stop."""
        out: list[Merged] = []
        p = self.plan
        last = max(self._open, default=-1)
        k = self.next_k
        while True:
            b_start = p.measure_ns + k * p.interval_ns
            if b_start >= p.end_ns or (b_start >= stopped_ns and k > last):
                return out
            out.append(self._merge(k, min(b_start + p.interval_ns, p.end_ns, max(stopped_ns, b_start + 1))))
            k += 1

    def _merge(self, k: int, b_end: int) -> Merged:
        iv = self._open.pop(k, None) or _Interval()
        self.next_k = k + 1
        secs = max((b_end - (self.plan.measure_ns + k * self.plan.interval_ns)) / 1e9, 1e-9)
        totals = self.totals_of(k)
        hist.record(totals.latency, iv.counts)
        for stmt, counts in iv.statements.items():
            hist.record(totals.statements[stmt], counts)
        return Merged(k, b_end, secs, iv.txns, iv.queries, iv.errors, iv.retries, summary_ms(iv.counts), iv.cpu,
                      iv.reconnects, iv.counts, iv.connect_ns)
