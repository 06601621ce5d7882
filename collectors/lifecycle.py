"""The one lifecycle every source goes through: probe -> start -> sample (own cadence) -> stop, plus step hooks.

A run makes its sources with :func:`collectors.registry.sources_for` and hands
each batch (the run-wide ones, then each target's) to :meth:`Lifecycle.start`:
every source is probed, the probe is recorded in run.json ``collectors`` (and
said once when a source is off), in-process sources are started in order in
this process, and sampled ones each in their own process
(:class:`collectors.runner.CollectorRunner`). Their declared metrics go into
run.json ``metrics`` keyed by series name (``{"pg_stats--LABEL": [{"name",
"unit", "kind", "description"}, ...]}``) so reports know counter from gauge.
A source with ``ready_timeout_s`` is waited for before clients connect.
:meth:`Lifecycle.stop` ends a batch; the step hooks go to every started source.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.base import Collector, Probe
from collectors.runner import CollectorRunner, Running, collector_key, probe_all
from diag.core.bundle import BundleWriter, read_jsonl, safe_name
from diag.core.errors import DiagError
from diag.core.schema import BundleFormatError, ResultRow, with_part


class SharedPids:
    """A list of PIDs shared with collector processes (fork): the current step's clients, the collectors.

    No lock: the run is the only writer, and a reader checks a sequence number (odd while a write is under
    way; read again if it changed). A lock here could be left held by a collector killed mid-read
    (terminated at the end of a run), and the run's next ``set`` would wait for ever."""

    def __init__(self, size: int = 1024) -> None:
        self._arr = mp.get_context("fork").Array("i", size + 2, lock=False)  # [sequence, n, pid...]

    def set(self, pids: list[int] | tuple[int, ...]) -> None:
        a = self._arr
        pids = list(pids)[: len(a) - 2]
        a[0] += 1  # odd: readers wait for the write to end
        for i, p in enumerate(pids):
            a[i + 2] = p
        a[1] = len(pids)
        a[0] += 1

    def __call__(self) -> list[int]:
        a = self._arr
        out: list[int] = []
        for _ in range(10_000):  # a write takes microseconds; bounded all the same
            seq = a[0]
            if seq % 2:
                time.sleep(0.0001)
                continue
            out = [a[i + 2] for i in range(a[1])]
            if a[0] == seq:
                return out
        return out


