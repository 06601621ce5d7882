"""Recording server CPU profiles: ``perf record`` in segments, then ``perf script``.

What it needs: ``perf`` (Debian: ``linux-perf``) allowed to sample the server's
processes with the software event ``cpu-clock`` (root, or
``kernel.perf_event_paranoid`` <= 1 plus ownership of the processes; in a
container CAP_PERFMON or CAP_SYS_ADMIN). Hardware counters are never asked for:
many VMs and containers do not have them, and ``cpu-clock`` answers "where does
the CPU time go" just as well.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from collectors.profile.parse import PERF_SCRIPT_FIELDS, KindOf, Sample, first_line, fold_samples, parse_perf_script
from collectors.profile.procs import kind_lookup, process_kinds, stack_thread_kinds
from collectors.profile.proctree import PROC, same_process, start_times
from diag.core.errors import DiagError, ToolUnavailable, UsageError
from diag.core.procs import pdeathsig_preexec

Scope = Literal["pids", "system"]
CallGraph = Literal["fp", "dwarf"]
CALL_GRAPHS: tuple[str, ...] = ("fp", "dwarf")
# DWARF unwinding copies this much of each sampled thread's user stack into perf.data
# (8 KiB: the backends' main loop of PostgreSQL 18 is 2-5 KiB deep in a point select;
# deeper frames are cut at the root side, perf's default of 8 KiB x the sample rate).
DWARF_STACK_BYTES = 8192

_PERF_HINT = (
    "install perf (Debian: apt-get install linux-perf; Ubuntu: linux-tools-$(uname -r)); "
    "run as root or set sysctl kernel.perf_event_paranoid=1; "
    "in a container grant CAP_PERFMON (or CAP_SYS_ADMIN)"
)
_RECORD_GRACE_S = 30.0  # perf start-up and writing perf.data after the window
_SCRIPT_TIMEOUT_S = 300.0
_POLL_S = 0.05
_MAX_SEGMENTS = 8
_MIN_SEGMENT_S = 0.2  # shorter than perf's own start-up: not worth a segment


# --------------------------------------------------------------------------- probe


def probe_perf(pid: int | None = None, perf: str = "perf", scope: Scope = "pids") -> tuple[bool, str, str]:
    """Can ``perf record -e cpu-clock -g`` run here? Returns ``(ok, reason, hint)``.

    Records 0.1 s into a temporary file: of a ``sleep`` child, or of ``pid`` when
    given (which also proves we may sample that process: another user's server
    needs root or CAP_PERFMON), or of all CPUs with ``scope="system"`` (needs
    ``perf_event_paranoid`` <= 0 or root). Takes about 0.3 s (longer system-wide).
    """
    exe = shutil.which(perf)
    if exe is None:
        return False, "perf not found on PATH", _PERF_HINT
    try:
        ver = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"perf --version failed: {e}", _PERF_HINT
    if ver.returncode != 0:
        # Debian's /usr/bin/perf is a wrapper that fails when no perf matches the running kernel.
        return False, first_line(ver.stderr or ver.stdout) or "perf --version failed", _PERF_HINT
    with tempfile.TemporaryDirectory(prefix="dbdiag-perf-probe-") as tmp:
        argv = [exe, "record", "-e", "cpu-clock", "-F", "99", "-g", "--no-buildid-cache",
                "-o", str(Path(tmp) / "probe.data")]
        if scope == "system":
            argv += ["-a"]
        elif pid is not None:
            argv += ["-p", str(pid)]
        argv += ["--", "sleep", "0.1"]
        try:
            rec = subprocess.run(argv, capture_output=True, text=True, timeout=30, preexec_fn=pdeathsig_preexec())
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"perf record failed: {e}", _PERF_HINT
    if rec.returncode != 0 or "Captured and wrote" not in rec.stderr:
        why = _perf_error(rec.stderr)
        if why == "target process not found":
            return False, f"perf record failed: process {pid} not found", "check that the server is running"
        return False, f"perf record failed: {why}", _PERF_HINT
    return True, "", ""


def perf_event_paranoid(proc_root: Path = PROC) -> int | None:
    """kernel.perf_event_paranoid (None when unreadable)."""
    try:
        return int((proc_root / "sys" / "kernel" / "perf_event_paranoid").read_text().strip())
    except (OSError, ValueError):
        return None


def per_process_note(why_not: str, proc_root: Path = PROC) -> str:
    """What a per-process, user-space profile lacks when system-wide recording is refused, and the fix."""
    level = perf_event_paranoid(proc_root)
    now = f" (now {level})" if level is not None else ""
    return (f"system-wide recording refused ({why_not}): profiling the server processes this user owns, "
            "per process and in user space only (no kernel frames, no off-CPU time, servers of other users "
            "not profiled); sysctl kernel.perf_event_paranoid=-1" + now + " or CAP_PERFMON enables all of it")


def _perf_error(stderr: str) -> str:
    """One line naming why perf failed (its messages span many lines)."""
    low = stderr.lower()
    if "perf_event_paranoid" in low or "access to performance monitoring" in low:
        return "perf_event_paranoid forbids it for this user"
    if "couldn't create thread/cpu maps" in low or "no such process" in low:
        return "target process not found"
    if "permission denied" in low or "operation not permitted" in low or "no permission" in low:
        return "permission denied"
    for line in stderr.splitlines():
        s = line.strip()
        if s and not s.startswith("[ perf record:") and not s.lower().startswith("warning"):
            return s
    return first_line(stderr) or "perf exited with an error and no message"


# --------------------------------------------------------------------------- record


@dataclass(frozen=True)
class ProfileRecording:
    """One profile window.

    ``folded``: folded stacks -> samples. ``samples``: their sum (at ``freq_hz``
    per running thread, so ``samples / freq_hz`` is CPU seconds).
    ``seconds_recorded``: wall seconds perf ran (approximate: includes perf's
    start-up, 0.1-0.5 s per segment). ``scope``: "pids" (``perf record -p``) or
    "system" (``-a``, kept to the targets' samples). With "pids" the window is
    split into ``segments`` when a target exits (see :func:`record_profile`).
    ``exited_pids``: targets gone before the end. ``kinds``: tid -> kind used
    for the stacks. ``perf_data``: kept perf.data files (empty unless ``keep``).
    ``command``: the first ``perf record`` argument list, for the run bundle.
    ``call_graph``: how stacks were walked: "fp" (frame pointers, ``-g``) or
    "dwarf" (``--call-graph dwarf,DWARF_STACK_BYTES``: a copy of the user stack per
    sample, unwound by perf script with the binaries' .eh_frame).
    """

    folded: Mapping[str, int]
    samples: int
    pids: tuple[int, ...]
    exited_pids: tuple[int, ...]
    freq_hz: int
    scope: str
    seconds_requested: float
    seconds_recorded: float
    segments: int
    kinds: Mapping[int, str]
    perf_data: tuple[Path, ...]
    command: tuple[str, ...]
    warnings: tuple[str, ...]
    call_graph: str = "fp"


@dataclass(frozen=True)
class _Plan:
    """What every segment of one window shares."""

    exe: str
    sleep_exe: str
    out_dir: Path
    freq_hz: int
    scope: Scope
    pids: tuple[int, ...]     # as asked for, dead ones included
    targets: tuple[int, ...]  # those alive at the start: the only samples kept
    proc_root: Path
    call_graph: CallGraph = "fp"
    stop_at: float | None = None  # monotonic s: perf is stopped then even if it started late


@dataclass
class _Window:
    """What the segments of one window gathered so far; mutable because each segment adds to it."""

    live: dict[int, int]  # pid -> start time (ticks since boot) of the targets still running
    exited: set[int]
    samples: list[Sample] = field(default_factory=list)
    data_files: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    command: tuple[str, ...] = ()
    recorded_s: float = 0.0
    segments: int = 0


def record_profile(
    pids: list[int],
    seconds: float,
    out_dir: Path,
    freq_hz: int = 499,
    *,
    scope: Scope = "pids",
    kind_of: KindOf | None = None,
    keep: bool = False,
    perf: str = "perf",
    proc_root: Path = PROC,
    call_graph: CallGraph = "fp",
    stop_after_s: float | None = None,
) -> ProfileRecording:
    """Sample ``pids`` (all their threads) on CPU for ``seconds`` and fold the stacks.

    Runs ``perf record -e cpu-clock -F freq_hz -g -p PIDS -o out_dir/perf.data --
    sleep SECONDS`` then ``perf script -F comm,pid,tid,ip,sym,dso``. 499 Hz (not
    500) avoids sampling in lockstep with millisecond timers. Processes that
    start during the window are not sampled in either scope (the pid list is a
    snapshot); backends of long-lived connections are.

    ``scope="pids"``: per-task events. A target that exits makes perf 6.1 spin
    on its file descriptor (a whole CPU in the kernel until the window ends,
    measured here), so the watchdog stops perf as soon as one exits and starts
    a new segment with the survivors; samples of all segments are added up.
    Per-task events are switched in and out with their task: on this 2-vCPU VM,
    with a workload that context-switches per query (pgbench -S -c 2), that
    cost +38% backend CPU per transaction (mean of 4 runs), and the extra time
    shows as ``finish_task_switch`` (15% of samples against 5% system-wide).

    ``scope="system"``: ``perf record -a`` (per-CPU events, nothing to switch
    with tasks: +11% backend CPU per transaction in the same runs) and only the
    targets' samples are kept (``perf script --pid``). perf.data grows with the
    CPU count (idle CPUs are sampled too; needs ``perf_event_paranoid`` <= 0 or
    root): prefer it on small hosts and for short-transaction workloads.

    ``call_graph="dwarf"`` walks stacks without frame pointers (cost: BENCHMARKS.md, Profiles); perf stops
    ``stop_after_s`` (default ``seconds``) wall seconds after the call, however late it started.

    ``kind_of`` defaults to :func:`~collectors.profile.procs.process_kinds` of
    the targets, refined by :func:`~collectors.profile.procs.stack_thread_kinds`
    for threads whose names say nothing. Raises :class:`ToolUnavailable` (perf
    missing, not permitted, failing) and :class:`UsageError` (bad arguments);
    perf.data files are removed unless ``keep`` (they reach tens of MB per minute).
    Long because the docstring records what each scope and unwinder costs; the body is short.
    """
    exe = _perf_exe(pids, seconds, freq_hz, scope, perf, call_graph)
    sleep_exe = shutil.which("sleep") or "sleep"
    out_dir.mkdir(parents=True, exist_ok=True)
    live = start_times(pids, proc_root)
    if not live:
        raise DiagError(f"profile: none of the processes {sorted(set(pids))} is running")
    stop_at = time.monotonic() + max(seconds, stop_after_s or 0.0)
    plan = _Plan(exe, sleep_exe, out_dir, freq_hz, scope, tuple(pids), tuple(sorted(live)), proc_root, call_graph,
                 stop_at)
    auto_kinds = process_kinds(plan.targets, proc_root) if kind_of is None else {}
    window = _Window(live, set(pids) - set(live))
    try:
        _record_segments(plan, window, time.monotonic() + seconds)
    finally:
        if not keep:
            for f in window.data_files:
                f.unlink(missing_ok=True)
                f.with_name(f.name + ".old").unlink(missing_ok=True)
    kinds = _refined_kinds(auto_kinds, window.samples) if kind_of is None else {}
    folded = fold_samples(window.samples, kind_of if kind_of is not None else kind_lookup(kinds))
    return ProfileRecording(
        folded=folded,
        samples=sum(folded.values()),
        pids=tuple(sorted(set(pids))),
        exited_pids=tuple(sorted(window.exited)),
        freq_hz=freq_hz,
        scope=scope,
        seconds_requested=seconds,
        seconds_recorded=round(window.recorded_s, 3),
        segments=window.segments,
        kinds=kinds,
        perf_data=tuple(f for f in window.data_files if keep and f.exists()),
        command=window.command,
        warnings=tuple(window.warnings),
        call_graph=call_graph,
    )


def _perf_exe(pids: list[int], seconds: float, freq_hz: int, scope: str, perf: str, call_graph: str = "fp") -> str:
    """The perf executable, after checking :func:`record_profile`'s arguments."""
    if call_graph not in CALL_GRAPHS:
        raise UsageError(f"profile: call_graph must be one of {', '.join(CALL_GRAPHS)}, not {call_graph!r}")
    if not pids:
        raise UsageError("profile: no process ids to record")
    if seconds <= 0 or freq_hz <= 0:
        raise UsageError(f"profile: seconds and freq_hz must be > 0 (got {seconds}, {freq_hz})")
    if scope not in ("pids", "system"):
        raise UsageError(f"profile: scope must be 'pids' or 'system', not {scope!r}")
    exe = shutil.which(perf)
    if exe is None:
        raise ToolUnavailable(f"profile: perf not found on PATH; {_PERF_HINT}")
    return exe


def _record_segments(plan: _Plan, window: _Window, deadline: float) -> None:
    """Record segments until ``deadline`` (monotonic seconds), all targets exit, or the segment cap."""
    while window.live and window.segments < _MAX_SEGMENTS:
        remaining = deadline - time.monotonic()
        if remaining < _MIN_SEGMENT_S:
            break
        if not _record_segment(plan, window, remaining):
            # A target exited between our check and perf attaching: retry without it.
            window.live = start_times(list(window.live), plan.proc_root)
            window.exited |= set(plan.pids) - set(window.live)
            continue
        if plan.scope == "system":
            break  # one window covers exits too


def _record_segment(plan: _Plan, window: _Window, remaining: float) -> bool:
    """One ``perf record`` of the live targets for ``remaining`` seconds, then its samples.

    Returns False when perf could not attach because a target had just exited.
    """
    n = window.segments
    data = plan.out_dir / ("perf.data" if n == 0 else f"perf.{n}.data")
    for stale in (data, data.with_name(data.name + ".old")):
        stale.unlink(missing_ok=True)  # perf renames an existing file to .old
    where = ["-a"] if plan.scope == "system" else ["-p", ",".join(str(p) for p in sorted(window.live))]
    argv = [plan.exe, "record", "-e", "cpu-clock", "-F", str(plan.freq_hz), *call_graph_args(plan.call_graph),
            "--no-buildid-cache",  # do not copy server binaries into ~/.debug
            *where, "-o", str(data), "--", plan.sleep_exe, f"{remaining:.3f}"]
    window.command = window.command or tuple(argv)
    t0 = time.monotonic()
    # per-CPU events do not spin when a target exits: stop early only once all are gone
    stderr, gone = _run_record(argv, window.live, plan.proc_root, remaining + _RECORD_GRACE_S,
                               stop_when_all_gone=plan.scope == "system", stop_at=plan.stop_at)
    window.recorded_s += time.monotonic() - t0
    window.segments += 1
    window.data_files.append(data)
    window.exited |= gone
    for pid in gone:
        window.live.pop(pid, None)
    if "Captured and wrote" not in stderr:
        if "couldn't create thread/cpu maps" in stderr.lower():
            return False
        if plan.stop_at is not None and time.monotonic() >= plan.stop_at:
            raise ToolUnavailable(f"profile: perf record had not started when its {remaining:.1f} s window ended "
                                  "(a busy host: perf took longer than the window to start)")
        raise ToolUnavailable(f"profile: perf record failed: {_perf_error(stderr)}")
    window.warnings += [line.strip() for line in stderr.splitlines()
                        if "lost" in line.lower() or line.strip().lower().startswith("warning")]
    wanted = set(plan.targets)
    window.samples += [s for s in parse_perf_script(_perf_script(plan.exe, data, plan.targets)) if s.pid in wanted]
    return True


def call_graph_args(call_graph: str) -> list[str]:
    """perf record's arguments for walking stacks with ``call_graph`` ("fp" or "dwarf")."""
    return ["--call-graph", f"dwarf,{DWARF_STACK_BYTES}"] if call_graph == "dwarf" else ["-g"]


def _refined_kinds(auto_kinds: Mapping[int, str], samples: list[Sample]) -> dict[int, str]:
    """tid -> kind from /proc, with threads that /proc calls just "thread" named by their stacks."""
    kinds = dict(auto_kinds)
    # Thread names that only repeat the program name (MariaDB 10.11 sets none) say
    # nothing: recognise the thread by the entry function in its stacks instead.
    for tid, kind in stack_thread_kinds(samples).items():
        if kinds.get(tid, "thread") == "thread":
            kinds[tid] = kind
    return kinds


def _run_record(argv: list[str], live: dict[int, int], proc_root: Path, timeout_s: float,
                stop_when_all_gone: bool = False, stop_at: float | None = None) -> tuple[str, set[int]]:
    """Run one perf record; stop it early when a target (or every target) exits, or at ``stop_at``.

    ``stop_at`` (monotonic s): the window's end. perf's own ``sleep`` starts only once perf is set up,
    0.3-2 s after launch on a busy host (system-wide: it reads every process's maps), so without it the
    window would slide past a short step's end. Returns (perf's stderr, targets that exited).
    """
    gone: set[int] = set()
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as err:
        try:
            # Dies with this thread, which waits for it (PDEATHSIG follows the thread that forked).
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=err, preexec_fn=pdeathsig_preexec())
        except OSError as e:
            raise ToolUnavailable(f"profile: cannot run perf: {e}") from e
        give_up = time.monotonic() + timeout_s
        interrupted = False
        try:
            while proc.poll() is None:
                if not interrupted:
                    gone = {p for p, st in live.items() if not same_process(p, st, proc_root)}
                    late = stop_at is not None and time.monotonic() >= stop_at
                    if late or (gone and (not stop_when_all_gone or len(gone) == len(live))):
                        # SIGINT makes perf stop its workload and write a complete perf.data.
                        proc.send_signal(signal.SIGINT)
                        interrupted = True
                if time.monotonic() > give_up:
                    proc.kill()
                    proc.wait(timeout=10)
                    raise ToolUnavailable(f"profile: perf record did not finish within {timeout_s:.0f} s")
                time.sleep(_POLL_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        err.seek(0)
        return err.read(), gone


def _perf_script(exe: str, data: Path, pids: Iterable[int] = ()) -> str:
    # --no-inline: perf would run addr2line for inlined frames of every DWARF-unwound address
    # (3.9 s against 0.3 s on 2 s of a PostgreSQL 18 recording here, for 7 lines of 32,638 more).
    argv = [exe, "script", "--no-inline", "-i", str(data), "-F", PERF_SCRIPT_FIELDS]
    if pids:  # a system-wide recording holds every process on the host: print only ours
        argv += ["--pid", ",".join(str(p) for p in pids)]
    try:
        res = subprocess.run(argv, capture_output=True, timeout=_SCRIPT_TIMEOUT_S, preexec_fn=pdeathsig_preexec())
    except subprocess.TimeoutExpired as e:
        raise ToolUnavailable(f"profile: perf script took over {_SCRIPT_TIMEOUT_S:.0f} s on {data}") from e
    except OSError as e:
        raise ToolUnavailable(f"profile: cannot run perf script: {e}") from e
    if res.returncode != 0:
        msg = first_line(res.stderr.decode("utf-8", "replace")) or f"exit code {res.returncode}"
        raise ToolUnavailable(f"profile: perf script failed on {data}: {msg}")
    # Symbol names are bytes from binaries on the host: never fail on their encoding.
    return res.stdout.decode("utf-8", "replace")
