"""F of a target measured on its own host over ssh: the local fsync test's every method, run by python3 there.

``--ssh LABEL=user@host`` with a write workload: before the target's sweep, the
same code as ``dbdiag fsync-test`` (:mod:`collectors.fsync_test` with the modules
it imports, :mod:`collectors.diskstats` and :mod:`diag.core.errors`: standard library
only) is sent as the program text of ``python3 -`` on that host, over ssh's stdin.
Nothing is installed there and nothing is left behind (the test file is removed
as a local test removes it). The program prints
:meth:`collectors.fsync_test.FsyncTestResult.to_dict` as one JSON line; it is
stored where the local fsync test stores its own (run.json ``flush_capability``:
a device entry ``ssh <spec>:<device>`` and the target's entry), so the durability
checks read F, and the report its table, for this target as for a local one.

No user value reaches a shell or ssh's options: the remote command is the fixed
``python3 -``; the data directory and the seconds per test travel inside the
program as Python literals (:func:`remote_program`); ssh's destination goes after
``--`` (:func:`collectors.ssh_host.ssh_argv`).

Needs python3 on that host, 3.7 or later for every method (the shipped modules use
dataclasses; an older python3 there runs F's own method alone, 8 kB pwrite + fdatasync,
said in the result's notes), and write access on the data directory's filesystem
(root, or the server's user). A host that cannot be
reached, has no python3, or where the test fails is a reason, not the end of
the run: the probe or the target's ``flush_capability`` entry says why, and the
run goes on without F for that target.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

import collectors.diskstats
import collectors.fsync_test
import diag.core.errors
from collectors.base import Collector, CollectorContext, Probe
from collectors.flush_capability import TESTS_PER_DEVICE
from collectors.diskstats import DeviceInfo
from collectors.fsync_test import GROUP_ONE, FsyncMethodResult, FsyncTestResult
from collectors.ssh_host import PROBE_TIMEOUT_S, ssh_argv, ssh_probe
from diag.core.errors import DiagError
from diag.core.procs import pdeathsig_preexec
from diag.core.schema import FlushDevice, FlushTarget

FSYNC_SECONDS = 0.3  # per method when the run does not say (diag.run.FSYNC_TEST_SECONDS)
# The modules the test needs, in import order; each is standard library only (checked by a unit test).
SHIPPED = (diag.core.errors, collectors.diskstats, collectors.fsync_test)
MIN_PYTHON = (3, 7)
HINT = ("give dbdiag ssh access to the database host (BatchMode: a key, no password prompt) as a user that may "
        "write in the server's data directory (root, or the server's user), with python3 there (3.7+ for every "
        "method)")

# Why the test cannot run there, in one line; else the host's name.
_PROBE_SH = """command -v python3 >/dev/null 2>&1 || { echo "python3 is not installed on $(hostname)" >&2; exit 5; }
hostname"""

# Runs on that host; no f-strings, so an older python3 still reads it and says why it cannot go on.
_BOOT = r'''
import json, socket, sys, types
P = json.loads(%(payload)r)
def done(out):
    out["host"] = socket.gethostname()
    sys.stdout.write(json.dumps(out) + "\n")
    sys.exit(0)
if sys.version_info < tuple(P["min_python"]):  # too old for the shipped modules: the fdatasync test alone
    import os, tempfile, time
    old = "python3 %%d.%%d" %% sys.version_info[:2]
    try:
        fd, path = tempfile.mkstemp(prefix=".dbdiag-fsync-", dir=P["directory"])
    except OSError as e:
        done({"error": "%%s: cannot create a file in %%s: %%s" %% (old, P["directory"], e.strerror)})
    try:
        buf = os.urandom(8192)
        os.pwrite(fd, buf, 0)
        os.fdatasync(fd)
        n, t0 = 0, time.perf_counter()
        while n == 0 or time.perf_counter() - t0 < P["seconds"]:
            os.pwrite(fd, buf, 0)
            os.fdatasync(fd)
            n += 1
        el = time.perf_counter() - t0
        st = os.fstat(fd)
    finally:
        os.close(fd)
        os.unlink(path)
    dev = "/sys/dev/block/%%d:%%d" %% (os.major(st.st_dev), os.minor(st.st_dev))
    done({"fallback": old, "ops": n, "seconds": el, "directory": P["directory"], "kernel": os.uname()[2],
          "device": os.path.basename(os.path.realpath(dev)) if os.path.exists(dev) else None})
for name, source in P["modules"]:
    for i in range(name.count(".")):  # the packages, empty: only the shipped modules are in them
        pkg = name.rsplit(".", name.count(".") - i)[0]
        if pkg not in sys.modules:
            sys.modules[pkg] = types.ModuleType(pkg)
            sys.modules[pkg].__path__ = []
    mod = types.ModuleType(name)
    mod.__file__ = "<dbdiag " + name + ">"
    sys.modules[name] = mod
    exec(compile(source, mod.__file__, "exec"), mod.__dict__)
ft, errors = sys.modules["collectors.fsync_test"], sys.modules["diag.core.errors"]
try:
    where = ft.writable_dir_on_same_fs(P["directory"])
    done({"result": ft.run_fsync_test(where, P["seconds"]).to_dict(), "directory": str(where)})
except errors.DiagError as e:
    done({"error": str(e)})
'''


def remote_program(directory: str, seconds: float) -> bytes:
    """The text ``python3 -`` runs on that host: the shipped modules, then the test in ``directory``.

    Every value is a Python literal made by ``repr`` of a JSON text, never pasted into code, so a data
    directory with quotes, newlines or ``$(...)`` in its name stays a name."""
    modules = [[m.__name__, Path(str(m.__file__)).read_text(encoding="utf-8")] for m in SHIPPED]
    payload = json.dumps({"directory": directory, "seconds": float(seconds), "modules": modules,
                          "min_python": list(MIN_PYTHON)})
    return (_BOOT % {"payload": payload}).encode("utf-8")


def _result(out: dict[str, Any], spec: str) -> FsyncTestResult:
    """The remote program's answer as a test result, with where it ran in its first note; DiagError if it failed."""
    host = str(out.get("host") or "?")
    if out.get("error"):
        raise DiagError(f"on {host}: {out['error']}")
    try:
        if out.get("fallback"):
            return _fdatasync_only(out, f"run on {host} over ssh {spec} by {out['fallback']} there")
        res = FsyncTestResult.from_dict(out["result"])
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        raise DiagError(f"on {host}: the fsync test's answer is not a result ({type(e).__name__}: {e})") from None
    first = f"run on {host} over ssh {spec} by python3 there: the same tests as a local fsync test"
    return replace(res, notes=(first, *res.notes))


