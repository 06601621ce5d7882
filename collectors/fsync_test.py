"""How many durable writes per second the disk under a directory can do (like pg_test_fsync).

For each way a database can make a WAL/redo write durable, write 8 kB into a
test file and force it to stable storage, as many times as fit in
``seconds_per_test``; report ops/s, µs/op, and how many flush requests the
block device completed per op (from /proc/diskstats). That last number shows
whether the flushes really reach the device: a disk with a volatile write cache
("write back") must see about one flush per fdatasync, or a commit can sit in
its cache when the power goes.

Tests, as pg_test_fsync runs them:

* one 8 kB write, then: open_datasync (O_DSYNC), open_datasync with O_DIRECT,
  fdatasync, fsync, fsync_writethrough (n/a on Linux), open_sync (O_SYNC);
* the same with two 8 kB writes per op (a commit whose WAL spans two pages);
* 1 x 16 kB vs 2 x 8 kB open_sync writes (cost of one larger synchronous write
  against two smaller ones).

open_sync / open_datasync here are buffered (no O_DIRECT) because that is how
PostgreSQL opens WAL with those methods unless wal_level=minimal (PG < 16) or
debug_io_direct (PG >= 16); the O_DIRECT variant is reported separately.

Linux only; needs write access to the directory and nothing else. The test file
(about 1 MiB) is removed afterwards, also on error or Ctrl-C.
"""

from __future__ import annotations

import errno
import mmap
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from collectors.diskstats import DeviceInfo, device_for_path, flush_count, read_diskstats
from diag.core.errors import DiagError

WRITE_SIZE = 8192  # XLOG_BLCKSZ: PostgreSQL's WAL page; InnoDB redo writes are of this order too
PREFILL_BYTES = 1 << 20  # the tests overwrite allocated blocks, as a recycled WAL segment does

GROUP_ONE = "one_8kB_write"
GROUP_TWO = "two_8kB_writes"
GROUP_SIZES = "open_sync_sizes"

GROUP_TITLES = {
    GROUP_ONE: "Compare file sync methods using one 8kB write:",
    GROUP_TWO: "Compare file sync methods using two 8kB writes:",
    GROUP_SIZES: "Compare open_sync with different write sizes:",
}

# A single spinning disk completes at most one flush per revolution: 15,000 rpm = 250/s.
# More than that on a "rotational" device means a cache (battery-backed controller,
# virtual disk, or a device that does not really flush) answered the flushes.
ROTATIONAL_MAX_FLUSHES_PER_S = 250.0

# Below this many device flushes per fdatasync on a write-back device, the flushes
# are not reaching it: a working stack gives about 1 per call (more when the
# filesystem journal also commits; other processes' flushes only add to it).
MIN_DEVICE_FLUSHES_PER_FDATASYNC = 0.5


