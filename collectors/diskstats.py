"""Block-device counters from /proc/diskstats, and the device, filesystem and cache behind a path.

Linux only. Reads /proc/diskstats, /proc/self/mountinfo and /sys/dev/block;
needs no privileges. ``proc_root`` / ``sys_root`` let tests feed saved trees.

/proc/diskstats columns (Documentation/admin-guide/iostats.rst): major, minor,
name, then the kernel's "Field 1..17":

====== ===================================== ==============
Field  meaning                               since kernel
====== ===================================== ==============
1-4    reads completed, merged, sectors, ms  always
5-8    writes completed, merged, sectors, ms always
9      I/Os currently in flight              always
10-11  ms doing I/O, weighted ms doing I/O   always
12-15  discards completed, merged, sectors,  4.18
       ms
16-17  flush requests completed, ms flushing 5.5
====== ===================================== ==============

So a line has 14 columns before 4.18, 18 on 4.18-5.4 and 20 from 5.5; the
fields a kernel lacks are ``None`` here, never 0, so "no counter" and "no
flushes" stay different things. Sectors are always 512 bytes in this file,
whatever the device's sector size.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from diag.core.errors import DiagError, ParseError

SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte units regardless of the device

# Filesystems that never sit on a local block device; the value is why, for the report.
_NO_BLOCK_DEVICE_REASONS = {
    "tmpfs": "tmpfs keeps files in memory: there is no block device, fsync never reaches a disk",
    "ramfs": "ramfs keeps files in memory: there is no block device, fsync never reaches a disk",
    "devtmpfs": "devtmpfs keeps files in memory: there is no block device",
    "overlay": "overlay filesystem: its upper directory was not found on a block device",
    "nfs": "network filesystem (nfs): flushes go to the file server, not to a local device",
    "nfs4": "network filesystem (nfs4): flushes go to the file server, not to a local device",
    "cifs": "network filesystem (cifs): flushes go to the file server, not to a local device",
    "smb3": "network filesystem (smb3): flushes go to the file server, not to a local device",
    "9p": "9p filesystem (host share): flushes go to the host, not to a local device",
    "virtiofs": "virtiofs (host share): flushes go to the host, not to a local device",
    "ceph": "network filesystem (ceph): flushes go to the cluster, not to a local device",
}


@dataclass(frozen=True)
class DiskStats:
    """One /proc/diskstats line. Counters are cumulative since boot (they wrap only on overflow).

    Times are milliseconds, sectors are 512-byte units. Fields the running kernel
    does not report (discards before 4.18, flushes before 5.5) are ``None``.
    """

    major: int
    minor: int
    name: str
    reads_completed: int
    reads_merged: int
    sectors_read: int
    read_time_ms: int
    writes_completed: int
    writes_merged: int
    sectors_written: int
    write_time_ms: int
    in_flight: int  # a gauge, not a counter
    io_time_ms: int
    weighted_io_time_ms: int
    discards_completed: int | None = None
    discards_merged: int | None = None
    sectors_discarded: int | None = None
    discard_time_ms: int | None = None
    flushes_completed: int | None = None
    flush_time_ms: int | None = None

    @property
    def bytes_written(self) -> int:
        """Bytes written (sectors are always 512 bytes in /proc/diskstats)."""
        return self.sectors_written * SECTOR_BYTES

    @property
    def bytes_read(self) -> int:
        """Bytes read."""
        return self.sectors_read * SECTOR_BYTES


_BASE_FIELDS = 11
_WITH_DISCARDS = 15
_WITH_FLUSHES = 17


def parse_diskstats(text: str, source: str = "/proc/diskstats", skip: tuple[str, ...] = ()) -> dict[str, DiskStats]:
    """Parse the text of /proc/diskstats into ``{device name: DiskStats}``.

    Accepts the 14-, 18- and 20-column layouts (and longer ones from future
    kernels, whose extra columns are ignored). Raises :class:`ParseError`
    naming the line for anything else. Devices whose name starts with one of ``skip`` are left out unread
    (the host collector's once a second: loop and ram devices, most lines on a machine with snaps).
    """
    out: dict[str, DiskStats] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts or (skip and len(parts) > 2 and parts[2].startswith(skip)):
            continue
        where = f"{source} line {lineno}"
        n_stats = len(parts) - 3
        if n_stats < _BASE_FIELDS or _BASE_FIELDS < n_stats < _WITH_DISCARDS or (
                _WITH_DISCARDS < n_stats < _WITH_FLUSHES):
            raise ParseError(f"{where}: expected 14, 18 or 20 columns, got {len(parts)}: {line[:200]!r}")
        try:
            major, minor = int(parts[0]), int(parts[1])
            values = [int(v) for v in parts[3:3 + _WITH_FLUSHES]]
        except ValueError:
            raise ParseError(f"{where}: a counter is not an integer: {line[:200]!r}") from None
        if major < 0 or minor < 0 or any(v < 0 for v in values):
            raise ParseError(f"{where}: negative counter: {line[:200]!r}")
        padded: list[int | None] = list(values) + [None] * (_WITH_FLUSHES - len(values))
        name = parts[2]
        out[name] = DiskStats(major, minor, name, *padded)  # type: ignore[arg-type]
    return out


def read_diskstats(proc_root: Path = Path("/proc"), skip: tuple[str, ...] = ()) -> dict[str, DiskStats]:
    """Read ``proc_root``/diskstats (devices starting with one of ``skip`` left out). Raises :class:`DiagError`
    when the file is missing (not Linux)."""
    path = Path(proc_root) / "diskstats"
    try:
        text = path.read_text()
    except OSError as e:
        raise DiagError(f"cannot read {path}: {e.strerror} (block-device counters need Linux /proc)") from e
    return parse_diskstats(text, source=str(path), skip=skip)


def flush_count(stats: dict[str, DiskStats], devices: tuple[str, ...]) -> int | None:
    """Sum of flush requests completed on ``devices``; ``None`` when any lacks the counter.

    ``None`` also when ``devices`` is empty or one of them is absent, so a caller
    never mistakes "could not count" for "zero flushes".
    """
    if not devices:
        return None
    total = 0
    for name in devices:
        s = stats.get(name)
        if s is None or s.flushes_completed is None:
            return None
        total += s.flushes_completed
    return total


# --------------------------------------------------------------------------- mounts


@dataclass(frozen=True)
class MountInfo:
    """One /proc/self/mountinfo line (the fields this module needs)."""

    mount_id: int
    parent_id: int
    major: int
    minor: int
    root: str
    mount_point: str
    mount_options: tuple[str, ...]
    fs_type: str
    source: str
    super_options: tuple[str, ...]


def _unescape(field: str) -> str:
    # mountinfo writes space, tab, newline and backslash as \040 \011 \012 \134.
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str, source: str = "/proc/self/mountinfo") -> list[MountInfo]:
    """Parse mountinfo (proc(5)); lines keep their order, later mounts stack on earlier ones."""
    mounts: list[MountInfo] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        try:
            sep = parts.index("-", 6)  # optional fields end at a lone "-"
            maj, mnr = parts[2].split(":")
            mounts.append(MountInfo(
                mount_id=int(parts[0]), parent_id=int(parts[1]), major=int(maj), minor=int(mnr),
                root=_unescape(parts[3]), mount_point=_unescape(parts[4]),
                mount_options=tuple(parts[5].split(",")),
                fs_type=parts[sep + 1], source=_unescape(parts[sep + 2]),
                super_options=tuple(parts[sep + 3].split(",")) if len(parts) > sep + 3 else ()))
        except (ValueError, IndexError):
            raise ParseError(f"{source} line {lineno}: not a mountinfo line: {line[:200]!r}") from None
    return mounts


def mount_for_path(real_path: str, mounts: list[MountInfo], st_dev: int | None = None) -> MountInfo | None:
    """The mount holding ``real_path`` (already resolved): the longest mount-point prefix.

    Among mounts at the same point the last one wins (it is stacked on top); when
    ``st_dev`` is given, a mount whose device number matches it is preferred, which
    picks the right one where a namespace shows stale or shadowed entries.
    """
    best: MountInfo | None = None
    best_key: tuple[int, int, int] | None = None
    for index, m in enumerate(mounts):
        mp = m.mount_point.rstrip("/") or "/"
        if not (real_path == mp or mp == "/" or real_path.startswith(mp + "/")):
            continue
        dev_match = int(st_dev is not None and os.makedev(m.major, m.minor) == st_dev)
        key = (len(mp), dev_match, index)
        if best_key is None or key > best_key:
            best, best_key = m, key
    return best


# --------------------------------------------------------------------------- devices


@dataclass(frozen=True)
class DeviceInfo:
    """The block device and filesystem holding a path.

    ``name`` is the whole-disk kernel name ("vda", "nvme0n1", "sda", "dm-0"),
    ``partition`` the partition's name when the path is on one. ``stat_devices``
    are the whole disks whose /proc/diskstats lines count this path's I/O and
    flushes: the disk itself, or for device-mapper / md the physical disks under
    it (flushes are counted reliably only on request-based devices).
    ``write_cache`` is /sys/block/NAME/queue/write_cache: "write back" (volatile
    cache: the kernel sends flushes) or "write through" (the device says it has
    none: the kernel sends no flushes). ``name`` is None with a ``reason`` when
    no block device holds the path (tmpfs, network filesystems...).
    """

    path: str
    name: str | None
    reason: str = ""
    fs_type: str | None = None
    mount_point: str | None = None
    mount_source: str | None = None
    mount_options: tuple[str, ...] = ()
    major: int | None = None
    minor: int | None = None
    partition: str | None = None
    dm_name: str | None = None
    stat_devices: tuple[str, ...] = ()
    write_cache: str | None = None
    rotational: bool | None = None

    @property
    def local_block_device(self) -> bool:
        """True when a local block device holds the path (so its flush counters mean something)."""
        return self.name is not None

    def to_dict(self) -> dict[str, object]:
        return {
            "path": self.path, "name": self.name, "reason": self.reason, "fs_type": self.fs_type,
            "mount_point": self.mount_point, "mount_source": self.mount_source,
            "mount_options": list(self.mount_options), "major": self.major, "minor": self.minor,
            "partition": self.partition, "dm_name": self.dm_name,
            "stat_devices": list(self.stat_devices), "write_cache": self.write_cache,
            "rotational": self.rotational,
        }

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> DeviceInfo:
        """Rebuild from :meth:`to_dict` output (for reports reading a run bundle)."""
        kw = dict(d)
        kw["mount_options"] = tuple(kw.get("mount_options") or ())  # type: ignore[arg-type]
        kw["stat_devices"] = tuple(kw.get("stat_devices") or ())  # type: ignore[arg-type]
        return cls(**kw)  # type: ignore[arg-type]


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


@dataclass(frozen=True)
class BlockDevice:
    """What /sys says about one block device number (see :func:`block_device`)."""

    major: int
    minor: int
    name: str
    partition: str | None
    dm_name: str | None
    stat_devices: tuple[str, ...]
    write_cache: str | None
    rotational: bool | None


def _disk_dir(dev_dir: Path) -> tuple[Path, str | None]:
    # A partition's sysfs directory sits inside its disk's and has a "partition" file.
    if (dev_dir / "partition").exists():
        return dev_dir.parent, dev_dir.name
    return dev_dir, None


def _leaf_disks(disk_dir: Path, sys_root: Path, seen: set[str]) -> list[str]:
    """Whole disks at the bottom of a device-mapper / md stack (the disk itself when none)."""
    if disk_dir.name in seen:
        return []
    seen.add(disk_dir.name)
    slaves_dir = disk_dir / "slaves"
    try:
        slaves = sorted(os.listdir(slaves_dir))
    except OSError:
        slaves = []
    if not slaves:
        return [disk_dir.name]
    leaves: list[str] = []
    for slave in slaves:
        target = (slaves_dir / slave).resolve()
        if not target.exists():
            target = (sys_root / "class" / "block" / slave).resolve()
        sub_disk, _ = _disk_dir(target)
        for leaf in _leaf_disks(sub_disk, sys_root, seen):
            if leaf not in leaves:
                leaves.append(leaf)
    return leaves


def block_device(major: int, minor: int, sys_root: Path = Path("/sys")) -> BlockDevice | None:
    """Resolve a device number through ``sys_root``/dev/block/MAJ:MIN; ``None`` when sysfs has no entry.

    Walks up from a partition to its whole disk (queue/ settings live on the disk)
    and down from device-mapper / md to the physical disks under it.
    """
    link = Path(sys_root) / "dev" / "block" / f"{major}:{minor}"
    if not link.exists():
        return None
    dev_dir = link.resolve()
    disk_dir, partition = _disk_dir(dev_dir)
    cache = _read(disk_dir / "queue" / "write_cache")
    rot = _read(disk_dir / "queue" / "rotational")
    return BlockDevice(
        major=major, minor=minor, name=disk_dir.name, partition=partition,
        dm_name=_read(disk_dir / "dm" / "name"),
        stat_devices=tuple(_leaf_disks(disk_dir, Path(sys_root), set())),
        write_cache=cache,
        rotational=None if rot not in ("0", "1") else rot == "1",
    )


def _overlay_upperdir(m: MountInfo) -> str | None:
    for opt in m.super_options:
        if opt.startswith("upperdir="):
            return opt.split("=", 1)[1]
    return None


def device_for_path(path: Path | str, sys_root: Path = Path("/sys"),
                    proc_root: Path = Path("/proc"), _depth: int = 0) -> DeviceInfo:
    """The block device, filesystem type and cache mode holding ``path``.

    st_dev of the path -> /sys/dev/block/MAJ:MIN -> whole disk. Filesystems with an
    anonymous device number (major 0: tmpfs, overlay, btrfs, NFS...) are resolved
    through the mount's source when that is a block device node (btrfs), through
    the upper directory for overlay, and otherwise answered with ``name=None``
    and a ``reason``. Raises :class:`DiagError` when the path cannot be stat'ed.
    """
    p = str(path)
    try:
        st = os.stat(p)
    except OSError as e:
        raise DiagError(f"cannot find the device of {p}: {e.strerror}") from e
    real = os.path.realpath(p)
    mi_path = Path(proc_root) / "self" / "mountinfo"
    try:
        mounts = parse_mountinfo(mi_path.read_text(), source=str(mi_path))
    except OSError:
        mounts = []
    mount = mount_for_path(real, mounts, st.st_dev)
    base = dict(path=p, fs_type=mount.fs_type if mount else None,
                mount_point=mount.mount_point if mount else None,
                mount_source=mount.source if mount else None,
                mount_options=tuple(dict.fromkeys(mount.mount_options + mount.super_options))
                if mount else ())
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    if major == 0:
        # Anonymous device numbers: find a real block device another way, if there is one.
        if mount is not None and mount.source.startswith("/dev/"):
            try:
                src = os.stat(mount.source)
            except OSError:
                src = None
            if src is not None and stat.S_ISBLK(src.st_mode):
                major, minor = os.major(src.st_rdev), os.minor(src.st_rdev)
        if major == 0 and mount is not None and mount.fs_type == "overlay" and _depth < 4:
            upper = _overlay_upperdir(mount)
            if upper and os.path.exists(upper):
                inner = device_for_path(upper, sys_root, proc_root, _depth + 1)
                if inner.name is not None:
                    return replace(inner, **base)  # type: ignore[arg-type]
        if major == 0:
            fs = mount.fs_type if mount else "unknown"
            reason = _NO_BLOCK_DEVICE_REASONS.get(fs) or (
                f"fuse filesystem ({fs}): flushes go to a user-space process, not to a local device"
                if fs.startswith("fuse") else
                f"{fs} filesystem has no block device (device number 0:{minor})")
            return DeviceInfo(name=None, reason=reason, major=0, minor=minor, **base)  # type: ignore[arg-type]
    dev = block_device(major, minor, Path(sys_root))
    if dev is None:
        return DeviceInfo(name=None, major=major, minor=minor,
                          reason=f"no {Path(sys_root) / 'dev' / 'block'}/{major}:{minor} in sysfs",
                          **base)  # type: ignore[arg-type]
    return DeviceInfo(name=dev.name, major=major, minor=minor, partition=dev.partition,
                      dm_name=dev.dm_name, stat_devices=dev.stat_devices,
                      write_cache=dev.write_cache, rotational=dev.rotational,
                      **base)  # type: ignore[arg-type]
