"""A full or failing disk under --out: one line, a non-zero exit, nothing left running, the bundle readable.

Real writes that fail: a small tmpfs filled by a ballast file once the step starts (needs root and
``mount``; failing with the reason otherwise: this machine kind has both), and /dev/full (every write there fails with ENOSPC)
behind a series file of a real collector process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from collectors.base import Collector, CollectorContext, Probe
from collectors.runner import CollectorRunner
from diag.core.bundle import BundleWriteError, BundleWriter, load_bundle, read_jsonl
from diag.core.targets import parse_target
from reports.views.render import render_bundle

ROOT = Path(__file__).resolve().parents[2]
TMPFS_KB = 8192      # holds the bundle up to the first step; the ballast takes the rest
STEP_S = 20          # measured seconds of the step: a run that did not stop would last at least this long


def _dbdiag(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diag", *args], capture_output=True, text=True, cwd=str(ROOT),
                          timeout=120, **kw)


@pytest.fixture()
def small_tmpfs(tmp_path: Path):
    """A tmpfs of TMPFS_KB KiB at tmp_path/fs, unmounted afterwards (lazily if something still holds it)."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.fail("mounting a tmpfs needs root (this machine kind runs the tests as root)")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_KB}k", "tmpfs", str(mnt)],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        pytest.fail(f"mount -t tmpfs not permitted here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


def _fill(mnt: Path) -> int:
    """Write a ballast file until the file system refuses; bytes written."""
    n = 0
    with open(mnt / "ballast", "wb", buffering=0) as fh:
        for chunk in (1 << 16, 4096, 1):
            while True:
                try:
                    n += fh.write(b"\0" * chunk)
                except OSError:
                    break
    return n


def _wait_step_started(events: Path, proc: subprocess.Popen, seen: dict[int, float], deadline_s: float) -> None:
    """Until the run's step_started event, noting every descendant process of the run (pid -> start time)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and proc.poll() is None:
        _note_tree(proc.pid, seen)
        if any(e.get("kind") == "step_started" for e in read_jsonl(events)):
            return
        time.sleep(0.2)
    pytest.fail(f"no step started within {deadline_s:.0f} s (exit {proc.poll()})")


def _note_tree(pid: int, seen: dict[int, float]) -> None:
    try:
        for c in psutil.Process(pid).children(recursive=True):
            try:
                seen.setdefault(c.pid, c.create_time())
            except psutil.Error:
                continue
    except psutil.Error:
        pass


def _alive(seen: dict[int, float]) -> list[str]:
    out = []
    for pid, started in seen.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == started and p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{pid} {p.name()}")
        except psutil.Error:
            continue
    return out


def test_full_tmpfs_stops_the_run_with_one_line(small_tmpfs: Path, tmp_path: Path) -> None:
    out = small_tmpfs / "run"
    err_path, out_path = tmp_path / "stderr", tmp_path / "stdout"
    seen: dict[int, float] = {}
    with open(err_path, "w") as err, open(out_path, "w") as so:
        proc = subprocess.Popen([sys.executable, "-m", "diag", "run", "embedded:postgres", "-w", "point-select",
                                 "-c", "1", "-T", str(STEP_S), "--out", str(out)], stdout=so, stderr=err,
                                cwd=str(ROOT))
        try:
            _wait_step_started(out / "events.jsonl", proc, seen, 150)
            assert _fill(small_tmpfs) > 0
            filled = time.monotonic()
            while proc.poll() is None and time.monotonic() - filled < 90:
                _note_tree(proc.pid, seen)
                time.sleep(0.2)
            stopped_after = time.monotonic() - filled
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    stderr = err_path.read_text()
    assert proc.returncode == 2, (proc.returncode, stderr[-3000:])
    assert "Traceback" not in stderr, stderr[-3000:]
    errors = [ln for ln in stderr.splitlines() if ln.startswith("dbdiag: error") or "Error" in ln
              or "could not" in ln]
    assert len(errors) == 1, stderr[-3000:]
    assert errors[0].startswith("dbdiag: error: the disk under ") and "No space left on device" in errors[0], errors
    assert "dbdiag report" in errors[0]
    # Stopped, not run to the end of the step (which was still STEP_S s away when the disk filled).
    assert stopped_after < STEP_S, stopped_after

    # Nothing of the run is left: clients, collectors, the throwaway server and its directory.
    deadline = time.monotonic() + 10
    while _alive(seen) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert seen and not _alive(seen), _alive(seen)
    run = json.loads((out / "run.json").read_text())
    data_dirs = [t["data_directory"] for t in run["targets"] if t.get("data_directory")]
    assert data_dirs and not any(Path(d).exists() for d in data_dirs), data_dirs

    # Rendering on the full disk says so in one line; a copy elsewhere, or the bundle once space is freed, renders.
    r = _dbdiag("report", str(out))
    assert r.returncode == 2 and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    assert r.stderr.count("\n") == 1 and "No space left on device" in r.stderr, r.stderr
    # (the command's success is render_bundle and a print, diag/commands/report.py: in this process from here)
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    assert render_bundle(copy).stat().st_size > 0
    b = load_bundle(copy)
    assert b.partial
    assert any(len(v) > 0 for k, v in b.series.items() if k.startswith("host")), sorted(b.series)
    (small_tmpfs / "ballast").unlink()
    assert render_bundle(out).exists() and (out / "report.html").exists()


class _Ticker(Collector):
    """A collector with nothing to read: it only writes, fast, so a failing write shows at once."""

    name = "ticker"
    per_target = False
    interval_s = 0.02

    def probe(self) -> Probe:
        return Probe(True)

    def sample(self) -> dict[str, Any]:
        return {"n": 1}


def test_collector_process_that_cannot_write_exits_and_tells_the_run(tmp_path: Path) -> None:
    bundle = BundleWriter(tmp_path / "b")
    # Every write to /dev/full fails with ENOSPC: the collector's series and the events both.
    (bundle.path / "series" / "ticker.jsonl").symlink_to("/dev/full")
    ctx = CollectorContext(target=parse_target("postgresql://postgres@127.0.0.1/postgres"),
                           artifacts=bundle.path / "artifacts")
    runner = CollectorRunner(bundle, [_Ticker(ctx)])
    runner.start()
    proc = runner.running[0].process
    proc.join(30)  # it must end by itself: no retrying a write the disk refuses
    assert proc.exitcode == 90, proc.exitcode
    err = runner.failure()
    assert err is not None and "series/ticker.jsonl" in str(err) and "full" in str(err), err
    # The run is told at its next append, once.
    own = bundle.series("workload--x")
    with pytest.raises(BundleWriteError, match="is full"):
        own.write({"t": 1})
    own.write({"t": 2})  # already reported: the run's last writes still try
    runner.stop()        # and stop does not raise it a second time
    own.close()
    assert [r["t"] for r in read_jsonl(bundle.path / "series" / "workload--x.jsonl")] == [2]


def test_orchestrator_writes_name_the_file(tmp_path: Path) -> None:
    bundle = BundleWriter(tmp_path / "b")
    bundle.write_json("results.json", {"results": [1]})
    (bundle.path / "events.jsonl").symlink_to("/dev/full")
    with pytest.raises(BundleWriteError) as e:
        bundle.event("x", "y")
    assert "writing events.jsonl" in str(e.value) and "No space left on device" in str(e.value)
    assert e.value.exit_status == 90 and bundle.failure is e.value
    assert BundleWriteError.from_exit_status(0, bundle.path, "x") is None
    assert json.loads((bundle.path / "results.json").read_text()) == {"results": [1]}
