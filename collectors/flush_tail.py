"""Flush tracing in each step's tail: the server's flush calls counted after the measured part, not in it.

Counting flush system calls with ``perf stat -p`` (:mod:`collectors.flush`) costs the load it counts: the
counters are inherited by every thread the server has, and a write load switches those threads in and out
all the time (each switch saves and restores them). Measured on a throwaway MariaDB, read-write at 4 clients:
~10% of throughput (BENCHMARKS.md, "MariaDB read-write: it is flush tracing"). So ``dbdiag run`` counts
them the way it profiles: in the tail of each step, the load's run-on after its measured part
(``DriverOptions.tail_s``, :mod:`workloads.steps.steptail`), and the row's ``flush_tail`` says what was
counted there. The measured part keeps what costs nothing: /proc/diskstats' device flushes (the sampled
:class:`collectors.flush.DeviceFlushCollector`) and the engine's own flush counters.

``flush_tail`` (Unix s, s, counts): ``t_start``/``t_end`` of the counting, ``seconds`` as perf timed it,
``counts`` {record key of :mod:`collectors.flush`: calls}, ``intervals`` [[s from ``t_start`` to the end of
each 100 ms interval, {key: calls}], ...], ``sources`` (perf events); or ``error``, why
nothing was counted (also an event, ``flush_tail_failed``). The durability view turns it into flush calls
per transaction at the load's rate while they were counted and that times the measured rate
(:mod:`reports.model.durability_tail`: exact for a load that flushes each commit by itself; with group commit
the tail's slower rate merges fewer commits per flush, so it is an upper bound then). A step cut short ends
before its tail: its count is cancelled, so no perf runs in the next step's measured part.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
from typing import Any

from collectors.base import Collector, CollectorContext, Probe, ServerFacts
from collectors.flush import FS_KEY, FS_SYNC_EVENTS, PERF_HINT, SYSCALL_EVENTS, devices_of, flush_paths, \
    server_processes
from collectors.flush_perf import IntervalAssembler, perf_error_reason, probe_perf_tracepoints
from diag.core.errors import DiagError, ParseError
from diag.core.procs import pdeathsig_preexec, stop_requested

LEAD_S = 0.3  # perf's start-up and attach to a server's threads (0.15 s here at 4 clients), before the window
# Of counting: hundreds of commits at any write rate worth judging. With profiles the tail is theirs too: this
# window starts with it and ends before their recording does (step_profiles.PERF_LEAD_S, 1 s in).
WINDOW_S = 0.6
SLACK_S = 0.2  # perf stops before the clients do
INTERVAL_MS = 100  # perf stat -I: its own clock times the window
ATTACH_RETRIES = 3  # a thread that exits between the listing and perf's attach makes perf fail: list again
PERF_SLACK_S = 3.0  # perf stat's start and end beyond its window, at most
JOIN_SLACK_S = 5.0
HURRY_JOIN_S = 1.0

StepKey = tuple[str, str, int]
NOT_COUNTED = "perf cannot count flush system calls"  # a probe's note per server: "<label>: NOT_COUNTED: why"


def tail_seconds() -> float:
    """Seconds of load after each step's measured part this source counts in."""
    return LEAD_S + WINDOW_S + SLACK_S


def perf_window_argv(perf: str, events: list[str], pids: list[int], seconds: float) -> list[str]:
    """``perf stat`` counting ``events`` of ``pids`` (inherited) for ``seconds``, per-interval CSV on stderr."""
    return [perf, "stat", "-e", ",".join(events), "-x", ",", "-I", str(INTERVAL_MS),
            "-p", ",".join(str(p) for p in pids), "--", "sleep", f"{seconds:g}"]


def interval_counts(lines: list[str], events: dict[str, str]) -> list[tuple[float, dict[str, int]]]:
    """Each interval of ``perf stat -I -x,`` output: (s from perf's start to the interval's end, {record key:
    calls}), in order."""
    asm = IntervalAssembler([e for v in events.values() for e in v.split(",")])
    done = []
    for line in lines:
        try:
            done.append(asm.feed(line))
        except ParseError:
            continue
    done.append(asm.flush())
    return [(got[0], {k: sum(got[1].get(e) or 0 for e in v.split(",")) for k, v in events.items()})
            for got in done if got is not None]


