"""Evidence from the database's own host over ssh (``--ssh LABEL=user@host``): profiles, flush calls, F.

The user's own ssh (their ~/.ssh/config and keys; ``DBDIAG_SSH_CONFIG`` names
another config file, as the tests do) runs ``perf`` on that host:

* profiles (:class:`SshProfileSource`): in the middle of each step, ``perf
  record -g`` of the server's processes there (the process listening on the
  target's port, and its children: :func:`_pids`) for the profile window, then
  ``perf script`` there; its
  text comes back over the same connection and is folded here by the same parser
  as a local profile (:mod:`collectors.profile.parse`), into
  ``artifacts/profile--<target>--...folded`` and the step's ``profile`` entry,
  marked ``source: ssh user@host``;
* flush calls (:class:`SshFlushCollector`): ``perf stat -I`` of the fsync,
  fdatasync and sync_file_range tracepoints on those processes for the target's
  whole sweep, its interval lines read back live into the ``flush--<label>``
  series that local flush tracing writes;
* the fsync test: :mod:`collectors.ssh_fsync` (every method of the local test, run by python3 there).

Nothing is installed on that host: it needs sshd, perf (Debian: linux-perf),
python3 and a user allowed to trace the server and write in its data directory
(root, or perf_event_paranoid <= 1 and the server's user). ssh runs with ``BatchMode=yes`` (no password prompt can hang a
run) and a connect timeout; the remote commands are fixed POSIX sh scripts whose
only inputs (window, rate, process names, events) are quoted or ours.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import subprocess
import threading
import time
from typing import Any

from collectors.base import Collector, CollectorContext, Probe
from collectors.flush import METRICS as FLUSH_METRICS
from collectors.flush_perf import IntervalAssembler
from collectors.profile.analyse import unresolved_share
from collectors.profile.parse import PERF_SCRIPT_FIELDS, fold_samples, parse_perf_script, save_folded
from diag.core.bundle import safe_name
from diag.core.errors import DiagError, ParseError
from diag.core.procs import pdeathsig_preexec

CONNECT_TIMEOUT_S = 5
SSH_FAILED = 255  # ssh's own exit status for its errors (the remote command's otherwise)
PROBE_TIMEOUT_S = 20.0
FREQ_HZ = 249  # half the local rate: the text of every sample crosses the network
WINDOW_SHARE = 0.8
MIN_WINDOW_S = 0.5
SCRIPT_SLACK_S = 60.0
# A server process listed by pgrep that exits before perf attaches (a backend closing) fails perf record:
# list again, as the local flush tracing does.
RECORD_TRIES = 4
HINT = ("give dbdiag ssh access to the database host (BatchMode: a key, no password prompt) as a user that may "
        "run perf there (root, or perf_event_paranoid <= 1), and install perf on it (Debian: linux-perf)")

_PROBE_SH = """command -v perf >/dev/null 2>&1 || { echo "perf is not installed on $(hostname)" >&2; exit 5; }
%(pids)s
perf record -q -F 10 -p "$P" -o /dev/null -- true >/dev/null 2>&1 || \
{ echo "perf may not profile the server on $(hostname) as $(id -un) (perf_event_paranoid $(cat \
/proc/sys/kernel/perf_event_paranoid 2>/dev/null))" >&2; exit 7; }
hostname"""

# The connection opens when the step starts and says "ready"; the recording starts when dbdiag sends the
# window's length at its start (ssh's setup took over 2 s here on a busy machine: started blind, the window
# fell after the step's end and recorded an idle server). "0" or end of input: no window.
_RECORD_SH = """F=$(mktemp /tmp/dbdiag-perf.XXXXXX) || exit 4
trap 'rm -f "$F" "$F.err"' EXIT
echo ready
read secs || exit 0
[ "$secs" = 0 ] && exit 0
i=0
while :; do
  %(pids)s
  perf record -F %(freq)d -g -p "$P" -o "$F" -- sleep "$secs" >/dev/null 2>"$F.err" && break
  i=$((i + 1))
  if [ "$i" -ge %(tries)d ]; then echo "perf record failed: $(grep -v '^\\[' "$F.err" | tail -n 1)" >&2; exit 7; fi
