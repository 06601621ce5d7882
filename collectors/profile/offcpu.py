"""Off-CPU time of server processes: ``sched_switch`` / ``sched_wakeup`` tracepoints with stacks, folded in µs.

Where a backend blocks (a commit's flush, a lock, a latch, waiting for the client) an on-CPU profile shows
nothing. The scheduler's tracepoints do: ``sched_switch`` fires in the context of the task leaving the CPU,
so its call chain is the path that blocked (``fdatasync`` -> ``submit_bio_wait``, ``futex_wait``,
``epoll_wait`` ...); the next ``sched_switch`` onto the task ends the interval, and ``sched_wakeup`` in
between splits it into time blocked and time waiting for a CPU after the wake-up.

What it needs: perf, system-wide tracepoints (root, CAP_PERFMON, or ``kernel.perf_event_paranoid`` = -1).
bcc cannot compile BPF on this machine kind; perf's tracepoints work everywhere perf does.

Stacks are walked with frame pointers: DWARF unwinding from a tracepoint stops at the C library (measured
on PostgreSQL 18: one user frame with 2 or 4 KiB of stack per event) and costs 3-7x the data, while the
kernel part, which names the blocking path, is complete either way. User frames are therefore complete
only for binaries with frame pointers (Debian's mariadbd), the C library frame for the rest.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from collectors.profile.parse import KERNEL_SUFFIX, KindOf, Sample, clean, frame_name, tidy_frames
from diag.core.errors import ToolUnavailable, UsageError
from diag.core.procs import pdeathsig_preexec

MAX_TIDS = 256  # the tracepoint filter names each thread; beyond this the filter is too long to be cheap
SCRIPT_FIELDS = "comm,pid,tid,time,event,trace,ip,sym,dso"
_TIMEOUT_GRACE_S = 60.0
_SCRIPT_TIMEOUT_S = 300.0

_HEADER = re.compile(r"^\s*(?P<comm>.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+(?P<time>\d+\.\d+):\s+"
                     r"(?P<event>[\w:]+):\s+(?P<trace>.*)$")
_SWITCH = re.compile(r"\bprev_pid=(?P<prev>-?\d+) .*?\bprev_state=(?P<state>\S+) ==> .*?\bnext_pid=(?P<next>-?\d+)")
_WAKEUP = re.compile(r"(?:^|\s)pid=(?P<pid>-?\d+)\s")


@dataclass(frozen=True)
class SchedEvent:
    """One tracepoint hit. ``frames``: root first, only on the stack-carrying switch-out events."""

    time_s: float
    event: str  # "switch" or "wakeup"
    comm: str
    prev: int = 0   # switch: tid leaving the CPU
    state: str = ""  # switch: its state (S sleeping, D uninterruptible, R preempted ...)
    next: int = 0   # switch: tid getting the CPU; wakeup: tid woken
    frames: tuple[str, ...] = ()


@dataclass(frozen=True)
class OffCpu:
    """Off-CPU time of the targets in one window.

    ``folded``: ``kind;comm;root;...;leaf`` -> µs off CPU (the blocked time and the run-queue wait
    after the wake-up both count). ``by_state`` µs per task state at the switch-out;
    ``runqueue_us``: of the total, the part between wake-up and getting a CPU back;
    ``by_syscall`` µs per system call the task blocked in (``preempted`` for a task switched out
    while runnable, ``kernel`` for other kernel paths); ``switches``: intervals counted;
    ``open_us``: intervals still open at the end (closed at the last event seen).
    """

    folded: dict[str, int] = field(default_factory=dict)
    total_us: int = 0
    runqueue_us: int = 0
    by_state: dict[str, int] = field(default_factory=dict)
    by_syscall: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, int] = field(default_factory=dict)
    by_kind_call: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> call -> µs
    switches: int = 0
    open_us: int = 0
    seconds: float = 0.0


def _filter(field_name: str, tids: Iterable[int]) -> str:
    return " || ".join(f"{field_name} == {int(t)}" for t in sorted(set(tids)))


def offcpu_argv(exe: str, tids: Iterable[int], seconds: float, data: Path, sleep_exe: str = "sleep") -> list[str]:
    """``perf record`` of the tracepoints for ``tids``: switch-outs with stacks, switch-ins and wake-ups without."""
    tids = sorted(set(tids))
    if not tids or len(tids) > MAX_TIDS:
        raise UsageError(f"off-CPU: need 1 to {MAX_TIDS} thread ids, got {len(tids)}")
    return [exe, "record", "-a", "--no-buildid-cache",
            "-e", "sched:sched_switch/call-graph=fp/", "--filter", _filter("prev_pid", tids),
            "-e", "sched:sched_switch/call-graph=no/", "--filter", _filter("next_pid", tids),
            "-e", "sched:sched_wakeup/call-graph=no/", "--filter", _filter("pid", tids),
            "-o", str(data), "--", sleep_exe, f"{seconds:.3f}"]


def parse_sched_script(text: str) -> list[SchedEvent]:
    """``perf script -F comm,pid,tid,time,event,trace,ip,sym,dso`` of the tracepoints -> events in time order.

    Lines that are neither a header nor a frame are skipped (perf prints warnings between samples). perf
    indents frame lines with a tab and header lines with spaces; the same frames recur in every switch, so
    their names are worked out once (a second's recording at 20k switches/s is ~300,000 frame lines).
    """
    events: list[SchedEvent] = []
    cur: dict[str, object] | None = None
    frames: list[str] = []
    names: dict[str, str] = {}

    def flush() -> None:
        if cur is not None:
            events.append(SchedEvent(frames=tuple(reversed(frames)), **cur))  # type: ignore[arg-type]

    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            flush()
            cur, frames = None, []
            continue
        if line.startswith("\t"):
            if cur is not None:
                ip, _, rest = line.strip().partition(" ")
                name = names.get(rest)
                if name is None and rest.endswith(")"):
                    name = names[rest] = frame_name(ip, rest, False)
                if name is not None:
                    frames.append(name)
            continue
        hm = _HEADER.match(line)
        if hm is None:
            continue
        flush()
        cur, frames = _event_fields(hm), []
    flush()
    return sorted((e for e in events if e.event), key=lambda e: e.time_s)


def _event_fields(hm: re.Match[str]) -> dict[str, object] | None:
    """The fields of one header line; None for events we do not use."""
    t, trace = float(hm["time"]), hm["trace"]
    if hm["event"].endswith("sched_switch"):
        sw = _SWITCH.search(trace)
        if sw is None:
            return None
        return {"time_s": t, "event": "switch", "comm": clean(hm["comm"]) or "?", "prev": int(sw["prev"]),
                "state": sw["state"], "next": int(sw["next"])}
    if hm["event"].endswith("sched_wakeup"):
        wk = _WAKEUP.search(" " + trace + " ")
        if wk is None:
            return None
        return {"time_s": t, "event": "wakeup", "comm": clean(hm["comm"]) or "?", "next": int(wk["pid"])}
    return None


def blocking_call(frames: tuple[str, ...], state: str) -> str:
    """The system call a switch-out happened in (``fdatasync``, ``futex``, ``epoll_wait`` ...).

    The frame just above ``do_syscall_64`` names it (``__x64_sys_NAME``); a runnable task switched
    out is ``preempted``; a path without a system call (page fault, signal) is ``kernel``.
    """
    for i, f in enumerate(frames):
        if f.startswith("do_syscall_64") and i + 1 < len(frames):
            nxt = frames[i + 1].removesuffix(KERNEL_SUFFIX)
            for prefix in ("__x64_sys_", "__ia32_sys_", "__arm64_sys_", "__se_sys_", "__do_sys_", "ksys_"):
                if nxt.startswith(prefix):
                    return nxt[len(prefix):]
            if not state.startswith("R"):
                return nxt
    return "preempted" if state.startswith("R") else "kernel"


def fold_offcpu(events: Iterable[SchedEvent], tids: Iterable[int], kind_of: KindOf) -> OffCpu:
    """Off-CPU intervals of ``tids`` from switch-out (its stack) to the next switch-in, in µs.

    Long because one pass keeps each thread's open interval, its wake-up and the tallies together.
    Intervals open at the end are closed at the last event (``open_us``); a switch-in without a
    switch-out seen (the thread was off CPU when recording began) starts nothing.
    """
    wanted = set(tids)
    tally: Counter[str] = Counter()  # runqueue_us, open_us, switches
    folded: Counter[str] = Counter()
    by_state: Counter[str] = Counter()
    by_call: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    by_kind_call: dict[str, Counter[str]] = defaultdict(Counter)
    pending: dict[int, tuple[float, str, tuple[str, ...], str]] = {}  # tid -> (t_out, comm, frames, state)
    woke: dict[int, float] = {}
    last_t = 0.0
    first_t: float | None = None

    def close(tid: int, t_in: float) -> int:
        t_out, comm, frames, state = pending.pop(tid)
        us = max(0, int(round((t_in - t_out) * 1e6)))
        tw = woke.pop(tid, None)
        if tw is not None and t_out <= tw <= t_in:
            tally["runqueue_us"] += int(round((t_in - tw) * 1e6))
        kind = clean(kind_of(tid, comm)) or "unknown"
        folded[";".join((kind, comm, *tidy_frames(frames)))] += us
        by_state[state[:1] or "?"] += us
        call = blocking_call(frames, state)
        by_call[call] += us
        by_kind[kind] += us
        by_kind_call[kind][call] += us
        tally["switches"] += 1
        return us

    for e in events:
        first_t = e.time_s if first_t is None else first_t
        last_t = max(last_t, e.time_s)
        if e.event == "wakeup":
            if e.next in pending:
                woke.setdefault(e.next, e.time_s)
            continue
        if e.prev in wanted and (e.frames or e.prev not in pending):
            # The stack-carrying copy of a switch-out replaces its stackless twin (same time, other event).
            prev = pending.get(e.prev)
            if prev is None or not prev[2]:
                pending[e.prev] = (e.time_s, e.comm, e.frames, e.state)
        if e.next in wanted and e.next in pending and pending[e.next][0] < e.time_s:
            close(e.next, e.time_s)
    for tid in list(pending):
        tally["open_us"] += close(tid, last_t)
    kept = dict(sorted((k, v) for k, v in folded.items() if v > 0))
    return OffCpu(folded=kept, total_us=sum(kept.values()), runqueue_us=tally["runqueue_us"],
                  by_state=dict(by_state), by_syscall=dict(by_call.most_common()), by_kind=dict(by_kind),
                  by_kind_call={k: dict(c.most_common()) for k, c in by_kind_call.items()},
                  switches=tally["switches"], open_us=tally["open_us"],
                  seconds=round(last_t - first_t, 3) if first_t is not None else 0.0)


def samples_of(events: Iterable[SchedEvent]) -> list[Sample]:
    """The switch-outs as :class:`Sample` objects (for thread roles from their stacks)."""
    return [Sample(e.comm, 0, e.prev, e.frames) for e in events if e.event == "switch" and e.frames]


def record_offcpu(tids: Iterable[int], seconds: float, out_dir: Path, perf: str = "perf",
                  stop_after_s: float | None = None) -> list[SchedEvent]:
    """Record the tracepoints of ``tids`` for ``seconds`` and return the events (perf.data removed).

    perf is stopped ``stop_after_s`` (default ``seconds``) after launch however late it started sampling.

    Raises :class:`ToolUnavailable` when perf is missing or refuses (tracepoints need root, CAP_PERFMON
    or ``kernel.perf_event_paranoid`` = -1).
    """
    exe = shutil.which(perf)
    if exe is None:
        raise ToolUnavailable("off-CPU: perf not found on PATH")
    data = out_dir / "offcpu.data"
    argv = offcpu_argv(exe, tids, seconds, data, shutil.which("sleep") or "sleep")
    try:
        with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as err:
            rec = _run_until(argv, err, max(seconds, stop_after_s or 0.0))
            err.seek(0)
            stderr = err.read()
        if "Captured and wrote" not in stderr:  # on SIGINT perf's exit status is the workload's
            line = next((ln.strip() for ln in stderr.splitlines() if ln.strip()), f"exit code {rec.returncode}")
            raise ToolUnavailable(f"off-CPU: perf record of the scheduler tracepoints failed: {line}")
        try:
            res = subprocess.run([exe, "script", "--no-inline", "-i", str(data), "-F", SCRIPT_FIELDS],
                                 capture_output=True, timeout=_SCRIPT_TIMEOUT_S, preexec_fn=pdeathsig_preexec())
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ToolUnavailable(f"off-CPU: perf script failed: {e}") from e
        if res.returncode != 0:
            raise ToolUnavailable(f"off-CPU: perf script failed with exit code {res.returncode}")
        return parse_sched_script(res.stdout.decode("utf-8", "replace"))
    finally:
        data.unlink(missing_ok=True)
        data.with_name(data.name + ".old").unlink(missing_ok=True)


def _run_until(argv: list[str], err: IO[str], seconds: float) -> subprocess.CompletedProcess[None]:
    """Run perf record, stopped with SIGINT ``seconds`` after launch (its start-up inside the window, not after)."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                preexec_fn=pdeathsig_preexec())
    except OSError as e:
        raise ToolUnavailable(f"off-CPU: cannot run perf: {e}") from e
    try:
        try:
            proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)  # perf writes a complete perf.data on SIGINT
            proc.wait(timeout=_TIMEOUT_GRACE_S)
    except subprocess.TimeoutExpired as e:
        raise ToolUnavailable(f"off-CPU: perf record did not stop within {_TIMEOUT_GRACE_S:.0f} s") from e
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    return subprocess.CompletedProcess(argv, proc.returncode)


def per_transaction(by: Mapping[str, int], transactions: float) -> dict[str, float]:
    """µs per transaction of each entry (``transactions`` in the same window); {} without transactions."""
    if transactions <= 0:
        return {}
    return {k: v / transactions for k, v in by.items()}


def top_paths(folded: Mapping[str, int], n: int = 8) -> list[tuple[str, int]]:
    """The ``n`` largest off-CPU stacks as ``kind: leafmost ... root`` strings (for a table beside the graph)."""
    grouped: dict[str, int] = defaultdict(int)
    for stack, us in folded.items():
        parts = stack.split(";")
        grouped[";".join([parts[0], *parts[2:]])] += us
    return sorted(grouped.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