class FlushTailSource(Collector):
    """``perf stat`` of each local server's flush calls in every step's tail; the row's ``flush_tail``."""

    name = "flush_tail"
    row_fields = ("flush_tail",)
    title = "flush tracing"
    per_target = False
    sampled = False

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.perf = shutil.which(str(ctx.options.get("perf", "perf"))) or "perf"
        self.events: dict[str, dict[str, str]] = {}  # by target label: record key -> perf event(s)
        self._jobs: dict[StepKey, _Job] = {}

    def probe(self) -> Probe:
        """Each local server's filesystem sync tracepoint and the syscall ones, counted on it for 0.1 s."""
        local = [s for s in self.ctx.servers if s.local and s.pid]
        if not local:
            return Probe(False, "no server of this run is on this machine: its flush calls cannot be counted "
                         "from here", "run dbdiag on the database host to count its flush calls")
        missing: list[str] = []
        why = ""
        for srv in local:
            fs_events = self._fs_events(srv)
            ok, why = probe_perf_tracepoints(int(srv.pid or 0), [*SYSCALL_EVENTS.values(), *fs_events], self.perf)
            if ok:
                self.events[srv.label] = {**SYSCALL_EVENTS, **({FS_KEY: ",".join(fs_events)} if fs_events else {})}
                continue
            ok2, why2 = probe_perf_tracepoints(int(srv.pid or 0), list(SYSCALL_EVENTS.values()), self.perf)
            if ok2:
                self.events[srv.label] = dict(SYSCALL_EVENTS)
                missing.append(f"{srv.label}: filesystem syncs ({', '.join(fs_events)}): {why}")
            else:
                why = why2
                missing.append(f"{srv.label}: {NOT_COUNTED}: {why}")
        if not self.events:
            return Probe(False, f"{NOT_COUNTED}: {why}", PERF_HINT, tuple(missing))
        return Probe(True, "perf in each step's tail, after the measured part", "", tuple(missing))

    @staticmethod
    def _fs_events(srv: ServerFacts) -> list[str]:
        if not srv.data_dir or srv.engine is None:
            return []
        with contextlib.suppress(DiagError, OSError):
            infos = devices_of(flush_paths(srv.engine, srv.data_dir))
            return [FS_SYNC_EVENTS[i.fs_type] for i in infos if i.fs_type in FS_SYNC_EVENTS]
        return []

    def tail_s(self, duration_s: float) -> float:
        return tail_seconds()

    def sample(self) -> None:
        return None

    def step_started(self, info: Any) -> None:
        srv = self.ctx.server(info.target)
        if srv is None or not srv.pid or info.target not in self.events or not getattr(info, "tail_s", 0.0):
            return
        key = (info.target, info.workload, info.clients)
        job = _Job(info, srv.pid)
        job.thread = threading.Thread(target=self._count, args=(job,), daemon=True, name="dbdiag-flush-tail")
        self._jobs[key] = job
        job.thread.start()

    def _count(self, job: _Job) -> None:
        """Sleep to the tail, count WINDOW_S there (perf's own clock), keep what it counted or why not."""
        info = job.info
        events = self.events[info.target]
        window = max(0.2, min(WINDOW_S, float(info.tail_s) - LEAD_S - SLACK_S))
        delay = info.t_start + info.duration_s - time.time()
        if delay > 0 and _sleep(delay, job.cancel):
            return
        flat = [e for v in events.values() for e in v.split(",")]
        why = f"perf did not attach in {ATTACH_RETRIES} tries: the server's processes came and went"
        for _ in range(ATTACH_RETRIES):
            pids = server_processes(job.pid)
            if not pids:
                job.out = {"error": "the server's processes are gone"}
                return
            with job.lock:
                if job.cancel.is_set():  # the step is over (cut short): no perf in the next one's measured part
                    return
                try:
                    job.perf = subprocess.Popen(perf_window_argv(self.perf, flat, pids, window),
                                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                stderr=subprocess.PIPE, text=True, preexec_fn=pdeathsig_preexec())
                except OSError as e:
                    job.out = {"error": f"cannot run perf: {e.strerror}"}
                    return
            t0 = time.time()
            try:
                _, err = job.perf.communicate(timeout=window + PERF_SLACK_S)
            except subprocess.TimeoutExpired:
                job.perf.kill()
                job.perf.communicate()
                job.out = {"error": f"perf stat did not end within {window + PERF_SLACK_S:g} s"}
                return
            t1 = time.time()
            if job.cancel.is_set():
                return
            if job.perf.returncode == 0:
                per = interval_counts(err.splitlines(), events)
                seconds = max((t for t, _ in per), default=0.0)
                counts = {k: sum(c.get(k, 0) for _, c in per) for k in events}
                # Each interval too (s from the window's start to its end, calls): on a busy machine perf can
                # start late and count past the tail into the clients' stop; the report keeps what fell inside.
                job.out = ({"t_start": round(t1 - seconds, 3), "t_end": round(t1, 3), "seconds": round(seconds, 3),
                            "counts": counts, "intervals": [[round(t, 3), c] for t, c in per], "sources": flat,
                            "attach_s": round(max(0.0, t1 - t0 - seconds), 3)}
                           if seconds > 0 else {"error": "perf stat counted no interval"})
                return
            why = perf_error_reason(err)
            if "exited before perf could attach" not in why:
                break
        job.out = {"error": why}

    def step_finished(self, info: Any) -> dict[str, Any] | None:
        job = self._jobs.pop((info.target, info.workload, info.clients), None)
        if job is None:
            return None
        if job.thread is not None:
            job.thread.join(HURRY_JOIN_S if stop_requested() else WINDOW_S + LEAD_S + JOIN_SLACK_S)
        with job.lock:  # a step cut short ends before its tail: its count must not run in the next step
            job.cancel.set()
            if job.perf is not None and job.perf.poll() is None:
                job.perf.kill()
        out = job.out
        if out is None:
            return None
        if out.get("error") and self.ctx.bundle is not None:
            self.ctx.bundle.event("flush_tail_failed", f"flush tracing ({info.target}): {out['error']}",
                                  target=info.target, workload=info.workload, clients=info.clients)
        return {"flush_tail": out}


class _Job:
    """One step's count: the step, the server's PID, the thread, its perf and what it found (``out``)."""

    def __init__(self, info: Any, pid: int) -> None:
        self.info, self.pid = info, pid
        self.cancel = threading.Event()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.perf: subprocess.Popen[str] | None = None
        self.out: dict[str, Any] | None = None


def _sleep(seconds: float, cancel: threading.Event) -> bool:
    """Sleep ``seconds`` in short naps; True when the run was asked to stop or the step ended meanwhile."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if stop_requested() or cancel.wait(min(0.1, left)):
            return True
    return bool(stop_requested())


