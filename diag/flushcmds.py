"""``dbdiag fsync-test`` and ``dbdiag durability``: what the disk can flush, and whether commits are flushed.

``fsync-test [TARGET...] [--dir PATH] [--seconds S] [--json]`` runs
:func:`collectors.fsync_test.run_fsync_test` in each local target's data
directory (an ``embedded:`` target gets a throwaway server for it), else in
``--dir`` or the current directory.

``durability TARGET`` measures F (fsync test in the data directory, or
``--flush-capability``), runs single-row autocommit inserts through the workload
driver at 1 and 4 clients while :class:`collectors.flush.FlushCollector` counts
flush calls and device flushes, then prints the settings verdict and the
plausibility verdict of each step with its numbers and formulas. Exit code: 0
durable and plausible, 1 relaxed or implausible, 2 could not tell (also for any
error). It writes rows into ``dbdiag.insert_data`` on the target, like
``dbdiag run -w insert``.

:func:`measure_flush_capability` is also what a run calls to fill run.json
``flush_capability`` (format in :func:`reports.durability_view.flush_capability_entry`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from diag.argtypes import csv_ints as _clients, key_values as _kv, positive as _positive
from diag.errors import DiagError, UsageError

DURABILITY_CLIENTS = (1, 4)
PROBE_FLUSH_INTERVAL_S = 0.25  # finer than a run's 1 s so a short step's window edges cost little
COLLECTOR_READY_TIMEOUT_S = 10.0


def add_parsers(sub: Any) -> None:
    f = sub.add_parser("fsync-test", help="measure how fast the disk completes durable writes (like pg_test_fsync)")
    f.add_argument("targets", nargs="*", metavar="TARGET",
                   help="test in each local target's data directory (embedded:ENGINE starts a throwaway server)")
    f.add_argument("--dir", type=Path, default=None, help="directory to test in (default: the current directory)")
    f.add_argument("--seconds", type=_positive, default=2.0, help="seconds per test; there are 12 tests")
    f.add_argument("--set", action="append", metavar="KEY=VALUE", help="setting for embedded servers")
    f.add_argument("--json", action="store_true", help="print the results as JSON")

    d = sub.add_parser("durability", help="are commits durable, and is the commit rate physically possible?")
    d.add_argument("target", metavar="TARGET", help="[LABEL=]DSN or embedded:postgres / embedded:mysql")
    d.add_argument("--flush-capability", type=_positive, default=None, metavar="OPS",
                   help="flushes/s the storage can do (skip the fsync test), e.g. 120 for a 7200 rpm disk")
    d.add_argument("--seconds", type=_positive, default=3.0, help="measured seconds per step")
    d.add_argument("--warmup", type=float, default=1.0, help="seconds per step before measuring")
    d.add_argument("-c", "--clients", type=_clients, default=DURABILITY_CLIENTS,
                   help="client counts to probe (default 1,4)")
    d.add_argument("--fsync-seconds", type=_positive, default=0.5,
                   help="seconds per fsync test when measuring F (12 tests)")
    d.add_argument("--set", action="append", metavar="KEY=VALUE",
                   help="setting for an embedded server, e.g. fsync=off")
    d.add_argument("-o", "--out", type=Path, default=None, help="keep the probe's run bundle in this folder")
    d.add_argument("--json", action="store_true", help="print the verdicts as JSON")


def dispatch(a: argparse.Namespace) -> int | None:
    if a.command == "fsync-test":
        return cmd_fsync_test(a)
    if a.command == "durability":
        return cmd_durability(a)
    return None


# --------------------------------------------------------------------------- flush capability


def writable_dir_on_same_fs(path: str) -> Path:
    """``path`` if we may create files there, else its nearest writable parent on the same filesystem."""
    p = Path(path)
    try:
        dev = os.stat(p).st_dev
    except OSError as e:
        raise DiagError(f"cannot stat {p}: {e.strerror}") from None
    for cand in (p, *p.parents):
        try:
            if os.stat(cand).st_dev != dev:
                break
        except OSError:
            break
        if os.access(cand, os.W_OK | os.X_OK):
            return cand
    raise DiagError(f"no writable directory on the filesystem of {p}: run as the server's user or root, "
                    "or give --flush-capability")


def measure_flush_capability(dirs: Sequence[tuple[str, str | None]], seconds_per_test: float = 0.5,
                             progress: TextIO | None = sys.stderr) -> dict[str, Any]:
    """run.json ``flush_capability`` for ``(label, data_directory)`` pairs: one fsync test per device.

    Targets on a device already tested share its result. A target whose test
    cannot run (no data directory, not writable) gets ``device`` None and an
    ``error``; nothing is raised, so a run goes on without F.
    """
    from collectors.diskstats import device_for_path
    from collectors.fsync_test import run_fsync_test
    from reports.durability_view import flush_capability_entry

    out: dict[str, Any] = {"devices": {}, "targets": {}}
    for label, data_dir in dirs:
        if not data_dir:
            out["targets"][label] = {"device": None, "directory": None,
                                     "error": "the server's data directory is not known here"}
            continue
        try:
            info = device_for_path(data_dir)
            key = info.name or f"{info.fs_type or 'nodev'}:{info.mount_point or data_dir}"
            where = writable_dir_on_same_fs(data_dir)
            if key not in out["devices"]:
                if progress is not None:
                    print(f"dbdiag: measuring flush capability in {where} ({seconds_per_test:g} s x 12 tests) ...",
                          file=progress, flush=True)
                out["devices"][key] = flush_capability_entry(run_fsync_test(where, seconds_per_test))
            out["targets"][label] = {"device": key, "directory": str(where), "error": ""}
        except DiagError as e:
            out["targets"][label] = {"device": None, "directory": data_dir, "error": str(e)}
    return out


# --------------------------------------------------------------------------- fsync-test


def cmd_fsync_test(a: argparse.Namespace) -> int:
    from collectors.fsync_test import format_table, run_fsync_test
    from diag import servers
    from diag.db import Session
    from diag.hostinfo import data_directory
    from diag.targets import parse_target

    if a.targets and a.dir:
        raise UsageError("give either TARGETs or --dir, not both")
    settings = _kv(a.set)
    results: list[tuple[str | None, Any]] = []
    if not a.targets:
        results.append((None, run_fsync_test(a.dir or Path.cwd(), a.seconds)))
    targets = [parse_target(t) for t in a.targets]
    for t in targets:
        srv = None
        try:
            if t.embedded:
                srv = servers.start_server(t.engine, settings)
                t = srv.target(t)
                ddir: str | None = str(srv.data_dir)
            else:
                if not t.is_local():
                    raise DiagError(f"{t.label}: the server is not on this machine; run fsync-test on its host "
                                    "(or give --dir)")
                with Session(t) as s:
                    ddir = data_directory(s)
                if not ddir:
                    raise DiagError(f"{t.label}: the server did not say where its data directory is; use --dir")
            results.append((t.label, run_fsync_test(writable_dir_on_same_fs(ddir), a.seconds)))
        finally:
            if srv is not None:
                srv.stop()
    if a.json:
        print(json.dumps({"fsync_tests": [{"target": label, **r.to_dict()} for label, r in results]}, indent=1))
    else:
        for i, (label, r) in enumerate(results):
            if i:
                print()
            if label:
                print(f"{label}:")
            print(format_table(r), end="")
    return 0


# --------------------------------------------------------------------------- durability


class _StepHooks:
    """Writes results as they come and says which step runs."""

    def __init__(self, bundle: Any, out: TextIO | None) -> None:
        self.bundle = bundle
        self.out = out
        self.results: list[dict[str, Any]] = []

    def step_started(self, info: Any) -> None:
        if self.out is not None:
            print(f"dbdiag: probing {info.clients} client{'s' if info.clients > 1 else ''} "
                  f"for {info.duration_s:g} s ...", file=self.out, flush=True)

    def step_finished(self, info: Any, result: dict[str, Any]) -> None:
        self.results.append(result)
        self.bundle.write_json("results.json", {"results": self.results})


def wait_for_series(path: Path, process: Any, timeout_s: float = COLLECTOR_READY_TIMEOUT_S) -> bool:
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


def run_durability_probe(target: Any, *, clients: tuple[int, ...], seconds: float, warmup: float,
                         flush_capability: float | None, fsync_seconds: float, out_dir: Path,
                         server: Any = None, argv: list[str] | None = None,
                         progress: TextIO | None = sys.stderr) -> Path:
    """Identify, measure F, run the insert probe with flush tracing; returns the bundle folder.

    ``server`` is the throwaway server behind an embedded target (the caller stops it).
    """
    from collectors.base import CollectorContext
    from collectors.flush import FlushCollector
    from collectors.runner import CollectorRunner, collector_key, probe_all
    from diag import __version__
    from diag.bundle import BundleWriter, safe_name
    from diag.hostinfo import host_facts
    from diag.run import TargetRuntime, identify
    from diag.targets import redact_argv
    from workloads.driver import DriverOptions, run_sweep

    rt = TargetRuntime(target, server=server)
    identify(rt)
    bundle = BundleWriter(out_dir, tuple(p for p in (target.password,) if p))
    drv = DriverOptions(clients=clients, duration_s=seconds, warmup_s=max(0.0, warmup), protocol="prepared",
                        report_interval_s=1.0)
    run_json: dict[str, Any] = {
        "tool": "dbdiag", "version": __version__, "kind": "durability",
        "command": redact_argv(argv or []), "status": "running", "started": time.time(), "host": host_facts(),
        "workloads": ["insert"], "targets": [rt.info],
        "options": {"clients": list(clients), "duration_s": seconds, "warmup_s": drv.warmup_s,
                    "flush_capability": flush_capability, "flush_interval_s": PROBE_FLUSH_INTERVAL_S},
        "collectors": {},
    }
    bundle.write_json("run.json", run_json)
    bundle.write_json("results.json", {"results": []})
    if flush_capability is None:
        local = [(target.label, rt.data_dir)] if target.is_local() else []
        fc = measure_flush_capability(local, fsync_seconds, progress) if local else {
            "devices": {}, "targets": {target.label: {"device": None, "directory": None,
                                                      "error": "the server is not on this machine"}}}
        run_json["flush_capability"] = fc
        bundle.write_json("run.json", run_json)

    ctx = CollectorContext(target=rt.target, artifacts=bundle.path / "artifacts", server_pid=rt.pid,
                           data_dir=rt.data_dir, options={"flush_interval_s": PROBE_FLUSH_INTERVAL_S})
    cols: list[Any] = [FlushCollector(ctx)]
    # The engine's own flush counter: shown beside S, and S itself when flush tracing is off.
    with contextlib.suppress(ImportError):
        if target.engine == "postgres":
            from collectors.pg.stats import PgStatsCollector as Eng
        else:
            from collectors.mysql.status import MyStatusCollector as Eng  # type: ignore[assignment]
        cols.append(Eng(CollectorContext(target=rt.target, artifacts=bundle.path / "artifacts", server_pid=rt.pid,
                                         data_dir=rt.data_dir)))
    probes = probe_all(cols)
    for k, p in probes.items():
        if not p.ok and progress is not None:
            print(f"dbdiag: note: {k} not collected: {p.reason}" + (f" ({p.hint})" if p.hint else ""),
                  file=progress, flush=True)
    run_json["collectors"] = {k: v.to_dict() for k, v in probes.items()}
    bundle.write_json("run.json", run_json)
    runner = CollectorRunner(bundle, [c for c in cols if probes[collector_key(c)].ok])
    hooks = _StepHooks(bundle, progress)
    status, error = "complete", ""
    runner.start()
    try:
        flush_key = collector_key(cols[0])
        proc = next((r.process for r in runner.running if r.key == flush_key), None)
        if proc is not None and not wait_for_series(bundle.path / "series" / f"{safe_name(flush_key)}.jsonl", proc):
            why = "; ".join(e.get("message", "") for e in _events(bundle.path) if e.get("kind") == "collector_off")
            raise DiagError(f"flush tracing did not start: {why or 'no record within 10 s'}")
        run_sweep(rt.target, ["insert"], drv, bundle, hooks=hooks, progress=None)
    except KeyboardInterrupt:
        status, error = "interrupted", "interrupted by Ctrl-C"
        raise
    except DiagError as e:
        status, error = "failed", str(e)
        raise
    finally:
        runner.stop()
        run_json.update(status=status, error=error, ended=time.time())
        bundle.write_json("run.json", run_json)
    return bundle.path


def _events(path: Path) -> list[dict[str, Any]]:
    from diag.bundle import read_jsonl

    return read_jsonl(path / "events.jsonl")


def cmd_durability(a: argparse.Namespace) -> int:
    from diag import servers
    from diag.bundle import load_bundle
    from diag.targets import parse_target
    from reports.durability_view import durability_rows, overall

    target = parse_target(a.target)
    settings = _kv(a.set)
    if settings and not target.embedded:
        raise UsageError("--set only applies to embedded targets (the server is started for the probe)")
    if a.warmup < 0:
        raise UsageError("--warmup cannot be negative")
    keep = a.out is not None
    out_dir = Path(a.out) if keep else Path(tempfile.mkdtemp(prefix="dbdiag-durability-"))
    srv = None
    try:
        if target.embedded:
            print(f"dbdiag: starting a throwaway {target.engine} server ...", file=sys.stderr, flush=True)
            srv = servers.start_server(target.engine, settings)
            target = srv.target(target)
        path = run_durability_probe(target, clients=a.clients, seconds=a.seconds, warmup=a.warmup,
                                    flush_capability=a.flush_capability, fsync_seconds=a.fsync_seconds,
                                    out_dir=out_dir, server=srv, argv=["dbdiag", *sys.argv[1:]])
        b = load_bundle(path)
        steps = durability_rows(b)
        code, line = overall(steps)
        if a.json:
            print(json.dumps({"target": target.label, "exit_code": code, "verdict": line,
                              "server": (b.run.get("targets") or [{}])[0],
                              "flush_capability": b.run.get("flush_capability"),
                              "collectors": b.run.get("collectors", {}),
                              "steps": [s.to_dict() for s in steps]}, indent=1, default=str))
        else:
            print(format_durability(b.run, steps, code, line), end="")
        if keep:
            print(f"dbdiag: probe bundle kept in {path}", file=sys.stderr)
        return code
    finally:
        if srv is not None:
            srv.stop()
        if not keep:
            shutil.rmtree(out_dir, ignore_errors=True)


# --------------------------------------------------------------------------- text output


def _n(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def format_durability(run: dict[str, Any], steps: Sequence[Any], code: int, line: str) -> str:
    """The durability verdicts as text: settings, F, a table per step, each check with its formula."""
    info = (run.get("targets") or [{}])[0]
    storage = info.get("storage") or {}
    lines: list[str] = []
    where = ""
    if info.get("data_directory"):
        dev = (f"{storage.get('fs_type') or '?'} on {storage['name']}" if storage.get("name")
               else f"{storage.get('fs_type') or '?'}, no block device")
        where = f", data directory {info['data_directory']} ({dev}; write cache: {storage.get('write_cache') or '?'})"
    version = str(info.get("version", "")).split(" on ")[0].split(",")[0]
    product = version if str(info.get("product", "")).lower() in version.lower() else \
        f"{info.get('product', '')} {version}".strip()
    lines.append(f"{info.get('label', '?')}: {product}{where}")
    lines.append("")
    if not steps:
        lines.append(f"Verdict: {line} (exit {code})")
        return "\n".join(lines) + "\n"
    sv = steps[0].settings
    lines.append(f"Settings: {sv.status.upper()}. {sv.reason}")
    shown = ", ".join(f"{k}={v}" for k, v in sorted((info.get("settings") or {}).items()))
    if shown:
        lines.append(f"  read: {shown}")
    for r in sv.relaxed:
        lines.append(f"  - {r.setting}={r.value}: {r.risk}")
    for r in sv.notes:
        lines.append(f"  note {r.setting}={r.value}: {r.risk}")
    s0 = steps[0]
    lines.append("")
    lines.append(f"F (flush capability): {_n(s0.F)} flushes/s - {s0.F_source}")
    lines.append(f"C: {s0.C_source}")
    lines.append(f"S: {s0.S_source}")
    lines.append(f"D: {s0.D_source}")
    lines.append("")
    lines.append(f"{'clients':>7} {'C/s':>10} {'S/s':>10} {'S/commit':>9} {'D/s':>10} {'D/commit':>9} "
                 f"{'engine/s':>10}  plausibility")
    for s in steps:
        pv = s.plausibility
        lines.append(f"{s.clients:>7} {_n(s.C):>10} {_n(s.S):>10} {_n(s.S_per_commit, 2):>9} {_n(s.D):>10} "
                     f"{_n(s.D_per_commit, 2):>9} {_n(s.engine_flushes):>10}  {pv.status if pv else '-'}")
    if s0.engine_source:
        lines.append(f"  engine/s: {s0.engine_source} (the server's own count, shown for comparison)")
    for s in steps:
        if any(v is not None for v in s.syscalls.values()):
            lines.append(f"  system calls/s at {s.clients} client{'s' if s.clients > 1 else ''}: "
                         + ", ".join(f"{k} {_n(v)}" for k, v in s.syscalls.items()))
    for s in steps:
        pv = s.plausibility
        if pv is None:
            continue
        lines.append("")
        lines.append(f"{s.clients} client{'s' if s.clients > 1 else ''}: {pv.status}: {pv.reason}")
        for ch in pv.checks:
            mark = {"passed": "ok  ", "failed": "FAIL", "not_checked": "skip"}.get(ch.status, ch.status)
            lines.append(f"  [{mark}] {ch.name}: {ch.formula}" + (f" ({ch.reason})" if ch.status != "passed"
                                                                    else ""))
    notes = sorted({n for s in steps for n in s.notes})
    if notes:
        lines.append("")
        lines.extend(f"* {n}" for n in notes)
    lines.append("")
    lines.append(f"Verdict: {line} (exit {code})")
    return "\n".join(lines) + "\n"
