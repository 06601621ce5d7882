"""collectors.fsync_test: real short runs on this machine's disk and on tmpfs."""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors import fsync_test as ft
from collectors.diskstats import DeviceInfo, device_for_path, read_diskstats
from diag.core.errors import DiagError

SECONDS = 0.2


@pytest.fixture
def disk_dir() -> Iterator[Path]:
    """A fresh directory on the machine's disk (/var/tmp is on a block device here, unlike /dev/shm)."""
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="dbdiag-test-") as d:
        yield Path(d)


@pytest.fixture(scope="module")
def disk_result() -> Iterator[ft.FsyncTestResult]:
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="dbdiag-test-") as d:
        result = ft.run_fsync_test(Path(d), seconds_per_test=SECONDS)
        assert os.listdir(d) == [], "the test file must be removed"
        yield result


def test_every_supported_test_measured_something(disk_result: ft.FsyncTestResult) -> None:
    methods = {(t.group, t.method) for t in disk_result.tests}
    for group in (ft.GROUP_ONE, ft.GROUP_TWO):
        for m in ("open_datasync", "open_datasync_direct", "fdatasync", "fsync", "fsync_writethrough", "open_sync"):
            assert (group, m) in methods
    assert (ft.GROUP_SIZES, "open_sync_1x16kB") in methods and (ft.GROUP_SIZES, "open_sync_2x8kB") in methods
    for t in disk_result.tests:
        if not t.supported:
            assert t.reason
            continue
        assert t.ops >= 1
        assert t.ops_per_s is not None and t.ops_per_s > 0
        assert t.us_per_op is not None and t.us_per_op > 0
        assert t.ops_per_s * t.us_per_op == pytest.approx(1e6, rel=1e-9)
        assert t.seconds >= SECONDS
        assert t.seconds < SECONDS + 5  # stops soon after its time is up


def test_fsync_writethrough_is_not_available_on_linux(disk_result: ft.FsyncTestResult) -> None:
    t = disk_result.get(ft.GROUP_ONE, "fsync_writethrough")
    assert t is not None and not t.supported and "F_FULLFSYNC" in t.reason


def test_device_info_and_flushes_reach_the_device(disk_result: ft.FsyncTestResult) -> None:
    dev = disk_result.device
    assert dev.name is not None, dev.reason
    assert dev.fs_type and dev.write_cache in ("write back", "write through")
    assert isinstance(dev.rotational, bool)
    counters_here = all(read_diskstats()[d].flushes_completed is not None for d in dev.stat_devices)
    assert disk_result.flush_counters == counters_here
    if counters_here:
        fd = disk_result.get(ft.GROUP_ONE, "fdatasync")
        assert fd is not None and fd.device_flushes is not None
        if dev.write_cache == "write back":
            # On this VM each fdatasync reaches the device as a flush request.
            assert fd.device_flushes_per_op is not None and fd.device_flushes_per_op >= 0.5
        for t in disk_result.tests:
            if t.supported:
                assert t.device_flushes is not None and t.device_flushes_per_op == t.device_flushes / t.ops


def test_best_flush_capability_is_fdatasync_one_write(disk_result: ft.FsyncTestResult) -> None:
    fd = disk_result.get(ft.GROUP_ONE, "fdatasync")
    assert fd is not None
    assert ft.best_flush_capability(disk_result) == fd.ops_per_s


def test_json_round_trip(disk_result: ft.FsyncTestResult) -> None:
    d = json.loads(json.dumps(disk_result.to_dict()))
    assert d["best_flush_capability_ops_per_s"] == ft.best_flush_capability(disk_result)
    assert d["device"]["name"] == disk_result.device.name
    assert ft.FsyncTestResult.from_dict(d) == disk_result


def test_format_table(disk_result: ft.FsyncTestResult) -> None:
    text = ft.format_table(disk_result)
    assert "Compare file sync methods using one 8kB write:" in text
    assert "Compare file sync methods using two 8kB writes:" in text
    assert " 1 * 16kB open_sync write" in text and " 2 *  8kB open_sync writes" in text
    assert "ops/sec" in text and "usecs/op" in text and "n/a" in text
    assert disk_result.device.name in text  # type: ignore[operator]
    if disk_result.flush_counters:
        assert "device flushes/op" in text


