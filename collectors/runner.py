"""Runs each collector in its own process beside the workload.

A collector that raises mid-run is switched off with an event in the bundle;
the run goes on. One that cannot write the bundle (full disk, I/O error) does
not retry: it stops its source and exits with
:attr:`diag.core.bundle.BundleWriteError.exit_status`, which the orchestrator's
bundle writer polls (:meth:`CollectorRunner.failure`), so the run stops with
one line naming the file. Children ignore SIGINT: Ctrl-C reaches the orchestrator, which
stops them through a :class:`diag.core.procs.StopFlag` (a pipe: no lock a dead child can leave held) so each
can write its last record; one that does not stop in time is terminated, then killed (every join bounded). Children die
with the run (:func:`diag.core.procs.guard_child`): a killed run leaves no collector
polling its servers.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import signal
import time
import traceback
from dataclasses import dataclass
from typing import Any

from collectors.base import Collector, Probe
from diag.core.bundle import BundleWriteError, BundleWriter, safe_name
from diag.core.errors import DiagError, SourceStopped
from diag.core.procs import StopFlag, guard_child, stop_requested

_FORK = mp.get_context("fork")
JOIN_TIMEOUT_S = 10.0
HURRY_JOIN_S = 2.0   # once the run was asked to stop (Ctrl-C, SIGTERM, SIGHUP): the whole stop in a few seconds
KILL_JOIN_S = 1.0    # after terminate(), and again after kill()


@dataclass
class Running:
    """A started collector process."""

    key: str
    collector: Collector
    process: Any


def collector_key(c: Collector) -> str:
    """``name--label`` for per-target collectors, ``name`` for run-wide ones."""
    return f"{c.name}--{c.ctx.target.label}" if c.per_target else c.name


def probe_all(collectors: list[Collector]) -> dict[str, Probe]:
    """Probe every collector; a probe that raises counts as unavailable with its message."""
    out: dict[str, Probe] = {}
    for c in collectors:
        try:
            out[collector_key(c)] = c.probe()
        except DiagError as e:
            out[collector_key(c)] = Probe(False, str(e))
        except Exception as e:  # a bug in a probe must not stop the run; say what it was
            out[collector_key(c)] = Probe(False, f"probe failed: {type(e).__name__}: {e}")
    return out


def _loop(c: Collector, key: str, bundle_path: str, secrets: tuple[str, ...], stop: Any, parent: int) -> None:
    guard_child(parent)  # first: the run may already be gone
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        bundle = BundleWriter(bundle_path, secrets)
        out = bundle.series(key)
    except BundleWriteError as e:
        raise SystemExit(e.exit_status) from None  # the exit status is how this process tells the run
    try:
        _sample(c, key, bundle, out, stop)
    except BundleWriteError as e:
        with contextlib.suppress(Exception):  # its own children (perf) end with it; its records are lost anyway
            c.stop()
        with contextlib.suppress(DiagError):  # the event may not fit either
            bundle.event("collector_off", f"{key}: {e}", collector=key)
        raise SystemExit(e.exit_status) from None
    finally:
        out.close()


def _sample(c: Collector, key: str, bundle: BundleWriter, out: Any, stop: Any) -> None:
    """start, sample on the collector's cadence until ``stop``, stop; a failing collector is switched off."""

    def emit(recs: Any) -> None:
        if recs is None:
            return
        now = time.time()
        for r in recs if isinstance(recs, list) else [recs]:
            r.setdefault("t", now)
            out.write(r)

    try:
        c.start()
        next_t = time.monotonic()
        while not stop.is_set():
            emit(c.sample())
            next_t += c.interval_s
            delay = next_t - time.monotonic()
            if delay < 0:  # fell behind (slow query): skip ticks rather than burst
                next_t = time.monotonic()
                delay = 0
            stop.wait(delay)
        emit(c.stop())
    except BundleWriteError:
        raise
    except SourceStopped as e:  # where its series ends and why, for the report
        bundle.event("collector_off", f"{key}: {e}", collector=key, **e.fields())
    except DiagError as e:
        bundle.event("collector_off", f"{key}: {e}", collector=key)
    except Exception as e:
        tb = traceback.format_exc(limit=3).strip().splitlines()[-1]
        bundle.event("collector_off", f"{key}: {type(e).__name__}: {e}", collector=key, detail=tb)


class CollectorRunner:
    """Starts and stops one process per available collector."""

    def __init__(self, bundle: BundleWriter, collectors: list[Collector]) -> None:
        self.bundle = bundle
        self.collectors = collectors
        self.running: list[Running] = []
        self._stop = StopFlag()

    def start(self) -> None:
        # Each child inherits the run's objects (tens of thousands); its first full collection would walk them all,
        # writing to each one's header and so copying every page that holds one: ~30 ms of CPU and ~11 MiB a child
        # (measured on this VM, 35,000 objects after importing diag.run), repeated in every collector process.
        # Frozen, a child's collections skip them; the run unfreezes its own once the children are forked.
        gc.freeze()
        try:
            for c in self.collectors:
                key = collector_key(c)
                p = _FORK.Process(target=_loop, args=(c, key, str(self.bundle.path), self.bundle.secrets,
                                                      self._stop, os.getpid()),
                                  name=f"dbdiag-{key}", daemon=True)
                p.start()
                self.running.append(Running(key, c, p))
        finally:
            gc.unfreeze()
        self.bundle.watch(self.failure)

    def failure(self) -> BundleWriteError | None:
        """The write failure a collector process exited with, if one did (polling: never blocks)."""
        for r in self.running:
            err = BundleWriteError.from_exit_status(r.process.exitcode, self.bundle.path,
                                                    f"series/{safe_name(r.key)}.jsonl")
            if err is not None:
                return err
        return None

    def pids(self) -> list[int]:
        return [r.process.pid for r in self.running if r.process.pid]

    def stop(self) -> None:
        """Stop every process; raises the BundleWriteError one of them exited with, unless already raised."""
        self._stop.set()
        self.bundle.unwatch(self.failure)
        limit = HURRY_JOIN_S if stop_requested() else JOIN_TIMEOUT_S
        deadline = time.monotonic() + limit
        for r in self.running:
            r.process.join(max(0.1, deadline - time.monotonic()))
        late = [r for r in self.running if r.process.is_alive()]
        for sig_end in ("terminate", "kill"):  # SIGTERM is a collector's default; SIGKILL if stuck in C
            for r in late:
                if r.process.is_alive():
                    getattr(r.process, sig_end)()
            until = time.monotonic() + KILL_JOIN_S
            for r in late:
                r.process.join(max(0.01, until - time.monotonic()))
        for r in late:
            with contextlib.suppress(BundleWriteError):  # the others must still be stopped
                self.bundle.event("collector_off", f"{r.key}: did not stop within {limit:.0f} s", collector=r.key)
        self._stop.close()
        err = self.failure()
        self.running.clear()
        if err is not None:
            self.bundle.report(err)