@dataclass(frozen=True)
class FsyncMethodResult:
    """One test: ``ops`` durable operations in ``seconds`` (each op = the group's writes + sync).

    ``device_flushes`` is the increase of the flush-requests-completed counter of the
    directory's device(s) during the test (device-wide: flushes by other processes
    count too); ``None`` when the kernel or device has no flush counter. When
    ``supported`` is False, ``reason`` says why (e.g. O_DIRECT refused by the filesystem).
    """

    group: str
    method: str
    label: str
    supported: bool
    reason: str = ""
    ops: int = 0
    seconds: float = 0.0
    ops_per_s: float | None = None
    us_per_op: float | None = None
    device_flushes: int | None = None
    device_flushes_per_op: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class FsyncTestResult:
    """All tests of one run, with the device and filesystem they ran on."""

    directory: str
    seconds_per_test: float
    device: DeviceInfo
    tests: tuple[FsyncMethodResult, ...]
    flush_counters: bool  # the device reported flush counters (kernel >= 5.5, block device)
    kernel: str = ""
    write_size: int = WRITE_SIZE
    notes: tuple[str, ...] = field(default=())

    def get(self, group: str, method: str) -> FsyncMethodResult | None:
        """The test ``method`` of ``group`` (see the GROUP_* constants), or None."""
        for t in self.tests:
            if t.group == group and t.method == method:
                return t
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; :meth:`from_dict` reads it back."""
        try:
            best: float | None = best_flush_capability(self)
        except DiagError:
            best = None
        return {
            "directory": self.directory,
            "seconds_per_test": self.seconds_per_test,
            "write_size": self.write_size,
            "kernel": self.kernel,
            "device": self.device.to_dict(),
            "flush_counters": self.flush_counters,
            "best_flush_capability_ops_per_s": best,
            "tests": [t.to_dict() for t in self.tests],
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FsyncTestResult:
        return cls(
            directory=d["directory"], seconds_per_test=d["seconds_per_test"],
            device=DeviceInfo.from_dict(d["device"]),
            tests=tuple(FsyncMethodResult(**t) for t in d["tests"]),
            flush_counters=d["flush_counters"], kernel=d.get("kernel", ""),
            write_size=d.get("write_size", WRITE_SIZE), notes=tuple(d.get("notes", ())))


def best_flush_capability(result: FsyncTestResult) -> float:
    """F: durable commits per second one client can get from this disk, in ops/s.

    It is the fdatasync test with one 8 kB write because that is what a commit
    does on Linux by default: PostgreSQL's wal_sync_method defaults to fdatasync
    there, and InnoDB (innodb_flush_method=fsync or O_DIRECT) writes the redo
    log and then calls fsync()/fdatasync(). One 8 kB write is the common small
    commit. The fastest method would overstate what the server actually gets.
    Raises :class:`DiagError` when that test is missing or could not run.
    """
    t = result.get(GROUP_ONE, "fdatasync")
    if t is None or not t.supported or t.ops_per_s is None:
        why = t.reason if t is not None and t.reason else "no fdatasync result"
        raise DiagError(f"fsync test in {result.directory} has no flush capability: {why}")
    return t.ops_per_s


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class _Spec:
    group: str
    method: str
    label: str
    flags: int  # extra open(2) flags
    writes: tuple[tuple[int, int], ...]  # (size, offset) per write in one op
    sync: Callable[[int], None] | None = None
    unsupported: str = ""  # not available on this platform at all


_ONE = ((WRITE_SIZE, 0),)
_TWO = ((WRITE_SIZE, 0), (WRITE_SIZE, WRITE_SIZE))
_O_DIRECT = getattr(os, "O_DIRECT", 0)
_O_DSYNC = getattr(os, "O_DSYNC", 0)
_WRITETHROUGH_NA = "Linux has no fsync_writethrough (it is F_FULLFSYNC on macOS, _commit() on Windows)"


def _specs() -> list[_Spec]:
    out: list[_Spec] = []
    for group, writes in ((GROUP_ONE, _ONE), (GROUP_TWO, _TWO)):
        out += [
            _Spec(group, "open_datasync", "open_datasync", _O_DSYNC, writes),
            _Spec(group, "open_datasync_direct", "open_datasync (O_DIRECT)", _O_DSYNC | _O_DIRECT, writes,
                  unsupported="" if _O_DIRECT else "this platform has no O_DIRECT"),
            _Spec(group, "fdatasync", "fdatasync", 0, writes, sync=os.fdatasync),
            _Spec(group, "fsync", "fsync", 0, writes, sync=os.fsync),
            _Spec(group, "fsync_writethrough", "fsync_writethrough", 0, writes, unsupported=_WRITETHROUGH_NA),
            _Spec(group, "open_sync", "open_sync", os.O_SYNC, writes),
        ]
    out += [
        _Spec(GROUP_SIZES, "open_sync_1x16kB", " 1 * 16kB open_sync write", os.O_SYNC, ((2 * WRITE_SIZE, 0),)),
        _Spec(GROUP_SIZES, "open_sync_2x8kB", " 2 *  8kB open_sync writes", os.O_SYNC, _TWO),
    ]
    return out


class _Flushes:
    """Reads the flush counter of the directory's device(s); None when unavailable."""

    def __init__(self, device: DeviceInfo, proc_root: Path) -> None:
        self.devices = device.stat_devices
        self.proc_root = proc_root

    def read(self) -> int | None:
        if not self.devices:
            return None
        try:
            return flush_count(read_diskstats(self.proc_root), self.devices)
        except DiagError:
            return None


