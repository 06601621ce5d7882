"""Client load from several hosts: each step's clients spread over the workers of a Dask cluster (``--workers``).

dask.distributed (an existing scheduler/worker engine, ``pip install 'dbdiag[dask]'``)
carries the work: for each step the orchestrator splits the client count over
the scheduler's workers (as evenly as it goes, the first ones taking the
remainder), submits one task per worker pinned to it
(:func:`workloads.remote.remote_step.worker_task`: the same Step, client pool and query
loop as a local step, in a child process on that host), and merges what comes
back exactly: transactions, queries, errors, retries and reconnects add; the
latency histogram is the HDR sum of the workers' histograms; interval k of the
step is the sum of every worker's interval k (the workers start their clients at
the same Unix time, so interval k covers the same second on each, to within the
hosts' clock offset). Each worker reports its host's CPU busy share over the
step: at or above :data:`SATURATED_PCT` the row says that host's clients may be
the limit.

A worker that leaves the cluster, fails its task or has not answered
:data:`END_GRACE_S` after the step's planned end is handled like a lost client:
its clients are counted in ``lost_clients``, the worker is named in
``workers_lost`` with the reason, and the step's row says ``complete: false``.

Each worker streams its intervals as its clients report them (a Dask worker event
per interval on the step's topic), each with its HDR latency histogram (``hdr``);
interval k of the step is written to ``series/workload--<target>.jsonl`` once every
worker has sent its interval k or ended, its counts added and its histogram the HDR
sum of theirs (so its p50/p95/p99/max are what a local step's interval says), and
the workers' own interval k records to ``series/workers--<target>.jsonl``: the
series grows while the step runs. The step's histogram and the result rows come
with each worker's answer at the end of its share.

Workers on this host (same kernel boot and process, :func:`workloads.remote.remote_step.on_this_host`)
are the step's client trees for the host evidence (``StepInfo.client_roots``): their
CPU is the clients', not other processes'. distributed's log lines go to the
bundle (``artifacts/dask-client.log``) while a sweep holds the cluster (:class:`Cluster`). A lost worker's
streamed intervals stay in the series (what it measured before it was lost, as a
lost client's do); its transactions are ``lost_transactions`` in the row, outside
the row's totals and histogram, which are those of the workers that answered.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import pickle
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from diag.core.bundle import BundleWriter, SeriesWriter, safe_name
from diag.core.errors import DiagError, ToolUnavailable, UsageError
from diag.core.schema import ResultRow
from diag.core.targets import Target
from workloads import hist
from workloads.base import Workload
from workloads.steps.options import StepHooks, StepPlan
from workloads.remote.remote_step import WorkerSpec, on_this_host, whoami, worker_task
from workloads.steps.window import StepWindow

START_DELAY_S = 2.0   # between submitting and the common start: the tasks reach every worker first
END_GRACE_S = 15.0    # past the step's planned end (clients connect, the child process starts)
SATURATED_PCT = 90.0  # a worker host this busy over the step: its clients may be the limit


# Seconds a worker must stay missing from the scheduler's worker list (the client's copy, refreshed every few
# seconds) before its share counts as lost: a share on a worker that was still working was once counted lost
# with the worker that was killed beside it, on a busy machine.
ABSENT_S = 1.0


def worker_saturated(busy_pct: float, this_host: bool) -> bool:
    """Whether a worker's host was busy enough (``busy_pct``: CPU busy share over the step, 0..100) that its
    clients may be the limit. A worker on the orchestrator's own host shares it with the server (and the host
    collector already counts its clients' CPU as clients, so the step's limit judges that host): its busy
    share says nothing of the clients alone, and would flag every busy local run."""
    return busy_pct >= SATURATED_PCT and not this_host
CONNECT_TIMEOUT_S = 10.0
_ADD = ("transactions", "queries", "retries", "reconnects")
LOG_NAME = "dask-client.log"  # under artifacts/: distributed's own log lines while the sweep used the cluster
_LOGGERS = ("distributed", "tornado", "bokeh")  # the ones distributed's logging config gives a stderr handler


def _distributed() -> Any:
    """The dask.distributed module (an extra: imported when --workers is used, never at this module's import)."""
    try:
        return importlib.import_module("distributed")
    except ImportError:
        raise ToolUnavailable("--workers needs dask.distributed: pip install 'dbdiag[dask]'") from None


def connect(address: str) -> Any:
    """A dask.distributed Client of the scheduler at ``address``; ToolUnavailable / DiagError in one line."""
    distributed = _distributed()
    try:
        # A malformed address fails inside Client() with a ValueError and leaves a half-made Client whose
        # finaliser prints a traceback 20 s later: check it first.
        distributed.comm.get_address_host_port(address)
    except ValueError as e:
        raise UsageError(f"--workers {address}: not a Dask scheduler address (tcp://HOST:PORT): {e}") from None
    try:
        return distributed.Client(address, timeout=f"{CONNECT_TIMEOUT_S:g}s", set_as_default=False)
    except (OSError, TimeoutError) as e:
        raise DiagError(f"--workers {address}: cannot reach the Dask scheduler: {e}") from None


class _ScrubbingFormatter(logging.Formatter):
    """A formatter whose lines pass through ``scrub`` (no password reaches the log file)."""

    def __init__(self, fmt: str, scrub: Callable[[str], str]) -> None:
        super().__init__(fmt)
        self.scrub = scrub

    def format(self, record: logging.LogRecord) -> str:
        return self.scrub(super().format(record))


class _LogsToFile:
    """While it is open, every ``distributed`` / ``tornado`` logger that writes to the terminal writes to
    ``path`` instead: a scheduler that dies mid-step is the step's one line, not that beside distributed's
    own ERROR lines (which stay in the bundle, ``artifacts/dask-client.log``)."""

    def __init__(self, path: Path, scrub: Callable[[str], str] = str) -> None:
        """``scrub``: the bundle's (BundleWriter.scrub): a logged task or address may quote a DSN."""
        self.handler = logging.FileHandler(path, encoding="utf-8", delay=True)
        self.handler.setFormatter(_ScrubbingFormatter("%(asctime)s %(name)s %(levelname)s: %(message)s", scrub))
        self.saved: list[tuple[logging.Logger, list[logging.Handler]]] = []
        for name, lg in list(logging.root.manager.loggerDict.items()):
            if isinstance(lg, logging.Logger) and lg.handlers and name.split(".")[0] in _LOGGERS:
                self.saved.append((lg, list(lg.handlers)))
                lg.handlers = [self.handler]

    def restore(self) -> None:
        for lg, handlers in self.saved:
            lg.handlers = handlers
        self.saved = []
        self.handler.close()


class Cluster:
    """The sweep's connection to the Dask scheduler at ``address`` (``.client``); distributed's log lines go
    to the bundle (:class:`_LogsToFile`) until :meth:`close`."""

    def __init__(self, address: str, bundle: BundleWriter) -> None:
        _distributed()  # importing it gives its loggers their terminal handlers, which the next line moves
        self._logs = _LogsToFile(bundle.artifact(LOG_NAME), bundle.scrub)
        try:
            self.client = connect(address)
        except BaseException:
            self._logs.restore()
            raise

    def close(self) -> None:
        try:
            with contextlib.suppress(_closed_client(), OSError, TimeoutError):
                self.client.close()
        finally:
            self._logs.restore()


def _closed_client() -> type[Exception]:
    """distributed's error for a call on a client whose scheduler connection is gone (distributed is imported
    by :func:`connect`, never at this module's import: it is an extra)."""
    return importlib.import_module("distributed.client").ClosedClientError


def split_clients(n: int, workers: int) -> list[int]:
    """``n`` clients over ``workers`` workers: as even as possible, the first ones take the remainder;
    fewer than ``workers`` clients use the first ``n`` workers only."""
    if workers <= 0:
        return []
    base, extra = divmod(n, workers)
    return [base + (1 if i < extra else 0) for i in range(workers) if base + (1 if i < extra else 0) > 0]


def share_starts(split: Sequence[int]) -> list[int]:
    """The step's index of each share's first client: share i runs clients ``starts[i]`` ..
    ``starts[i] + split[i] - 1``, so every client of the step has its own index across workers."""
    return [sum(split[:i]) for i in range(len(split))]


def merge_interval(parts: Sequence[dict[str, Any]], into: Any = None) -> dict[str, Any]:
    """One interval of the step from the shares' same interval: counts add (``t`` and length: the latest of
    them); the latency histogram is the HDR sum of the shares' (``hdr``, each worker's interval k), so
    ``latency_ms`` (p50, p95, p99, max) is what a local step's interval of all these clients would say.
    ``into``: a histogram to sum in (emptied first, reused: see :func:`workloads.hist.encode_counts`).
    A part without ``hdr`` (a worker running an older dbdiag) leaves the interval with counts only."""
    rec: dict[str, Any] = {key: sum(int(p.get(key) or 0) for p in parts) for key in _ADD}
    rec["errors"] = sum(int(p.get("errors") or 0) for p in parts)
    rec["t"] = max(float(p["t"]) for p in parts)
    rec["interval_s"] = max(float(p.get("interval_s") or 0) for p in parts)
    rec["workload"], rec["clients"] = parts[0].get("workload"), sum(int(p.get("clients") or 0) for p in parts)
    rec["workers"] = len(parts)
    if all(p.get("hdr") for p in parts):
        h = into if into is not None else hist.new()
        h.reset()
        for p in parts:
            h.decode_and_add(p["hdr"])
        rec["latency_ms"] = hist.summary_ms(h, with_p999=False)
        rec["hdr"] = hist.encode(h)
    return rec


class IntervalStream:
    """The step's intervals as the shares stream them: interval k is ready once every share has sent its
    interval k or has ended (answered, with its final list, or lost, with what it sent before)."""

    def __init__(self, shares: int) -> None:
        self.recs: list[list[dict[str, Any]]] = [[] for _ in range(shares)]
        self.ended: set[int] = set()
        self.next_k = 0
        self._hist = hist.new()  # every interval's merge sums in this one

    def add(self, share: int, rec: dict[str, Any]) -> None:
        self.recs[share].append(rec)

    def end(self, share: int, final: Sequence[dict[str, Any]] | None = None) -> None:
        """Share ``share`` is over: its ``final`` intervals (the answer) replace what it streamed."""
        if final is not None:
            self.recs[share] = list(final)
        self.ended.add(share)

    def ready(self) -> list[tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]]:
        """The merged intervals not handed out before that every share has settled, each with its parts
        (share index, that share's record)."""
        out: list[tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]] = []
        while True:
            k = self.next_k
            if not any(len(r) > k for r in self.recs):
                return out
            if not all(len(r) > k or s in self.ended for s, r in enumerate(self.recs)):
                return out
            parts = [(s, r[k]) for s, r in enumerate(self.recs) if len(r) > k]
            out.append((merge_interval([p for _, p in parts], self._hist), parts))
            self.next_k += 1


