"""collectors.flush.FlushCollector lifecycle against a stand-in ``perf`` script (its error paths need one).

The stand-in prints what perf 6.1 prints (see tests/data/flush): interval lines
on stderr until SIGINT, then the last partial interval; or perf's failures. The
real perf is exercised in tests/integration/test_durability_probe.py.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from collectors import flush as fl
from collectors.base import CollectorContext
from diag.core.engines import MYSQL, POSTGRES
from diag.core.errors import DiagError, ToolUnavailable
from diag.core.targets import parse_target

FAKE_PERF = r'''#!PYTHON
import os, signal, sys, time
args = sys.argv[1:]
if "--" in args:  # the probe: "perf stat -e ... -p PID -- sleep 0.1"
    sys.exit(0)
state = os.environ["FAKE_PERF_STATE"]
n = int(open(state).read()) if os.path.exists(state) else 0
open(state, "w").write(str(n + 1))
mode = os.environ.get("FAKE_PERF_MODE", "race")
if mode == "race" and n == 0 or mode == "always-race":
    sys.stderr.write("Problems finding threads of monitor\n\n Usage: perf stat [<options>] [<command>]\n")
    sys.exit(234)
if mode == "denied":
    sys.stderr.write("event syntax error: 'syscalls:sys_enter_fsync'\n   \\___ can't access trace events\n")
    sys.exit(129)
events = args[args.index("-e") + 1].split(",")
stop = []
signal.signal(signal.SIGINT, lambda *a: stop.append(1))
t = 0.0
while not stop:
    time.sleep(0.1)
    if stop:
        break
    t += 0.1
    for e in events:
        sys.stderr.write(f"{t:14.9f},7,,{e},100000000,100.00,,\n")
    sys.stderr.flush()
for e in events:
    sys.stderr.write(f"{t + 0.05:14.9f},1,,{e},50000000,100.00,,\n")
'''


@pytest.fixture
def fake_perf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    exe = tmp_path / "perf"
    exe.write_text(FAKE_PERF.replace("PYTHON", sys.executable))
    exe.chmod(0o755)
    monkeypatch.setenv("FAKE_PERF_STATE", str(tmp_path / "state"))
    return exe


def collector(perf: Path, data_dir: Path) -> fl.FlushCollector:
    ctx = CollectorContext(target=parse_target("postgresql://postgres@127.0.0.1:5432/postgres"),
                           artifacts=data_dir, server_pid=os.getpid(), data_dir=str(data_dir),
                           options={"perf": str(perf), "flush_interval_s": 0.1})
    return fl.FlushCollector(ctx)


def run_briefly(c: fl.FlushCollector, seconds: float = 0.6) -> list[dict]:
    c.start()
    time.sleep(seconds)
    recs = c.sample() or []
    return recs + (c.stop() or [])


def test_records_are_cumulative_from_a_zero_baseline(fake_perf: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_PERF_MODE", "ok")
    c = collector(fake_perf, tmp_path)
    p = c.probe()
    assert p.ok, p
    assert "syscalls:sys_enter_fsync" in p.reason
    recs = run_briefly(c)
    assert recs[0]["syscalls.fsync"] == 0 and "perf_t" not in recs[0]  # the baseline
    body = recs[1:]
    assert len(body) >= 3
    assert [r["syscalls.fdatasync"] for r in body[:-1]] == [7 * (i + 1) for i in range(len(body) - 1)]
    assert body[-1]["syscalls.fdatasync"] == body[-2]["syscalls.fdatasync"] + 1  # SIGINT's partial interval
    assert all(r["t"] >= recs[0]["t"] for r in body)
    assert all("sources" in r for r in recs)
    dev = [k for k in recs[0] if k.startswith("device.")]
    if dev:  # tmp_path on a block device with flush counters (true on this machine's ext4)
        assert all(isinstance(r[dev[0]], int) for r in recs)
    if "fs.sync_file" in recs[0]:
        assert body[0]["fs.sync_file"] == 7


def test_a_backend_exiting_before_attach_is_retried(fake_perf: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_PERF_MODE", "race")
    c = collector(fake_perf, tmp_path)
    assert c.probe().ok
    recs = run_briefly(c, 0.4)
    assert (tmp_path / "state").read_text() == "2"  # failed once, listed the processes again
    assert recs[-1]["syscalls.fdatasync"] > 0


def test_perf_that_keeps_failing_gives_one_clear_error(fake_perf: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_PERF_MODE", "always-race")
    # The stand-in perf is a Python script: on a loaded 2-vCPU machine it can take longer than the 0.3 s
    # start check just to reach its exit, and would then count as started. This test is about the retries.
    monkeypatch.setattr(fl, "START_CHECK_S", 5.0)
    c = collector(fake_perf, tmp_path)
    assert c.probe().ok
    with pytest.raises(ToolUnavailable, match=f"failed {fl.START_RETRIES} times"):
        c.start()
    monkeypatch.setenv("FAKE_PERF_MODE", "denied")
    with pytest.raises(ToolUnavailable, match="may not read the tracepoints"):
        c.start()


def test_perf_dying_mid_run_switches_the_collector_off(fake_perf: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_PERF_MODE", "ok")
    c = collector(fake_perf, tmp_path)
    assert c.probe().ok
    c.start()
    assert c._proc is not None
    c._proc.kill()
    c._proc.wait()
    time.sleep(0.2)
    c.sample()  # what arrived before the kill
    with pytest.raises(DiagError, match="perf stat stopped"):
        c.sample()
    c.stop()


def test_probe_without_perf_or_for_a_remote_server(tmp_path: Path) -> None:
    c = collector(tmp_path / "no-such-perf", tmp_path)
    p = c.probe()
    assert not p.ok and "perf not found" in p.reason and p.hint
    remote = fl.FlushCollector(CollectorContext(target=parse_target("mysql://root@db.example.com:3306/"),
                                                artifacts=tmp_path, server_pid=os.getpid()))
    p = remote.probe()
    assert not p.ok and "not on this machine" in p.reason and p.hint == fl.REMOTE_HINT
    gone = fl.FlushCollector(CollectorContext(target=parse_target("embedded:postgres"), artifacts=tmp_path,
                                              server_pid=2**22 + 12345))
    assert "not running" in gone.probe().reason


def test_flush_paths_add_a_symlinked_pg_wal_on_another_filesystem(tmp_path: Path) -> None:
    (tmp_path / "pg_wal").mkdir()
    assert fl.flush_paths(POSTGRES, str(tmp_path)) == [tmp_path]
    assert fl.flush_paths(MYSQL, str(tmp_path)) == [tmp_path]
    other = tmp_path / "d2"
    other.mkdir()
    (other / "pg_wal").symlink_to("/dev/shm")  # tmpfs: another filesystem
    assert fl.flush_paths(POSTGRES, str(other)) == [other, Path("/dev/shm")]


def test_device_counters_from_a_saved_diskstats() -> None:
    proc = Path(__file__).resolve().parents[1] / "data" / "proc"
    names = list(fl.read_diskstats(proc))[:1]
    got = fl.device_counters(names, proc)
    assert set(got) == {f"device.{names[0]}.flushes", f"device.{names[0]}.flush_ms"}
    assert fl.device_counters(["nosuchdev"], proc) == {"device.nosuchdev.flushes": None,
                                                       "device.nosuchdev.flush_ms": None}