def _run_one(spec: _Spec, path: Path, buf: mmap.mmap, seconds: float, flushes: _Flushes,
             fs_type: str | None) -> FsyncMethodResult:
    if spec.unsupported:
        return FsyncMethodResult(spec.group, spec.method, spec.label, supported=False, reason=spec.unsupported)
    direct = bool(spec.flags & _O_DIRECT) and _O_DIRECT != 0
    try:
        fd = os.open(path, os.O_RDWR | spec.flags)
    except OSError as e:
        if direct and e.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return FsyncMethodResult(spec.group, spec.method, spec.label, supported=False,
                                     reason=_direct_reason(fs_type, e))
        raise DiagError(f"fsync test: cannot open {path} for {spec.label}: {e.strerror}") from e
    # Slices of one page-aligned anonymous mapping: aligned for O_DIRECT, random
    # content so compressing or deduplicating storage cannot shortcut the writes.
    view = memoryview(buf)
    ops = 0
    try:
        before = flushes.read()
        start = time.perf_counter_ns()
        deadline = start + int(seconds * 1e9)
        while True:
            for size, offset in spec.writes:
                n = os.pwrite(fd, view[:size], offset)
                if n != size:
                    raise DiagError(f"fsync test: short write ({n} of {size} bytes) to {path}")
            if spec.sync is not None:
                spec.sync(fd)
            ops += 1
            end = time.perf_counter_ns()
            if end >= deadline:
                break
        after = flushes.read()
    except OSError as e:
        if direct and ops == 0 and e.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return FsyncMethodResult(spec.group, spec.method, spec.label, supported=False,
                                     reason=_direct_reason(fs_type, e))
        raise DiagError(f"fsync test: {spec.label} failed on {path}: {e.strerror}") from e
    finally:
        view.release()
        os.close(fd)
    elapsed = (end - start) / 1e9
    dev_flushes = None if before is None or after is None or after < before else after - before
    return FsyncMethodResult(
        spec.group, spec.method, spec.label, supported=True, ops=ops, seconds=elapsed,
        ops_per_s=ops / elapsed, us_per_op=elapsed * 1e6 / ops,
        device_flushes=dev_flushes,
        device_flushes_per_op=None if dev_flushes is None else dev_flushes / ops)


def _direct_reason(fs_type: str | None, e: OSError) -> str:
    name = errno.errorcode.get(e.errno or 0, str(e.errno))
    return f"O_DIRECT refused by the {fs_type or 'unknown'} filesystem here ({name}: {e.strerror})"


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


def run_fsync_test(directory: Path | str, seconds_per_test: float = 2.0, *,
                   proc_root: Path = Path("/proc"), sys_root: Path = Path("/sys")) -> FsyncTestResult:
    """Measure durable-write rates in ``directory`` (put it on the disk of the data directory).

    ``seconds_per_test`` is the time per test (12 timed tests: about 24 s at the
    default 2 s). Raises :class:`DiagError` with one clear line when the directory
    is missing or not writable, or when a write or sync fails.
    """
    if not seconds_per_test > 0:
        raise DiagError(f"fsync test: seconds per test must be positive, got {seconds_per_test}")
    directory = Path(directory)
    if not directory.is_dir():
        raise DiagError(f"fsync test: {directory} is not a directory")
    device = device_for_path(directory, sys_root=sys_root, proc_root=proc_root)
    try:
        fd, name = tempfile.mkstemp(prefix=".dbdiag-fsync-", suffix=".tmp", dir=directory)
    except OSError as e:
        raise DiagError(f"fsync test: cannot create a file in {directory}: {e.strerror}; "
                        "pass a writable directory on the disk that holds the database files") from e
    path = Path(name)
    buf = mmap.mmap(-1, 2 * WRITE_SIZE)
    try:
        buf.write(os.urandom(2 * WRITE_SIZE))
        try:
            # Allocate and persist the blocks first so the tests measure overwrites
            # and no earlier dirty data is flushed inside a timed test.
            fill = os.urandom(PREFILL_BYTES)
            written = 0
            while written < PREFILL_BYTES:
                written += os.write(fd, fill[written:])
            os.fsync(fd)
        except OSError as e:
            raise DiagError(f"fsync test: cannot write {path}: {e.strerror}") from e
        finally:
            os.close(fd)
        flushes = _Flushes(device, proc_root)
        tests = tuple(_run_one(s, path, buf, seconds_per_test, flushes, device.fs_type) for s in _specs())
    finally:
        buf.close()
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    counters = any(t.device_flushes is not None for t in tests)
    result = FsyncTestResult(directory=str(directory), seconds_per_test=seconds_per_test, device=device,
                             tests=tests, flush_counters=counters, kernel=os.uname().release)
    return replace(result, notes=tuple(_notes(result)))