def merge_rows(rows: Sequence[ResultRow], hdrs: Sequence[str]) -> ResultRow:
    """The step's row from the workers' rows: counts add, tps and qps add (each over its own measured
    window, which all share), the latency summary is that of the HDR sum of the histograms."""
    errors: dict[str, int] = {}
    for r in rows:
        for code, n in r.errors.items():
            errors[code] = errors.get(code, 0) + int(n)
    h = hist.new()
    for text in hdrs:
        if text:
            h.add(hist.decode(text))

    def added(get: Callable[[ResultRow], Any]) -> float:
        return round(sum(float(get(r) or 0.0) for r in rows), 3)

    return replace(rows[0], transactions=sum(r.transactions or 0 for r in rows),
                   retries=sum(r.retries or 0 for r in rows), reconnects=sum(r.reconnects or 0 for r in rows),
                   tps=added(lambda r: r.tps), qps=added(lambda r: r.qps), client_cpu_s=added(lambda r: r.client_cpu_s),
                   errors=errors, error_samples={}, latency_ms=hist.summary_ms(h),
                   t_start=min(float(r.t_start or 0) for r in rows), t_end=max(float(r.t_end or 0) for r in rows),
                   complete=all(r.complete is not False for r in rows),
                   client_cpu_pct=None,  # a share of whose CPUs? per worker in the step's row
                   interval_tps=(), extra={**rows[0].extra, "queries": sum(int(r.extra.get("queries") or 0) for r in rows)},
                   # a share that lost the server says so for the step (the first worker's may not have)
                   server_lost=next((r.server_lost for r in rows if r.server_lost), None))


