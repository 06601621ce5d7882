"""Profiles as in-process sources: perf of the server in the middle of each step, py-spy of the clients.

Both work from the step hooks (see :mod:`collectors.base`): ``step_started``
starts a thread that sleeps until the step's tail, the load's run-on after its
measured part that the run asks for (:meth:`_StepThreads.tail_s`,
``DriverOptions.tail_s``, :mod:`workloads.steps.steptail`), and records
``profile_seconds`` there, so the step's figures are never the profiled load's
and perf script runs after the step (centred on the measured part when a
step has no tail: Dask workers); perf / py-spy run as child processes;
``step_finished`` joins it and returns what goes into that step's results.json
row (``profile`` / ``client_profile``). Options: ``profile_seconds`` (s).

Stacks on every server: the first window of each target unwinds with DWARF
while a CHECK_S frame-pointer recording runs beside it; when under USABLE_MIN
of the check's samples have a usable stack
(:func:`~collectors.profile.analyse.usable_stack`: the embedded PostgreSQL 18
is built without frame pointers), the target's later windows unwind with DWARF
too, at DWARF_FREQ_HZ to bound perf.data and ``perf script``'s time; else
with frame pointers at FREQ_HZ.

Beside each window, OFFCPU_S of the scheduler's tracepoints record where the
server's threads block (:mod:`collectors.profile.offcpu`), into the row's
``profile.offcpu``. Both need system-wide recording; when it is refused
(``kernel.perf_event_paranoid`` 2, no CAP_PERFMON) the servers this user owns
are profiled per process in user space and the probe says what is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.base import Collector, CollectorContext, Probe
from collectors.host import process_tree
from collectors.profile.analyse import symbol_hint, unresolved_share, usable_share
from collectors.profile.offcpu import MAX_TIDS, fold_offcpu, record_offcpu, samples_of
from collectors.profile.parse import save_folded
from collectors.profile.procs import kind_lookup, process_kinds, stack_thread_kinds
from collectors.profile.pyspy import py_spy_available, record_client_profile
from collectors.profile.record import (DWARF_STACK_BYTES, ProfileRecording, Scope, per_process_note, probe_perf,
                                       record_profile)
from diag.core.bundle import BundleWriter, safe_name
from diag.core.errors import DiagError
from diag.core.procs import stop_requested

JOIN_SLACK_S = 30.0  # perf script on a few seconds of samples takes well under this here
HURRY_JOIN_S = 1.0  # once a stop was asked for
MIN_WINDOW_S = 0.5
WINDOW_SHARE = 0.8  # of the step, at most: the window stays inside the measured part
FREQ_HZ = 499
DWARF_FREQ_HZ = 249  # each DWARF sample carries DWARF_STACK_BYTES of stack: half the rate, half the data
CHECK_S = 0.5  # frame-pointer check at the start of a target's first window
CHECK_MIN_SAMPLES = 20  # fewer (an idle server): no verdict, this window unwinds with DWARF
USABLE_MIN = 0.5  # share of the check's samples with a usable stack that keeps frame pointers
PERF_LEAD_S = 1.0  # perf is launched this much before its window (less if the step has no room): its start-up
OFFCPU_S = 1.0  # scheduler tracepoints fire per context switch (~1 per query): a short window bounds perf script
TAIL_SLACK_S = 0.25  # of a step's tail after the window: perf stops before the clients do

StepKey = tuple[str, str, int]


def _key(info: Any) -> StepKey:
    return (info.target, info.workload, info.clients)


def window_s(duration_s: float, seconds: float) -> float:
    """The recording window of a step measuring ``duration_s``: ``seconds`` (--profile-seconds), at most
    WINDOW_SHARE of the step, at least MIN_WINDOW_S."""
    return min(seconds, max(MIN_WINDOW_S, duration_s * WINDOW_SHARE))


def tail_s(duration_s: float, seconds: float) -> float:
    """Seconds of load after the measured part a profile needs (``DriverOptions.tail_s``): perf's start-up
    (PERF_LEAD_S), the window, TAIL_SLACK_S for perf to stop before the clients do."""
    return PERF_LEAD_S + window_s(duration_s, seconds) + TAIL_SLACK_S


def _window(info: Any, seconds: float) -> tuple[float, float]:
    """(length, delay from now) of a recording window of at most ``seconds``: in the step's tail after its
    measured part (``info.tail_s``, launched at the tail's start), so the step's figures are not the
    profiled load's; centred on the measured part when the step has no tail (Dask workers)."""
    tail = float(getattr(info, "tail_s", 0.0) or 0.0)
    if tail > 0:
        window = max(MIN_WINDOW_S, min(seconds, tail - PERF_LEAD_S - TAIL_SLACK_S))
        return window, max(0.0, info.t_start + info.duration_s + min(PERF_LEAD_S, tail - window) - time.time())
    window = window_s(info.duration_s, seconds)
    return window, max(0.0, info.t_start + info.duration_s / 2 - window / 2 - time.time())


class _StepThreads(Collector):
    """One recording thread per step; subclasses implement :meth:`_record` and name the result key."""

    per_target = False
    sampled = False
    result_key = ""

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.seconds = float(ctx.options.get("profile_seconds", 3.0))
        self._threads: dict[StepKey, threading.Thread] = {}
        self._out: dict[StepKey, dict[str, Any]] = {}

    @property
    def bundle(self) -> BundleWriter:
        if self.ctx.bundle is None:
            raise DiagError(f"{self.name}: no run bundle to write into")
        return self.ctx.bundle

    def _spawn(self, info: Any, *args: Any) -> None:
        th = threading.Thread(target=self._guarded, args=(_key(info), info, *args), daemon=True)
        self._threads[_key(info)] = th
        th.start()

    def _guarded(self, key: StepKey, info: Any, *args: Any) -> None:
        # A full or failing disk under the bundle: the run's own writes fail and stop it with one line;
        # this thread only ends (an uncaught error here would print a traceback).
        with contextlib.suppress(OSError, DiagError):
            self._record(key, info, *args)

    def _record(self, key: StepKey, info: Any, *args: Any) -> None:
        raise NotImplementedError

    def sample(self) -> None:
        return None

    def tail_s(self, duration_s: float) -> float:
        """Seconds of load after each step's measured part this source records in (module :func:`tail_s`)."""
        return tail_s(duration_s, self.seconds)

    def step_finished(self, info: Any) -> dict[str, Any] | None:
        th = self._threads.pop(_key(info), None)
        if th is None:
            return None
        # Once the run was asked to stop (Ctrl-C, SIGTERM), a window under way is not waited for: its perf
        # dies with the run (parent-death signal) and the row goes without its profile.
        th.join(HURRY_JOIN_S if stop_requested() else self.seconds + JOIN_SLACK_S)
        out = self._out.pop(_key(info), None)
        return {self.result_key: out} if out else None


@dataclass(frozen=True)
class Unwinder:
    """How one target's stacks are walked, and why: the frame-pointer check's numbers."""

    call_graph: str  # "fp" or "dwarf"
    reason: str
    check_share: float | None = None  # usable share of the check's samples
    check_samples: int = 0


def choose_unwinder(check: ProfileRecording) -> Unwinder | None:
    """Frame pointers when the check's stacks are usable, DWARF when not; None when too few samples to say."""
    if check.samples < CHECK_MIN_SAMPLES:
        return None
    share = usable_share(check.folded)
    said = f"frame pointers gave {100 * share:.0f}% usable stacks in a {CHECK_S:g} s check ({check.samples} samples)"
    if share >= USABLE_MIN:
        return Unwinder("fp", said, share, check.samples)
    return Unwinder("dwarf", said + f": DWARF unwinding ({DWARF_STACK_BYTES // 1024} KiB of stack per sample, "
                    f"{DWARF_FREQ_HZ} Hz)", share, check.samples)


class ServerProfileSource(_StepThreads):
    """perf record of a local server's processes in the middle of each step; folded stacks to artifacts/."""

    name = "profile"
    title = "server profiles"
    result_key = "profile"
    row_fields = ("profile",)

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.scope: Scope = "system"
        self._unwinders: dict[str, Unwinder] = {}  # by target label, decided in its first window

    def probe(self) -> Probe:
        """System-wide when allowed; else per process in user space, the parts missing said once."""
        ok, why_not, _ = probe_perf(scope="system")
        if ok:
            self.scope = "system"
            return Probe(True)
        ok, reason, hint = probe_perf()
        if not ok:
            return Probe(False, reason, hint)
        self.scope = "pids"
        return Probe(True, missing=(per_process_note(why_not),))

    def step_started(self, info: Any) -> None:
        srv = self.ctx.server(info.target)
        if srv is None or not srv.pid or not srv.local:
            return
        self._spawn(info, srv.pid, srv.binary or "")

    def _record(self, key: StepKey, info: Any, *args: Any) -> None:
        pid, binary = args
        window, start_in = _window(info, self.seconds)
        # perf takes 0.3-2 s to start sampling (system-wide it reads every process's maps): launch it early,
        # and stop it by the window's end however late it started (record_profile's stop_after_s).
        lead = min(start_in, PERF_LEAD_S)
        time.sleep(start_in - lead)
        pids = [p.pid for p in process_tree(pid)]
        t0 = time.time() + lead
        label, workload, clients = key
        offcpu: dict[str, Any] = {}
        side = None
        if self.scope == "system":  # tracepoints need what system-wide recording needs
            side = threading.Thread(target=self._offcpu, args=(key, pids, min(OFFCPU_S, window), lead, offcpu),
                                    daemon=True)
            side.start()
        try:
            # perf.data is scratch: only the folded stacks go into the bundle.
            with tempfile.TemporaryDirectory(prefix="dbdiag-perf-") as tmp:
                rec, unwinder = self._record_window(label, pids, window, Path(tmp), lead)
        except DiagError as e:
            self._out[key] = {"error": str(e)}
            self.bundle.event("profile_failed", f"{label} {workload} c={clients}: {e}", target=label)
            return
        rel = f"artifacts/profile--{safe_name(label)}--{safe_name(workload)}--c{clients}.folded"
        save_folded(rec.folded, self.bundle.path / rel)
        share = unresolved_share(rec.folded) if rec.samples else 0.0
        hint = ""
        with contextlib.suppress(Exception):  # a hint is a nicety: never lose the profile over it
            hint = symbol_hint(share, binary, package="") if share else ""
        self._out[key] = {"folded": rel, "samples": rec.samples, "freq_hz": rec.freq_hz, "window": [t0, t0 + window],
                          "scope": rec.scope, "unresolved_share": share, "symbol_hint": hint,
                          "warnings": list(rec.warnings), "unwinder": rec.call_graph,
                          "unwinder_reason": unwinder.reason, "usable_share": usable_share(rec.folded),
                          "stack_bytes": DWARF_STACK_BYTES if rec.call_graph == "dwarf" else None}
        if side is not None:
            side.join(OFFCPU_S + JOIN_SLACK_S)
            self._out[key]["offcpu"] = dict(offcpu) or {"error": "off-CPU recording did not finish"}
        else:
            self._out[key]["offcpu"] = {"error": "not recorded: per-process recording has no scheduler tracepoints"}

    def _offcpu(self, key: StepKey, pids: list[int], seconds: float, lead: float, out: dict[str, Any]) -> None:
        """Off-CPU time of the server's threads for ``seconds`` (perf launched ``lead`` s early): folded µs to
        artifacts/, the summary to ``out``."""
        label, workload, clients = key
        t0 = time.time() + lead
        try:
            kinds = process_kinds(pids)
            tids = sorted(kinds)[:MAX_TIDS]
            with tempfile.TemporaryDirectory(prefix="dbdiag-offcpu-") as tmp:
                events = record_offcpu(tids, seconds, Path(tmp), stop_after_s=lead + seconds)
            for tid, kind in stack_thread_kinds(samples_of(events)).items():
                if kinds.get(tid, "thread") == "thread":
                    kinds[tid] = kind
            off = fold_offcpu(events, tids, kind_lookup(kinds))
            rel = f"artifacts/offcpu--{safe_name(label)}--{safe_name(workload)}--c{clients}.folded"
            save_folded(off.folded, self.bundle.path / rel)
        except (DiagError, OSError) as e:
            out["error"] = str(e)
            return
        except Exception as e:  # noqa: BLE001 - a side thread: a surprise is the step's note, never a traceback
            out["error"] = f"off-CPU failed: {type(e).__name__}: {e}"
            return
        out.update({"folded": rel, "unit": "us", "window": [t0, t0 + seconds], "seconds": off.seconds,
                    "total_us": off.total_us, "runqueue_us": off.runqueue_us, "open_us": off.open_us,
                    "switches": off.switches, "by_state": off.by_state, "by_syscall": off.by_syscall,
                    "by_kind": off.by_kind, "by_kind_call": off.by_kind_call, "threads": len(tids),
                    "threads_seen": len(kinds),
                    "unwinder": "fp"})

    def _record_window(self, label: str, pids: list[int], window: float, tmp: Path,
                       lead: float = 0.0) -> tuple[ProfileRecording, Unwinder]:
        """One window with the target's unwinder; the first one runs the frame-pointer check beside it.

        The first window unwinds with DWARF (right on every binary) while a CHECK_S frame-pointer
        recording runs at the same time: one after the other would not fit a short step, as each
        ``perf record -a`` takes 0.3-2 s to start on a busy host (measured here at load 6 on 2 vCPUs).
        """
        known = self._unwinders.get(label)
        if known is not None:
            return self._record_with(pids, window, tmp, known.call_graph, lead), known
        found: dict[str, ProfileRecording] = {}
        (tmp / "check").mkdir(exist_ok=True)
        side = threading.Thread(target=self._check, args=(pids, tmp / "check", lead + window, found), daemon=True)
        side.start()
        rec = self._record_with(pids, window, tmp, "dwarf", lead)
        side.join(CHECK_S + JOIN_SLACK_S)
        check = found.get("check")
        unwinder = choose_unwinder(check) if check is not None else None
        if unwinder is None:
            n = check.samples if check is not None else 0
            return rec, Unwinder("dwarf", f"first window: too few samples ({n}) in the {CHECK_S:g} s frame-pointer "
                                 "check beside it to judge; DWARF again next time")
        self._unwinders[label] = unwinder
        then = "DWARF from now on" if unwinder.call_graph == "dwarf" else "frame pointers from now on"
        return rec, dataclasses.replace(unwinder, call_graph="dwarf",
                                        reason=f"first window: DWARF while {unwinder.reason.split(':')[0]}; {then}")

    def _check(self, pids: list[int], tmp: Path, window: float, found: dict[str, ProfileRecording]) -> None:
        """CHECK_S of frame-pointer samples, however late perf starts within the ``window`` beside it."""
        with contextlib.suppress(Exception):  # no verdict (whatever the cause): the window is DWARF either way
            found["check"] = record_profile(pids, CHECK_S, tmp, FREQ_HZ, scope=self.scope, call_graph="fp",
                                            stop_after_s=window)

    def _record_with(self, pids: list[int], seconds: float, tmp: Path, call_graph: str,
                     lead: float = 0.0) -> ProfileRecording:
        freq = DWARF_FREQ_HZ if call_graph == "dwarf" else FREQ_HZ
        return record_profile(pids, seconds, tmp, freq, scope=self.scope, stop_after_s=lead + seconds,
                              call_graph="dwarf" if call_graph == "dwarf" else "fp")


class ClientProfileSource(_StepThreads):
    """py-spy of the driver's client processes during each step (``--profile-client``)."""

    name = "client_profile"
    title = "client profiles"
    result_key = "client_profile"
    row_fields = ("client_profile",)

    def probe(self) -> Probe:
        if py_spy_available():
            return Probe(True)
        return Probe(False, "py-spy is not installed", "pip install py-spy")

    def step_started(self, info: Any) -> None:
        if info.client_pids:
            self._spawn(info)

    def _record(self, key: StepKey, info: Any, *args: Any) -> None:
        seconds, start_in = _window(info, self.seconds)
        rel = f"artifacts/client-profile--{safe_name(info.target)}--{safe_name(info.workload)}--c{info.clients}.folded"
        time.sleep(start_in)
        try:
            record_client_profile(list(info.client_pids), seconds, self.bundle.path / rel)
            self._out[key] = {"folded": rel}
        except DiagError as e:
            self._out[key] = {"error": str(e)}
