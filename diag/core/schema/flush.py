"""run.json ``flush_capability``: the fsync test per device and each target's device."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from diag.core.schema.base import NUM, as_object, get_field

FLUSH_METHOD = "fdatasync, one 8 kB write"  # what a stored flush capability measured


# --------------------------------------------------------------------------- flush capability


@dataclass(frozen=True)
class FlushDevice:
    """One device's fsync test: F (flushes/s, None when the test gave no rate), what it measured, the test.

    ``fsync_test`` is ``collectors.fsync_test.FsyncTestResult.to_dict()``; it is read
    back by that class (a sources-layer type core does not know).
    """

    ops_per_s: float | None
    method: str = FLUSH_METHOD
    fsync_test: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_fsync_test(cls, test: Mapping[str, Any]) -> FlushDevice:
        """The entry for one fsync test (``FsyncTestResult.to_dict()``): F is its best fdatasync rate, if any."""
        ops = test.get("best_flush_capability_ops_per_s")
        return cls(ops if isinstance(ops, NUM) and not isinstance(ops, bool) else None, FLUSH_METHOD, dict(test))

    def to_dict(self) -> dict[str, Any]:
        return {"ops_per_s": self.ops_per_s, "method": self.method, "fsync_test": dict(self.fsync_test)}

    @classmethod
    def from_dict(cls, d: Any, where: str = "device") -> FlushDevice:
        d = as_object(d, where)
        return cls(ops_per_s=get_field(d, "ops_per_s", NUM, where), method=get_field(d, "method", (str,), where, "fdatasync"),
                   fsync_test=get_field(d, "fsync_test", (dict,), where, {}))


@dataclass(frozen=True)
class FlushTarget:
    """Which device a target's data directory is on (``device`` None when its test could not run: ``error``)."""

    device: str | None
    directory: str | None = None
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "directory": self.directory, "error": self.error}

    @classmethod
    def from_dict(cls, d: Any, where: str = "target") -> FlushTarget:
        d = as_object(d, where)
        return cls(device=get_field(d, "device", (str,), where) or None, directory=get_field(d, "directory", (str,), where),
                   error=get_field(d, "error", (str,), where, ""))


@dataclass(frozen=True)
class FlushCapabilityInfo:
    """run.json ``flush_capability``: one fsync test per device, and each target's device."""

    devices: Mapping[str, FlushDevice] = field(default_factory=dict)
    targets: Mapping[str, FlushTarget] = field(default_factory=dict)

    def of(self, label: str) -> tuple[FlushTarget, FlushDevice | None]:
        """Target ``label``'s entry and its device's test (None when not tested)."""
        tgt = self.targets.get(label) or FlushTarget(None, None, "no fsync test stored for this target")
        return tgt, (self.devices.get(tgt.device) if tgt.device else None)

    def to_dict(self) -> dict[str, Any]:
        return {"devices": {k: v.to_dict() for k, v in self.devices.items()},
                "targets": {k: v.to_dict() for k, v in self.targets.items()}}

    @classmethod
    def from_dict(cls, d: Any, where: str = "flush_capability") -> FlushCapabilityInfo:
        d = as_object(d, where)
        devs = get_field(d, "devices", (dict,), where, {})
        tgts = get_field(d, "targets", (dict,), where, {})
        return cls(devices={k: FlushDevice.from_dict(v, f"{where}.devices.{k}") for k, v in devs.items()},
                   targets={k: FlushTarget.from_dict(v, f"{where}.targets.{k}") for k, v in tgts.items()})