def test_tmpfs_run_has_no_device_flushes() -> None:
    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="dbdiag-test-") as d:
        r = ft.run_fsync_test(Path(d), seconds_per_test=0.05)
        assert os.listdir(d) == []
    assert r.device.name is None and r.device.fs_type == "tmpfs"
    assert not r.flush_counters
    assert all(t.device_flushes is None for t in r.tests)
    assert any("tmpfs" in n for n in r.notes)
    assert "no block device" in ft.format_table(r)


def test_o_direct_refused_gives_unsupported_entry(disk_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Simulate a filesystem that refuses O_DIRECT at open (tmpfs before Linux 6.6, ext4 data=journal).
    real_open = os.open

    def open_no_direct(path, flags, *args, **kw):  # type: ignore[no-untyped-def]
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", open_no_direct)
    r = ft.run_fsync_test(disk_dir, seconds_per_test=0.02)
    for group in (ft.GROUP_ONE, ft.GROUP_TWO):
        t = r.get(group, "open_datasync_direct")
        assert t is not None and not t.supported
        assert "O_DIRECT" in t.reason and "EINVAL" in t.reason
    assert r.get(ft.GROUP_ONE, "open_datasync").supported  # type: ignore[union-attr]
    assert any("open_datasync (O_DIRECT)" in n for n in r.notes)
    assert os.listdir(disk_dir) == []


def test_file_removed_on_keyboard_interrupt(disk_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fdatasync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ft.run_fsync_test(disk_dir, seconds_per_test=0.02)
    assert os.listdir(disk_dir) == []


def test_io_error_is_one_diag_error_and_file_removed(disk_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def eio(fd: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "fdatasync", eio)
    with pytest.raises(DiagError) as ei:
        ft.run_fsync_test(disk_dir, seconds_per_test=0.02)
    assert "fdatasync failed" in str(ei.value) and "\n" not in str(ei.value)
    assert os.listdir(disk_dir) == []


def test_unwritable_directory_is_one_clear_error() -> None:
    # /proc refuses new files even for root.
    with pytest.raises(DiagError) as ei:
        ft.run_fsync_test(Path("/proc"), seconds_per_test=0.02)
    msg = str(ei.value)
    assert msg.startswith("fsync test: cannot create a file in /proc") and "writable directory" in msg


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(DiagError, match="not a directory"):
        ft.run_fsync_test(tmp_path / "missing", seconds_per_test=0.02)
    with pytest.raises(DiagError, match="positive"):
        ft.run_fsync_test(tmp_path, seconds_per_test=0)


def test_notes_catch_flushes_that_do_not_reach_a_write_back_device() -> None:
    dev = DeviceInfo(path="/data", name="sda", fs_type="ext4", mount_options=("rw", "nobarrier"),
                     stat_devices=("sda",), write_cache="write back", rotational=True)
    tests = (ft.FsyncMethodResult(ft.GROUP_ONE, "fdatasync", "fdatasync", True, ops=2000, seconds=2.0,
                                  ops_per_s=1000.0, us_per_op=1000.0, device_flushes=200,
                                  device_flushes_per_op=0.1),)
    r = ft.FsyncTestResult(directory="/data", seconds_per_test=2.0, device=dev, tests=tests, flush_counters=True)
    notes = ft._notes(r)
    assert any("0.10 device flushes per fdatasync" in n and "nobarrier" in n for n in notes)
    assert any("spinning disk" in n for n in notes)
    assert ft.best_flush_capability(r) == 1000.0


def test_best_flush_capability_needs_the_fdatasync_test() -> None:
    dev = device_for_path("/var/tmp")
    r = ft.FsyncTestResult(directory="/var/tmp", seconds_per_test=1.0, device=dev, tests=(), flush_counters=False)
    with pytest.raises(DiagError, match="no flush capability"):
        ft.best_flush_capability(r)
    assert r.to_dict()["best_flush_capability_ops_per_s"] is None
