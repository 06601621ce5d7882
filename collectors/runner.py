"""Runs each collector in its own process beside the workload.

A collector that raises mid-run is switched off with an event in the bundle;
the run goes on. Children ignore SIGINT: Ctrl-C reaches the orchestrator, which
stops them through an event so each can write its last record.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import time
import traceback
from dataclasses import dataclass
from typing import Any

from collectors.base import Collector, Probe
from diag.bundle import BundleWriter
from diag.errors import DiagError

_FORK = mp.get_context("fork")
JOIN_TIMEOUT_S = 10.0


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


def _loop(c: Collector, key: str, bundle_path: str, secrets: tuple[str, ...], stop: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    bundle = BundleWriter(bundle_path, secrets)
    out = bundle.series(key)

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
    except DiagError as e:
        bundle.event("collector_off", f"{key}: {e}", collector=key)
    except Exception as e:
        tb = traceback.format_exc(limit=3).strip().splitlines()[-1]
        bundle.event("collector_off", f"{key}: {type(e).__name__}: {e}", collector=key, detail=tb)
    finally:
        out.close()


class CollectorRunner:
    """Starts and stops one process per available collector."""

    def __init__(self, bundle: BundleWriter, collectors: list[Collector]) -> None:
        self.bundle = bundle
        self.collectors = collectors
        self.running: list[Running] = []
        self._stop = _FORK.Event()

    def start(self) -> None:
        for c in self.collectors:
            key = collector_key(c)
            p = _FORK.Process(target=_loop, args=(c, key, str(self.bundle.path), self.bundle.secrets, self._stop),
                              name=f"dbdiag-{key}", daemon=True)
            p.start()
            self.running.append(Running(key, c, p))

    def pids(self) -> list[int]:
        return [r.process.pid for r in self.running if r.process.pid]

    def stop(self) -> None:
        self._stop.set()
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        for r in self.running:
            r.process.join(max(0.1, deadline - time.monotonic()))
            if r.process.is_alive():
                r.process.terminate()
                r.process.join(2)
                self.bundle.event("collector_off", f"{r.key}: did not stop within {JOIN_TIMEOUT_S:.0f} s",
                                  collector=r.key)
        self.running.clear()