def wait_for_series(path: Path, process: Any, timeout_s: float) -> bool:
    """True once ``series/`` file ``path`` has a record, False when ``process`` (its collector) ended or on timeout.

    The flush collector writes its first record once perf counts, so waiting for it
    before clients connect keeps their backends from forking before perf attaches.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if path.stat().st_size > 0:
                return True
        if not process.is_alive():
            return False
        time.sleep(0.05)
    return False


@dataclass
class Batch:
    """Sources started together (the run's, or one target's)."""

    in_process: list[Collector] = field(default_factory=list)
    runner: CollectorRunner | None = None


RunnerFactory = Callable[[BundleWriter, list[Collector]], CollectorRunner]


class Lifecycle:
    """Probes, starts and stops batches of sources for one run; passes the step hooks on.

    ``write_run(updates)`` merges top-level keys into run.json; ``say(text)``
    prints one line for the user. ``runner`` makes the process runner of a
    batch's sampled sources (a benchmark may substitute a filtering one).
    """

    def __init__(self, bundle: BundleWriter, write_run: Callable[[dict[str, Any]], None],
                 say: Callable[[str], None], runner: RunnerFactory = CollectorRunner) -> None:
        self.bundle = bundle
        self.write_run = write_run
        self.say = say
        self.runner = runner
        self.client_pids = SharedPids()
        self.client_roots = SharedPids(64)  # the step's Dask workers on this host: their trees are clients
        self.collector_pids = SharedPids(256)
        self.probes: dict[str, dict[str, Any]] = {}
        self.metrics: dict[str, list[dict[str, str]]] = {}
        self.batches: list[Batch] = []

    def record(self, probes: dict[str, Probe], quiet: Collection[str] = (),
               titles: Mapping[str, str] | None = None) -> None:
        """Store probe results in run.json and say once why a source is off or missing a part.

        ``titles``: how the notes name a source for people ("server profiles"), by key; the key otherwise.
        """
        self.probes.update({k: p.to_dict() for k, p in probes.items()})
        self.write_run({"collectors": dict(self.probes)})
        for k, p in probes.items():
            if k in quiet:
                continue
            name = (titles or {}).get(k) or k
            if not p.ok:
                self.say(f"dbdiag: note: {name} not collected: {p.reason}" + (f" ({p.hint})" if p.hint else ""))
            for m in p.missing:
                self.say(f"dbdiag: note: {name}: {m}")

    def start(self, sources: list[Collector], strict: bool = False) -> Batch:
        """Probe, record, start: in-process sources in order, then the sampled ones in their processes.

        ``strict``: a started source that is not ready within its ``ready_timeout_s``
        raises DiagError (after this batch is stopped again).
        """
        probes = probe_all(sources)
        self.record(probes, {collector_key(c) for c in sources if c.quiet},
                    {collector_key(c): f"{c.title} ({c.ctx.target.label})" if c.per_target else c.title
                     for c in sources if c.title})
        ok = [c for c in sources if probes[collector_key(c)].ok and not c.quiet]
        batch = Batch()
        self.batches.append(batch)
        try:
            for c in (c for c in ok if not c.sampled):
                c.start()
                batch.in_process.append(c)
                facts = c.facts()
                if facts:
                    self.write_run(facts)
            sampled = [c for c in ok if c.sampled]
            if sampled:
                self.metrics.update({collector_key(c): c.declared() for c in sampled})
                self.write_run({"metrics": dict(self.metrics)})
                batch.runner = self.runner(self.bundle, sampled)
                batch.runner.start()
                self._collector_pids()
                self._wait_ready(batch.runner, strict)
        except BaseException:
            self.stop(batch)
            raise
        return batch

    def _wait_ready(self, runner: CollectorRunner, strict: bool) -> None:
        for r in runner.running:
            timeout = r.collector.ready_timeout_s
            if timeout is None:
                continue
            if wait_for_series(self.bundle.path / "series" / f"{safe_name(r.key)}.jsonl", r.process, timeout):
                continue
            if strict:
                why = "; ".join(e.get("message", "") for e in read_jsonl(self.bundle.path / "events.jsonl")
                                if e.get("kind") == "collector_off" and e.get("collector") == r.key)
                title = r.collector.title or r.collector.name
                raise DiagError(f"{title} did not start: {why or f'no record within {timeout:g} s'}")

    def _collector_pids(self) -> None:
        self.collector_pids.set([p for b in self.batches if b.runner for p in b.runner.pids()])

    def stop(self, batch: Batch) -> None:
        """Stop a batch: its sampled sources' processes (each writes its last record), then in-process ones."""
        try:
            if batch.runner is not None:
                running = list(batch.runner.running)  # stop() forgets them
                batch.runner.stop()
                self._say_stopped(running)
        finally:
            for c in reversed(batch.in_process):
                with contextlib.suppress(DiagError):
                    c.stop()
            if batch in self.batches:
                self.batches.remove(batch)
            self._collector_pids()

    def _say_stopped(self, running: list[Running]) -> None:
        """One line per source of the batch whose evidence stopped mid-run (a node_exporter gone): the report
        says it too, but a run that looked fine on the terminal should not hide it there."""
        keys = {r.key: r.collector for r in running}
        for e in read_jsonl(self.bundle.path / "events.jsonl"):
            c = keys.get(str(e.get("collector")))
            if e.get("kind") == "collector_off" and c is not None and "stopped_at" in e:
                name = f"{c.title} ({c.ctx.target.label})" if c.title and c.per_target else c.title or c.name
                msg = str(e.get("message") or "").split(": ", 1)[-1]
                self.say(f"dbdiag: note: {name}: {msg}")

    def step_started(self, info: Any) -> None:
        """A step begins: share its client PIDs (and client trees' roots), tell every started in-process source."""
        self.client_pids.set(list(info.client_pids))
        self.client_roots.set(list(getattr(info, "client_roots", ())))
        for c in self._in_process():
            c.step_started(info)

    def step_finished(self, info: Any, row: ResultRow) -> ResultRow:
        """A step ended: its row with each in-process source's part in it (:func:`with_part`: only the fields
        the source declares; a failing source adds nothing, and a part of the wrong shape adds nothing and is
        an event)."""
        for c in self._in_process():
            with contextlib.suppress(DiagError):
                part = c.step_finished(info)
                if not part:
                    continue
                try:
                    row = with_part(row, part, c.row_fields, c.name)
                except BundleFormatError as e:
                    self.bundle.event("source_part_refused", f"{c.name}: its part of the step's row was left out: {e}",
                                      collector=c.name, target=row.target, workload=row.workload, clients=row.clients)
        self.client_pids.set([])
        self.client_roots.set([])
        return row

    def _in_process(self) -> list[Collector]:
        return [c for b in self.batches for c in b.in_process]