class DaskStep:
    """One step spread over the workers of ``client`` (a dask.distributed Client); :meth:`run` returns its row.

    The step's lifecycle is :class:`~workloads.steps.window.StepWindow`'s, as a local step's: this fills the
    window with the workers' shares (their streamed intervals merged into the step's series, their rows and
    histograms into its row)."""

    def __init__(self, client: Any, target: Target, wl: Workload, plan: StepPlan,
                 bundle: BundleWriter, series: SeriesWriter, seed: int, hooks: StepHooks | None = None) -> None:
        self.plan = plan
        self.client, self.target, self.wl, self.n, self.opts = client, target, wl, plan.clients, plan.options
        self.bundle, self.seed = bundle, seed
        self.window = StepWindow(plan, bundle, series, hooks)  # the step's lifecycle; this fills it
        self._workers: list[str] = []
        self._parts: SeriesWriter | None = None  # series/workers--<target>: each share's interval k as merged
        self._events: deque[tuple[int, dict[str, Any]]] = deque()  # (share, interval) from the workers
        self._here: dict[str, int] = {}  # the step's workers on this host: address -> PID

    @property
    def row(self) -> ResultRow | None:
        """The step's result row, once written (None when it was cut before: a Dask step writes no cut row)."""
        return self.window.row

    def _submit(self, workers: list[str], split: list[int], start: float, timeout_s: float, topic: str
                ) -> list[Any]:
        tag = uuid.uuid4().hex[:8]
        futures = []
        for i, (w, k, first) in enumerate(zip(workers, split, share_starts(split))):
            spec = WorkerSpec(self.target, self.wl, k, self.opts, self.seed * 1000 + i, start, first, self.n)
            futures.append(self.client.submit(worker_task, pickle.dumps(spec), timeout_s, topic, i, workers=[w],
                                              allow_other_workers=False, pure=False,
                                              key=f"dbdiag-{safe_name(self.target.label)}-{self.wl.name}-c{self.n}"
                                                  f"-w{i}-{tag}"))
        return futures

    def run(self) -> ResultRow:
        present = self._present()
        if present is None:  # the scheduler went away between two steps
            raise DiagError("--workers: the Dask scheduler is gone")
        if not present:
            raise DiagError("--workers: the Dask scheduler has no workers")
        workers = sorted(present)
        split = split_clients(self.n, len(workers))
        workers = workers[:len(split)]
        self._here = self._on_this_host(workers)
        self._workers = workers
        start = time.time() + START_DELAY_S
        planned_end = start + self.opts.warmup_s + self.plan.duration_s
        topic = f"dbdiag-intervals-{uuid.uuid4().hex[:12]}"
        try:
            self.client.subscribe_topic(topic, self._on_event)
        except _closed_client() as e:  # the scheduler went away between two steps
            raise DiagError(f"--workers: the Dask scheduler is gone: {e}") from None
        self._parts = self.bundle.series(f"workers--{self.target.label}")
        try:
            futures = self._submit(workers, split, start, planned_end - time.time() + END_GRACE_S, topic)
            return self._measure(futures, workers, split, start, planned_end)
        finally:
            self._parts.close()
            # A scheduler that died during the step closed the client: the step's own error (its shares were
            # cancelled) says so; unsubscribing then raised ClosedClientError over it, as a traceback.
            with contextlib.suppress(_closed_client()):
                self.client.unsubscribe_topic(topic)

    def _present(self) -> set[str] | None:
        """The scheduler's workers now; None once the client has lost the scheduler (its scheduler_info is
        then empty: reading ``["workers"]`` of it was a KeyError traceback when the scheduler died mid-step)."""
        info = self.client.scheduler_info()
        return set(info["workers"]) if isinstance(info, dict) and "workers" in info else None

    def _on_this_host(self, workers: list[str]) -> dict[str, int]:
        """The step's workers that run on this host, by address: their PIDs. This machine's host evidence counts
        their process trees as the step's clients (else their load reads as other processes). A worker that
        does not answer is taken as remote: its host is judged from its own CPU share, as any remote one."""
        try:
            seen = self.client.run(whoami, workers=workers, on_error="return")
        except (_closed_client(), OSError, TimeoutError):
            return {}
        return {w: int(who["pid"]) for w, who in seen.items() if w in workers and on_this_host(who)}

    def _on_event(self, event: Any) -> None:
        """A worker's interval (``(timestamp, {"share", "record"})``, in the Dask client's thread)."""
        msg = event[1] if isinstance(event, tuple) else event
        self._events.append((int(msg["share"]), dict(msg["record"])))

    def _measure(self, futures: list[Any], workers: list[str], split: list[int], start: float,
                 planned_end: float) -> ResultRow:
        """From the common start to the row: the step hooks at the measured part's start, the shares'
        intervals written as they come, their answers merged."""
        measure = start + self.opts.warmup_s
        time.sleep(max(0.0, measure - time.time()))
        self.window.start(self.plan.duration_s, measure, (), tuple(self._here.values()),
                          how=f" on {len(workers)} Dask worker(s)", workers=workers)
        stream = IntervalStream(len(futures))
        shares, lost = self._gather(futures, workers, split, planned_end + END_GRACE_S, stream)
        row = self._finish(shares, lost)
        row = replace(row, extra={**row.extra, "lost_transactions": sum(
            int(r.get("transactions") or 0) for i in (w["share"] for w in lost) for r in stream.recs[i])})
        return self.window.finish(row, f"{row.tps or 0:g} tps from {len(shares)} worker(s)"
                                  + (f", {row.extra['lost_clients']} client(s) lost with their worker" if lost else ""))

    def _write_ready(self, stream: IntervalStream) -> None:
        while self._events:
            stream.add(*self._events.popleft())
        rep = self.window.rep
        for rec, parts in stream.ready():
            rec.update(rep)
            self.window.interval(rec, rec["interval_s"], rec["transactions"])
            if self._parts is not None:
                for i, part in parts:
                    self._parts.write({**part, "share": i, "worker": self._workers[i], **rep})

    def _gather(self, futures: list[Any], workers: list[str], split: list[int], deadline: float,
                stream: IntervalStream) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Wait for every share until ``deadline``, writing each interval once all shares have it; a worker
        that left, failed or is late is a lost one (what it streamed before stays in the series)."""
        shares: list[dict[str, Any]] = []
        lost: list[dict[str, Any]] = []
        pending = dict(enumerate(futures))
        absent: dict[int, float] = {}  # share -> when its worker was first missing from the scheduler's list
        while pending and time.time() < deadline:
            # The scheduler is asked which workers are present only for a share still running, once a round:
            # when the scheduler has died the client cancels every share at once, while asking would block for
            # the client's whole reconnect timeout (CONNECT_TIMEOUT_S) before the shares could be counted lost.
            present: set[str] | None = None
            asked = False
            for i, f in list(pending.items()):
                why = ""
                if f.status == "finished":
                    res = f.result()
                    shares.append({**res, "worker": workers[i], "clients": split[i]})
                    self._write_ready(stream)  # what it streamed first, in order
                    stream.end(i, res["intervals"])
                elif f.status in ("error", "cancelled"):
                    why = f"task failed: {f.exception()}" if f.status == "error" else "task cancelled"
                else:
                    if not asked:
                        present, asked = self._present(), True
                    if present is None:
                        why = "the Dask scheduler is gone"
                    elif workers[i] in present:
                        absent.pop(i, None)
                        continue
                    elif time.time() - absent.setdefault(i, time.time()) < ABSENT_S:
                        continue  # the client's copy of the list can lag: lost only when missing for a while
                    else:
                        why = "the worker left the cluster mid-step"
                del pending[i]
                if why:
                    lost.append({"worker": workers[i], "clients": split[i], "reason": why, "share": i})
                    self._write_ready(stream)
                    stream.end(i)
            self._write_ready(stream)
            time.sleep(0.2)
        for i, f in pending.items():
            f.cancel()
            lost.append({"worker": workers[i], "clients": split[i], "share": i,
                         "reason": f"no answer {END_GRACE_S:g} s after the step's planned end"})
            stream.end(i)
        self._write_ready(stream)
        return shares, lost

    def _finish(self, shares: list[dict[str, Any]], lost: list[dict[str, Any]]) -> ResultRow:
        for w in lost:
            msg = f"{self.window.name}: worker {w['worker']} lost ({w['reason']}): " \
                  f"its {w['clients']} client(s) counted as lost, the step is incomplete"
            self.window.event("workload_worker_lost", msg, worker=w["worker"], lost_clients=w["clients"])
        if not shares:
            raise DiagError(f"{self.window.name}: no Dask worker returned its share "
                            f"({'; '.join(w['reason'] for w in lost)})")
        rows = [ResultRow.from_dict(s["row"], f"worker {s['worker']}'s row") for s in shares]
        merged = merge_rows(rows, [s["hdr"] for s in shares])
        workers = [{"worker": s["worker"], "host": s["host"]["hostname"], "clients": s["clients"],
                    "transactions": r.transactions, "tps": r.tps, "latency_ms": r.latency_ms,
                    "host_cpu_busy_pct": s["host"]["busy_pct"], "client_cpu_pct": r.client_cpu_pct,
                    "this_host": s["worker"] in self._here,
                    "saturated": worker_saturated(s["host"]["busy_pct"], s["worker"] in self._here)}
                   for s, r in zip(shares, rows)]
        for w in workers:
            if w["saturated"]:
                self.window.event("workload_worker_saturated", f"{self.window.name}: worker host {w['host']} was "
                                  f"{w['host_cpu_busy_pct']:g}% CPU busy: its clients may be the limit",
                                  worker=w["worker"])
        h = hist.new()
        for i, (s, w) in enumerate(zip(shares, workers)):
            if s["hdr"]:
                h.add(hist.decode(s["hdr"]))
                w["histogram"] = self.window.histogram(s["hdr"], f"--w{i}")
        histogram = self.window.histogram(hist.encode(h))
        return replace(merged, clients=self.n, complete=bool(merged.complete) and not lost,
                       extra={**merged.extra, "workers": workers, "workers_lost": lost,
                              "lost_clients": sum(w["clients"] for w in lost), "histogram": histogram})
