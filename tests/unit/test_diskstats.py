"""collectors.diskstats on a saved /proc/diskstats from this machine, synthetic layouts, and real paths."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.diskstats import (
    DeviceInfo,
    block_device,
    device_for_path,
    flush_count,
    mount_for_path,
    parse_diskstats,
    parse_mountinfo,
    read_diskstats,
)
from diag.core.errors import DiagError, ParseError

DATA = Path(__file__).resolve().parents[1] / "data" / "proc"

# Linux before 4.18: 3 + 11 columns, no discard or flush fields.
OLD_KERNEL_LINE = "   8       0 sda 1000 20 30000 400 500 60 7000 800 0 900 1200\n"
# Linux 4.18-5.4: discards but no flushes.
MID_KERNEL_LINE = "   8      16 sdb 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n"


def test_saved_diskstats_from_this_machine() -> None:
    stats = read_diskstats(DATA)
    vda = stats["vda"]
    assert (vda.major, vda.minor) == (254, 0)
    assert vda.reads_completed == 68701
    assert vda.sectors_written == 4457288
    assert vda.bytes_written == 4457288 * 512
    assert vda.in_flight == 0
    assert vda.discards_completed == 10918
    assert vda.discard_time_ms == 709
    assert vda.flushes_completed == 65987
    assert vda.flush_time_ms == 2591
    # An idle loop device reports a true zero, which must not read as "no counter".
    assert stats["loop0"].flushes_completed == 0
    assert set(stats) >= {"loop0", "vda", "zram0"}


def test_skipped_devices_are_left_out_unread() -> None:
    """The host collector skips loop and ram devices before parsing them (a malformed one costs nothing either)."""
    whole = read_diskstats(DATA)
    kept = read_diskstats(DATA, skip=("loop", "ram"))
    assert set(kept) == {d for d in whole if not d.startswith(("loop", "ram"))} and "vda" in kept
    assert kept["vda"] == whole["vda"]
    assert set(parse_diskstats("   7 0 loop0 not numbers\n" + OLD_KERNEL_LINE, skip=("loop",))) == {"sda"}


def test_old_kernel_line_has_no_flush_or_discard_fields() -> None:
    s = parse_diskstats(OLD_KERNEL_LINE)["sda"]
    assert s.writes_completed == 500 and s.weighted_io_time_ms == 1200
    assert s.discards_completed is None and s.discard_time_ms is None
    assert s.flushes_completed is None and s.flush_time_ms is None


def test_mid_kernel_line_has_discards_but_no_flushes() -> None:
    s = parse_diskstats(MID_KERNEL_LINE)["sdb"]
    assert s.discards_completed == 12 and s.discard_time_ms == 15
    assert s.flushes_completed is None


def test_future_kernel_extra_columns_are_ignored() -> None:
    line = "8 0 sda " + " ".join(str(i) for i in range(1, 21)) + "\n"
    s = parse_diskstats(line)["sda"]
    assert s.flushes_completed == 16 and s.flush_time_ms == 17


@pytest.mark.parametrize("line, words", [
    ("8 0 sda 1 2 3\n", "columns"),
    ("8 0 sda " + " ".join(["1"] * 13) + "\n", "columns"),  # 16 columns: no kernel writes that
    ("8 0 sda " + " ".join(["1"] * 16) + "\n", "columns"),  # 19 columns
    ("8 0 sda 1 2 x 4 5 6 7 8 9 10 11\n", "not an integer"),
    ("8 0 sda 1 2 -3 4 5 6 7 8 9 10 11\n", "negative"),
])
def test_malformed_lines_raise_parse_error_naming_the_line(line: str, words: str) -> None:
    with pytest.raises(ParseError) as ei:
        parse_diskstats("   7 0 loop0 " + " ".join(["0"] * 17) + "\n" + line)
    assert "line 2" in str(ei.value) and words in str(ei.value)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789 -\nabsdx\t")), max_size=300))
def test_any_text_parses_or_gives_parse_error(text: str) -> None:
    try:
        out = parse_diskstats(text)
    except ParseError as e:
        assert "line" in str(e)
    else:
        assert all(s.name == name for name, s in out.items())


def test_flush_count_sums_and_refuses_to_guess() -> None:
    stats = parse_diskstats(
        "8 0 sda " + " ".join(["0"] * 15) + " 7 1\n"
        "8 16 sdb " + " ".join(["0"] * 15) + " 5 1\n" + OLD_KERNEL_LINE.replace("sda", "sdc"))
    assert flush_count(stats, ("sda", "sdb")) == 12
    assert flush_count(stats, ("sda",)) == 7
    assert flush_count(stats, ()) is None
    assert flush_count(stats, ("sda", "nvme0n1")) is None  # absent device
    assert flush_count(stats, ("sda", "sdc")) is None  # a kernel without the counter


def test_read_diskstats_without_proc_is_a_diag_error(tmp_path: Path) -> None:
    with pytest.raises(DiagError, match="cannot read"):
        read_diskstats(tmp_path)


# --------------------------------------------------------------------------- mounts


def test_saved_mountinfo_and_longest_prefix() -> None:
    mounts = parse_mountinfo((DATA / "self" / "mountinfo").read_text())
    root = mount_for_path("/work/main", mounts)
    assert root is not None and root.mount_point == "/" and root.fs_type == "ext4"
    assert root.source == "/dev/vda" and (root.major, root.minor) == (254, 0)
    shm = mount_for_path("/dev/shm/x", mounts)
    # /dev/shm is mounted twice; the later mount is on top.
    assert shm is not None and shm.fs_type == "tmpfs" and shm.mount_id == 30
    assert mount_for_path("/dev/pts", mounts).fs_type == "devpts"  # type: ignore[union-attr]
    assert mount_for_path("/devices", mounts).mount_point == "/"  # type: ignore[union-attr]


def test_mountinfo_escapes_and_device_preference() -> None:
    text = ("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n"
            "2 1 8:17 / /mnt/my\\040disk rw shared:1 - xfs /dev/sdb1 rw,attr2\n"
            "3 1 0:50 / /mnt/my\\040disk rw - tmpfs tmpfs rw\n")
    mounts = parse_mountinfo(text)
    assert mounts[1].mount_point == "/mnt/my disk" and mounts[1].super_options == ("rw", "attr2")
    assert mount_for_path("/mnt/my disk/f", mounts).fs_type == "tmpfs"  # type: ignore[union-attr]
    m = mount_for_path("/mnt/my disk/f", mounts, st_dev=os.makedev(8, 17))
    assert m is not None and m.fs_type == "xfs"
    with pytest.raises(ParseError, match="line 1"):
        parse_mountinfo("garbage\n")


# --------------------------------------------------------------------------- devices on this machine


@pytest.mark.parametrize("path", ["/work", "/tmp"])
def test_device_for_real_paths_here(path: str) -> None:
    info = device_for_path(path)
    st_dev = os.stat(path).st_dev
    assert info.name is not None, info.reason
    assert info.local_block_device
    assert (Path("/sys/block") / info.name).exists()
    assert info.name in info.stat_devices or info.dm_name is not None
    assert info.fs_type in ("ext4", "xfs", "btrfs", "ext3", "ext2", "f2fs")
    if os.major(st_dev) != 0:
        assert (info.major, info.minor) == (os.major(st_dev), os.minor(st_dev))
    assert info.write_cache in ("write back", "write through")
    assert isinstance(info.rotational, bool)
    # the counters of the device this resolves to are the ones the fsync test reads
    assert all(d in read_diskstats() for d in info.stat_devices)
    assert DeviceInfo.from_dict(info.to_dict()) == info


def test_tmpfs_has_no_block_device() -> None:
    info = device_for_path("/dev/shm")
    assert info.fs_type == "tmpfs"
    assert info.name is None and not info.local_block_device
    assert "tmpfs" in info.reason and "no block device" in info.reason
    assert info.stat_devices == () and info.write_cache is None


def test_missing_path_is_a_diag_error(tmp_path: Path) -> None:
    with pytest.raises(DiagError, match="cannot find the device"):
        device_for_path(tmp_path / "nope")


# --------------------------------------------------------------------------- a saved-shape sysfs tree


def _disk(sys_root: Path, devpath: str, name: str, cache: str = "write back", rot: str = "0") -> Path:
    d = sys_root / "devices" / devpath / "block" / name
    (d / "queue").mkdir(parents=True)
    (d / "queue" / "write_cache").write_text(cache + "\n")
    (d / "queue" / "rotational").write_text(rot + "\n")
    (sys_root / "class" / "block").mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(d, sys_root / "class" / "block"), sys_root / "class" / "block" / name)
    return d


def _part(disk: Path, sys_root: Path, name: str) -> Path:
    p = disk / name
    p.mkdir()
    (p / "partition").write_text("1\n")
    os.symlink(os.path.relpath(p, sys_root / "class" / "block"), sys_root / "class" / "block" / name)
    return p


def _devno(sys_root: Path, major: int, minor: int, target: Path) -> None:
    (sys_root / "dev" / "block").mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(target, sys_root / "dev" / "block"), sys_root / "dev" / "block" / f"{major}:{minor}")


def test_sysfs_partition_walks_up_to_its_disk(tmp_path: Path) -> None:
    nvme = _disk(tmp_path, "pci0000:00/0000:00:04.0/nvme/nvme0", "nvme0n1", cache="write through")
    part = _part(nvme, tmp_path, "nvme0n1p2")
    _devno(tmp_path, 259, 2, part)
    dev = block_device(259, 2, tmp_path)
    assert dev is not None
    assert dev.name == "nvme0n1" and dev.partition == "nvme0n1p2"
    assert dev.write_cache == "write through" and dev.rotational is False
    assert dev.stat_devices == ("nvme0n1",)


def test_sysfs_device_mapper_counts_on_the_disks_below(tmp_path: Path) -> None:
    vda = _disk(tmp_path, "pci0000:00/0000:00:02.0/virtio1", "vda", rot="1")
    vda2 = _part(vda, tmp_path, "vda2")
    sdb = _disk(tmp_path, "pci0000:00/0000:00:05.0/host0", "sdb")
    dm = _disk(tmp_path, "virtual", "dm-0")
    (dm / "dm").mkdir()
    (dm / "dm" / "name").write_text("vg-data\n")
    (dm / "slaves").mkdir()
    os.symlink(os.path.relpath(vda2, dm / "slaves"), dm / "slaves" / "vda2")
    os.symlink(os.path.relpath(sdb, dm / "slaves"), dm / "slaves" / "sdb")
    _devno(tmp_path, 253, 0, dm)
    dev = block_device(253, 0, tmp_path)
    assert dev is not None
    assert dev.name == "dm-0" and dev.dm_name == "vg-data" and dev.partition is None
    assert dev.stat_devices == ("sdb", "vda")
    assert dev.write_cache == "write back"


def test_sysfs_without_the_device_number(tmp_path: Path) -> None:
    assert block_device(8, 0, tmp_path) is None