def _notes(r: FsyncTestResult) -> list[str]:
    """Plain-language remarks on what the numbers can and cannot show."""
    notes: list[str] = []
    dev = r.device
    if dev.name is None:
        notes.append(f"No block device: {dev.reason}.")
    elif not r.flush_counters:
        notes.append("The kernel reports no flush counters for this device (needs Linux 5.5+): "
                     "whether flushes reach the device was not measured.")
    fd = r.get(GROUP_ONE, "fdatasync")
    if dev.write_cache == "write through":
        notes.append("The device declares no volatile write cache (write through), so the kernel sends it "
                     "no flush requests: 0 device flushes per op is expected, and durability rests on that "
                     "declaration being true.")
    elif (dev.write_cache == "write back" and fd is not None and fd.device_flushes_per_op is not None
          and fd.device_flushes_per_op < MIN_DEVICE_FLUSHES_PER_FDATASYNC):
        barrier_off = [o for o in dev.mount_options if o in ("nobarrier", "barrier=0")]
        notes.append(
            f"Only {fd.device_flushes_per_op:.2f} device flushes per fdatasync although the device has a "
            "volatile write cache: committed data can sit in that cache when power fails"
            + (f" (the filesystem is mounted with {barrier_off[0]})." if barrier_off else "."))
    if (dev.rotational and fd is not None and fd.ops_per_s is not None
            and fd.ops_per_s > ROTATIONAL_MAX_FLUSHES_PER_S):
        notes.append(f"{fd.ops_per_s:.0f} fdatasync/s is more than a spinning disk can do "
                     f"(at most ~{ROTATIONAL_MAX_FLUSHES_PER_S:.0f}/s at 15,000 rpm) although the device "
                     "reports itself rotational: a cache answers the flushes (virtual disk, controller "
                     "cache) and only its power protection makes them durable.")
    unsupported = [t.label for t in r.tests if not t.supported and t.method != "fsync_writethrough"]
    if unsupported:
        notes.append("Not supported here: " + ", ".join(sorted(set(unsupported))) + ".")
    return notes


# --------------------------------------------------------------------------- output


def format_table(result: FsyncTestResult) -> str:
    """A human table in the manner of pg_test_fsync, plus device flushes per op."""
    dev = result.device
    where = (f"{dev.fs_type or '?'} on {dev.name}" if dev.name else f"{dev.fs_type or '?'}, no block device")
    cache = f"write cache: {dev.write_cache or 'unknown'}"
    rot = {True: "rotational", False: "non-rotational", None: "rotational: unknown"}[dev.rotational]
    lines = [f"{result.seconds_per_test:g} seconds per test, in {result.directory} ({where}; {cache}; {rot})"]
    if not result.flush_counters:
        lines.append("device flush counters: not available")
    for group in (GROUP_ONE, GROUP_TWO, GROUP_SIZES):
        lines.append("")
        lines.append(GROUP_TITLES[group])
        if group != GROUP_SIZES:
            lines.append("(in wal_sync_method preference order, except fdatasync is Linux's default)")
        for t in (x for x in result.tests if x.group == group):
            label = f"        {t.label:<30}"
            if not t.supported:
                lines.append(f"{label}{'n/a':>21}   {t.reason}")
                continue
            flushes = ("" if t.device_flushes_per_op is None
                       else f"  {t.device_flushes_per_op:6.2f} device flushes/op")
            lines.append(f"{label}{t.ops_per_s:13.3f} ops/sec  {t.us_per_op:6.0f} usecs/op{flushes}")
    if result.notes:
        lines.append("")
        lines.extend(f"* {n}" for n in result.notes)
    return "\n".join(lines) + "\n"