def _fdatasync_only(out: dict[str, Any], where: str) -> FsyncTestResult:
    """The answer of a python3 older than :data:`MIN_PYTHON` there: 8 kB pwrite + fdatasync, F's method alone."""
    ops, secs, d = int(out["ops"]), float(out["seconds"]), str(out["directory"])
    dev = DeviceInfo(path=d, name=str(out["device"]) if out.get("device") else None,
                     reason="" if out.get("device") else "its /sys/dev/block entry was not found")
    test = FsyncMethodResult(GROUP_ONE, "fdatasync", "fdatasync", True, ops=ops, seconds=round(secs, 3),
                             ops_per_s=round(ops / secs, 1), us_per_op=round(secs * 1e6 / ops, 1))
    why = (f"{where}, older than {MIN_PYTHON[0]}.{MIN_PYTHON[1]}: the fdatasync test only (one 8 kB write + "
           "fdatasync); no other method, no device facts or flush counters")
    return FsyncTestResult(directory=d, seconds_per_test=round(secs, 3), device=dev, tests=(test,),
                           flush_counters=False, kernel=str(out.get("kernel") or ""), notes=(why,))


class SshFsyncTest(Collector):
    """F of a target measured on its own host over ssh (see the module docstring).

    Options: ``ssh`` (the destination), ``fsync_seconds`` (s per method, 12 methods), ``progress``
    (a text stream for the one line it prints; stderr when not given)."""

    name = "flush_capability"
    title = "fsync test over ssh"
    sampled = False

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.spec = str(ctx.options.get("ssh") or "")
        self.seconds = float(ctx.options.get("fsync_seconds") or FSYNC_SECONDS)
        self.progress: TextIO = ctx.options.get("progress") or sys.stderr
        self.remote_host = ""
        self.result: FsyncTestResult | None = None
        self.directory = ""
        self.error = ""

    def probe(self) -> Probe:
        if not self.ctx.data_dir:
            return Probe(False, "the server did not say where its data directory is (needs the privilege to read "
                         "data_directory / datadir)")
        failed, self.remote_host = ssh_probe(self.spec, _PROBE_SH, HINT)
        if failed is not None:
            return failed
        return Probe(True, f"fsync test ({TESTS_PER_DEVICE} methods) in {self.ctx.data_dir} on ssh {self.spec} "
                     f"(host {self.remote_host or '?'})")

    def start(self) -> None:
        """Run the test there; a failure is recorded for :meth:`facts` and said in one line, never raised."""
        print(f"dbdiag: measuring flush capability over ssh {self.spec} in {self.ctx.data_dir} ({self.seconds:g} s "
              f"x {TESTS_PER_DEVICE} tests) ...", file=self.progress, flush=True)
        try:
            self.result, self.directory = self._run()
        except DiagError as e:
            self.error = f"fsync test over ssh {self.spec}: {e}"
            print(f"dbdiag: note: {self.title} ({self.ctx.target.label}) not measured: {e}", file=self.progress,
                  flush=True)

    def _run(self) -> tuple[FsyncTestResult, str]:
        timeout = TESTS_PER_DEVICE * self.seconds + 2 * PROBE_TIMEOUT_S
        try:
            p = subprocess.run(ssh_argv(self.spec, "python3 -"), input=remote_program(str(self.ctx.data_dir),
                                                                                     self.seconds),
                               capture_output=True, timeout=timeout, preexec_fn=pdeathsig_preexec())
        except FileNotFoundError:
            raise DiagError("ssh is not installed here (Debian: openssh-client)") from None
        except subprocess.TimeoutExpired:
            raise DiagError(f"no answer within {timeout:g} s") from None
        except OSError as e:
            raise DiagError(str(e)) from None
        lines = p.stdout.decode("utf-8", "replace").strip().splitlines()
        try:
            out = json.loads(lines[-1]) if p.returncode == 0 and lines else None
        except ValueError:
            out = None
        if not isinstance(out, dict):
            err = p.stderr.decode("utf-8", "replace").strip().splitlines()
            raise DiagError(err[-1] if err else f"exit status {p.returncode} and no answer")
        return _result(out, self.spec), str(out.get("directory") or self.ctx.data_dir)

    def sample(self) -> None:
        return None

    def facts(self) -> dict[str, Any]:
        """run.json ``flush_capability`` with this target's test (or why there is none) added to what is there."""
        if self.ctx.bundle is None or not (self.result or self.error):
            return {}
        try:
            current = json.loads((self.ctx.bundle.path / "run.json").read_text()).get("flush_capability") or {}
        except (OSError, ValueError):
            current = {}
        devices = dict(current.get("devices") or {})
        if self.result is None:
            target = FlushTarget(None, str(self.ctx.data_dir), self.error)
        else:
            dev = self.result.device
            where = dev.name or f"{dev.fs_type or 'nodev'}:{dev.mount_point or self.directory}"  # as a local test's
            key = f"ssh {self.spec}:{where}"
            devices[key] = FlushDevice.from_fsync_test(self.result.to_dict()).to_dict()
            target = FlushTarget(key, self.directory)
        targets = {**(current.get("targets") or {}), self.ctx.target.label: target.to_dict()}
        return {"flush_capability": {**current, "devices": devices, "targets": targets}}
