"""F, the flush capability: one fsync test per device under the targets' data directories, as a source.

A run with a write workload (and ``dbdiag durability``) judges its commit rate
against what the disk can flush; this source measures that before anything else
samples (the fsync test would disturb the host CPU and disk series), and adds
run.json ``flush_capability`` (format: :class:`diag.core.schema.FlushCapabilityInfo`).
A target whose test cannot run (remote, no data directory, nothing writable) gets
``device`` None and an ``error``: the run goes on without F for it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

from collectors.base import Collector, CollectorContext, Probe
from collectors.diskstats import device_for_path
from collectors.fsync_test import run_fsync_test, writable_dir_on_same_fs
from diag.core.errors import DiagError
from diag.core.schema import FlushCapabilityInfo, FlushDevice, FlushTarget

NOT_LOCAL = "the server is not on this machine"
TESTS_PER_DEVICE = 12  # run_fsync_test's timed tests


def measure_flush_capability(dirs: Sequence[tuple[str, str | None]], seconds_per_test: float = 0.5,
                             progress: TextIO | None = sys.stderr) -> dict[str, Any]:
    """run.json ``flush_capability`` for ``(label, data_directory)`` pairs: one fsync test per device.

    Targets on a device already tested share its result. A target whose test
    cannot run (no data directory, not writable) gets ``device`` None and an
    ``error``; nothing is raised, so a run goes on without F.
    """
    devices: dict[str, FlushDevice] = {}
    targets: dict[str, FlushTarget] = {}
    for label, data_dir in dirs:
        if not data_dir:
            targets[label] = FlushTarget(None, None, "the server's data directory is not known here")
            continue
        try:
            info = device_for_path(data_dir)
            key = info.name or f"{info.fs_type or 'nodev'}:{info.mount_point or data_dir}"
            where = writable_dir_on_same_fs(data_dir)
            if key not in devices:
                if progress is not None:
                    print(f"dbdiag: measuring flush capability in {where} ({seconds_per_test:g} s x "
                          f"{TESTS_PER_DEVICE} tests) ...", file=progress, flush=True)
                devices[key] = FlushDevice.from_fsync_test(run_fsync_test(where, seconds_per_test).to_dict())
            targets[label] = FlushTarget(key, str(where))
        except DiagError as e:
            targets[label] = FlushTarget(None, data_dir, str(e))
    return FlushCapabilityInfo(devices, targets).to_dict()


class FlushCapabilitySource(Collector):
    """The fsync test as a run-wide, in-process source: measured in ``start()``, stored by :meth:`facts`.

    Options: ``seconds_per_test`` (s, 12 tests per device), ``progress`` (a text
    stream for the one line per device, or None).
    """

    name = "flush_capability"
    title = "flush capability (fsync test)"
    per_target = False
    sampled = False

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.seconds = float(ctx.options.get("seconds_per_test", 0.5))
        self.progress: TextIO | None = ctx.options.get("progress", sys.stderr)
        self.result: dict[str, Any] = {}

    def probe(self) -> Probe:
        local = [s.label for s in self.ctx.servers if s.local]
        if not local:
            return Probe(True, f"no target's server is on this machine: F is not measured ({NOT_LOCAL})")
        return Probe(True, f"fsync test under the data directory of {', '.join(local)}")

    def start(self) -> None:
        local = [(s.label, s.data_dir) for s in self.ctx.servers if s.local]
        self.result = measure_flush_capability(local, self.seconds, self.progress) if local else \
            {"devices": {}, "targets": {}}
        for s in self.ctx.servers:
            if not s.local:
                self.result["targets"][s.label] = FlushTarget(None, None, NOT_LOCAL).to_dict()

    def sample(self) -> None:
        return None

    def facts(self) -> dict[str, Any]:
        return {"flush_capability": self.result} if self.result else {}