done
grep '^\\[ perf record: Captured' "$F.err" >&2
perf script -i "$F" -F %(fields)s 2>"$F.err" || { echo "perf script failed: $(tail -n 1 "$F.err")" >&2; exit 8; }"""


def ssh_argv(spec: str, command: str) -> list[str]:
    """ssh of ``command`` on ``spec`` (user@host, or a Host of the user's ssh config), never prompting.

    ``--`` ends ssh's options, and a ``spec`` that ssh could still take for an option or for nothing is
    refused here too (``dbdiag run`` refuses it first, as a usage error): a value like
    ``-oProxyCommand=...`` must never run a command on this machine, whichever caller passed it."""
    if not spec or spec.startswith("-") or any(c.isspace() for c in spec):
        raise DiagError(f"ssh destination {spec!r}: expected USER@HOST or a Host of your ssh config")
    cfg = os.environ.get("DBDIAG_SSH_CONFIG")
    return ["ssh", *(["-F", cfg] if cfg else []), "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            "--", spec, command]


def run_ssh(spec: str, command: str, timeout_s: float) -> tuple[int, bytes, str]:
    """(exit status, stdout, last stderr line) of ``command`` on ``spec``; DiagError when ssh cannot run."""
    try:
        p = subprocess.run(ssh_argv(spec, command), capture_output=True, timeout=timeout_s, stdin=subprocess.DEVNULL,
                           preexec_fn=pdeathsig_preexec())
    except FileNotFoundError:
        raise DiagError("ssh is not installed here (Debian: openssh-client)") from None
    except subprocess.TimeoutExpired:
        raise DiagError(f"ssh {spec}: no answer within {timeout_s:g} s") from None
    err = p.stderr.decode("utf-8", "replace").strip().splitlines()
    return p.returncode, p.stdout, err[-1] if err else ""


def ssh_probe(spec: str, command: str, hint: str, what: str = "") -> tuple[Probe | None, str]:
    """(None, last line of its output) when ``command`` succeeds on ``spec``, else (the failed probe, "").

    The failed probe's reason is ssh's own line (unreachable, refused, no key) or the command's last
    error line, after ``what`` ("perf cannot count flush calls: ")."""
    try:
        rc, out, err = run_ssh(spec, command, PROBE_TIMEOUT_S)
    except DiagError as e:
        return Probe(False, str(e), hint), ""
    if rc != 0:  # 255: ssh itself failed (unreachable, refused, no key): the command never ran, so no ``what``
        return Probe(False, f"ssh {spec}: {what if rc != SSH_FAILED else ''}{err or f'exit status {rc}'}", hint), ""
    lines = out.decode("utf-8", "replace").strip().splitlines()
    return None, lines[-1] if lines else ""


# The server's processes on that host: the one listening on the target's port (ss, iproute2; another server
# of the same engine on that host must not count) and its children (PostgreSQL's backends; MySQL's threads are
# its own); by process name only for a unix-socket target. Sets $P to a comma list, or exits 6 saying why.
_PIDS_PORT_SH = r"""PM=$(ss -Hltnp "sport = :%(port)d" 2>/dev/null | sed -n 's/.*pid=\([0-9][0-9]*\).*/\1/p' | head -n 1)
[ -n "$PM" ] || { echo "no process listens on port %(port)d on $(hostname) (or ss may not say which: needs root \
or the server's user)" >&2; exit 6; }
C=$(pgrep -d, -P "$PM"); P="$PM${C:+,$C}"
"""
_PIDS_NAME_SH = """P=$(pgrep -d, -x %(names)s) || { echo "no %(names)s process runs on $(hostname)" >&2; exit 6; }"""


def _pids(ctx: CollectorContext) -> str:
    """The shell lines that set $P to the server's process ids on its host (see above)."""
    if ctx.target.port and not ctx.target.socket:
        return _PIDS_PORT_SH % {"port": int(ctx.target.port)}
    return _PIDS_NAME_SH % {"names": shlex.quote("|".join(ctx.target.dbms.process_names))}


def _window(info: Any, seconds: float) -> tuple[float, float]:
    """(length, delay from now) of a window of at most ``seconds`` centred on the step's measured part."""
    window = min(seconds, max(MIN_WINDOW_S, info.duration_s * WINDOW_SHARE))
    return window, max(0.0, info.t_start + info.duration_s / 2 - window / 2 - time.time())


class SshProfileSource(Collector):
    """perf of the target's server on its own host, over ssh, in the middle of each step."""

    name = "ssh_profile"
    row_fields = ("profile",)
    title = "server profiles over ssh"
    sampled = False  # works from the step hooks, in the run's process

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.spec = str(ctx.options.get("ssh") or "")
        self.seconds = float(ctx.options.get("profile_seconds", 3.0))
        self.remote_host = ""
        self._threads: dict[tuple[str, int], threading.Thread] = {}
        self._out: dict[tuple[str, int], dict[str, Any]] = {}

    def probe(self) -> Probe:
        failed, self.remote_host = ssh_probe(self.spec, _PROBE_SH % {"pids": _pids(self.ctx)}, HINT)
        if failed is not None:
            return failed
        return Probe(True, f"source: ssh {self.spec} (host {self.remote_host or '?'})")

    def sample(self) -> None:
        return None

    def step_started(self, info: Any) -> None:
        if info.target != self.ctx.target.label:
            return
        th = threading.Thread(target=self._guarded, args=(info,), daemon=True)
        self._threads[(info.workload, info.clients)] = th
        th.start()

    def _guarded(self, info: Any) -> None:
        with contextlib.suppress(OSError, DiagError):  # the step's row says nothing; the run goes on
            self._record(info)

    def _record(self, info: Any) -> None:
        window, delay = _window(info, self.seconds)
        cmd = _RECORD_SH % {"pids": _pids(self.ctx), "freq": FREQ_HZ, "fields": PERF_SCRIPT_FIELDS,
                            "tries": RECORD_TRIES}
        key = (info.workload, info.clients)
        start, step_end = time.time() + delay, info.t_start + info.duration_s
        try:
            proc = subprocess.Popen(ssh_argv(self.spec, cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, preexec_fn=pdeathsig_preexec())
        except OSError as e:
            self._out[key] = {"error": f"ssh {self.spec}: {e}", "source": f"ssh {self.spec}"}
            return
        assert proc.stdout is not None
        ready = select.select([proc.stdout], [], [], max(0.1, step_end - time.time()))[0]
        if ready and proc.stdout.readline().strip() == b"ready":
            time.sleep(max(0.0, start - time.time()))
        t0 = time.time()
        secs = min(window, step_end - t0)  # a late connection gets what is left of the step
        try:
            out, err_b = proc.communicate(f"{secs:.2f}\n".encode() if secs >= MIN_WINDOW_S else b"0\n",
                                          timeout=window + SCRIPT_SLACK_S)
        except (subprocess.TimeoutExpired, OSError) as e:
            proc.kill()
            proc.communicate()
            self._out[key] = {"error": f"ssh {self.spec}: {e}", "source": f"ssh {self.spec}"}
            return
        if secs < MIN_WINDOW_S:
            why = err_b.decode("utf-8", "replace").strip().splitlines()
            self._out[key] = {"error": f"ssh {self.spec}: " + (why[-1] if proc.returncode and why else
                                       f"the connection was not ready before the step's last {MIN_WINDOW_S:g} s: "
                                       "no profile window left"), "source": f"ssh {self.spec}"}
            return
        window = secs
        rc = proc.returncode
        lines = err_b.decode("utf-8", "replace").strip().splitlines()
        err = lines[-1] if lines else ""
        if rc != 0:
            self._out[key] = {"error": f"ssh {self.spec}: {err or f'exit status {rc}'}", "source": f"ssh {self.spec}"}
            return
        samples = parse_perf_script(out.decode("utf-8", "replace"))
        folded = fold_samples(samples, lambda tid, comm: "server")
        label = self.ctx.target.label
        rel = f"artifacts/profile--{safe_name(label)}--{safe_name(info.workload)}--c{info.clients}.folded"
        if self.ctx.bundle is None:
            raise DiagError("ssh profile: no run bundle to write into")
        path = self.ctx.bundle.artifact(rel.split("/", 1)[1])
        save_folded(folded, path)
        self._out[key] = {"folded": rel, "samples": len(samples), "freq_hz": FREQ_HZ, "window": [t0, t0 + window],
                          "unresolved_share": unresolved_share(folded) if samples else 0.0,
                          "source": f"ssh {self.spec}", "host": self.remote_host}

    def step_finished(self, info: Any) -> dict[str, Any] | None:
        if info.target != self.ctx.target.label:
            return None
        th = self._threads.pop((info.workload, info.clients), None)
        if th is None:
            return None
        th.join(self.seconds + SCRIPT_SLACK_S + PROBE_TIMEOUT_S)
        out = self._out.pop((info.workload, info.clients), None)
        return {"profile": out} if out else None


# --------------------------------------------------------------------------- flush calls over ssh

FLUSH_EVENTS = {  # record key -> perf tracepoint, as collectors.flush counts them locally
    "syscalls.fsync": "syscalls:sys_enter_fsync",
    "syscalls.fdatasync": "syscalls:sys_enter_fdatasync",
    "syscalls.sync_file_range": "syscalls:sys_enter_sync_file_range",
}
STOP_TIMEOUT_S = 10.0

# perf stat's interval lines (stderr) come back on ssh's stdout; when dbdiag closes ssh's stdin, `read`
# returns and perf gets SIGINT, prints its last interval and exits, so nothing stays on that host.
_FLUSH_SH = """%(pids)s
echo "T0 $(date +%%s.%%N)"
perf stat -e %(events)s -x, -I %(ms)d -p "$P" 2>&1 >/dev/null &
S=$!
read _ || true
kill -INT "$S" 2>/dev/null
wait "$S\""""


class SshFlushCollector(Collector):
    """Flush system calls by the target's server processes on its own host, counted by perf there over ssh.

    Writes the series of :class:`collectors.flush.FlushCollector` (``flush--<label>``, cumulative
    ``syscalls.*`` counts, ``sources``), so the durability checks read S for this target as for a local
    one. Not over ssh: the filesystem's file-sync tracepoint (O_SYNC/O_DSYNC writes) and the device
    counters (D: ``--host-metrics`` gives them from node_exporter). The server's processes are those
    listed at start (:func:`_pids`); perf's counters are inherited, so backends forked later count too.
    """

    name = "flush"
    title = "flush tracing over ssh"
    metrics = tuple(m for m in FLUSH_METRICS if m.name.startswith("syscalls."))
    interval_s = 1.0
    ready_timeout_s = 20.0  # ssh and perf start within seconds; clients wait for the first record

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.spec = str(ctx.options.get("ssh") or "")
        self._proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._lock = threading.Lock()
        self._queue: list[dict[str, Any]] = []
        self._totals = {k: 0 for k in FLUSH_EVENTS}
        self._t0: float | None = None  # unix time on that host when perf started
        self.sources = [f"ssh {self.spec} perf:" + ",".join(FLUSH_EVENTS.values())]

    def probe(self) -> Probe:
        events = ",".join(FLUSH_EVENTS.values())
        cmd = (_pids(self.ctx) + f"\nperf stat -e {events} -x, -p \"$P\" -- sleep 0.1 >/dev/null 2>/tmp/dbdiag-probe.$$ || "
               f"{{ grep -v '^#' /tmp/dbdiag-probe.$$ | tail -n 1 >&2; rm -f /tmp/dbdiag-probe.$$; exit 7; }}; "
               "rm -f /tmp/dbdiag-probe.$$")
        failed, _ = ssh_probe(self.spec, cmd, HINT, "perf cannot count flush calls: ")
        if failed is not None:
            return failed
        return Probe(True, "sources: " + ", ".join(self.sources),
                     missing=("O_SYNC/O_DSYNC writes are not counted over ssh (no file-sync tracepoint)",
                              "device flushes: not read over ssh (--host-metrics gives them from node_exporter)"))

    def start(self) -> None:
        cmd = _FLUSH_SH % {"pids": _pids(self.ctx), "events": ",".join(FLUSH_EVENTS.values()), "ms": 1000}
        self._proc = subprocess.Popen(ssh_argv(self.spec, cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True, bufsize=1,
                                      preexec_fn=pdeathsig_preexec(), start_new_session=True)
        self._reader = threading.Thread(target=self._read, name="dbdiag-ssh-flush", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        asm = IntervalAssembler(FLUSH_EVENTS.values())
        for line in self._proc.stdout:
            if line.startswith("T0 "):  # that host's clock as perf starts: intervals are stamped from it
                with contextlib.suppress(ValueError):
                    self._t0 = float(line.split()[1])
                with self._lock:  # the baseline: counting starts now (the run waits for it before clients connect)
                    self._queue.append({"t": self._t0 or time.time(), **self._totals, "sources": self.sources})
                continue
            try:
                done = asm.feed(line)
            except ParseError:
                continue
            if done is not None:
                self._add(done[1], done[0])
        last = asm.flush()
        if last is not None:
            self._add(last[1], last[0])

    def _add(self, counts: dict[str, int | None], t_rel: float) -> None:
        with self._lock:
            for key, ev in FLUSH_EVENTS.items():
                self._totals[key] += counts.get(ev) or 0
            # perf's own interval end (its host's clock), not when the line got here: ssh may deliver in bursts.
            t = self._t0 + t_rel if self._t0 is not None else time.time()
            self._queue.append({"t": t, **self._totals, "perf_t": round(t_rel, 3), "sources": self.sources})

    def sample(self) -> list[dict[str, Any]] | None:
        with self._lock:
            out, self._queue = self._queue, []
        if not out and self._proc is not None and self._proc.poll() is not None:
            raise DiagError(f"flush over ssh {self.spec}: ssh or perf stopped (exit status {self._proc.returncode})")
        return out or None

    def stop(self) -> list[dict[str, Any]] | None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()  # the remote `read` returns: perf gets SIGINT there and prints its last interval
            try:
                proc.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_TIMEOUT_S)
        if self._reader is not None:
            self._reader.join(STOP_TIMEOUT_S)
        with self._lock:
            out, self._queue = self._queue, []
        return out or None
