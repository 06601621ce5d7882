"""results.json ``results[].profile``: one step's server profile summary, and its off-CPU part.

Written by the profile source (:mod:`collectors.step_profiles`) into the row of the step it recorded; the
stacks themselves are folded files under artifacts/ (``folded``: ``kind;comm;root;...;leaf count``, CPU
samples at ``freq_hz``; ``offcpu.folded``: the same stacks with µs off CPU as the count). A profile that could
not be recorded is ``{"error": "..."}``. Rows written before these fields existed (no ``unwinder``, no
``offcpu``) load as frame-pointer profiles without off-CPU time.

* ``unwinder``: "fp" (frame pointers, ``perf record -g``) or "dwarf" (``--call-graph dwarf,stack_bytes``);
  ``unwinder_reason``: why (the frame-pointer check's numbers); ``usable_share``: share 0..1 of samples
  with at least 5 named user-space frames;
* ``scope``: "system" (``perf record -a``) or "pids" (per process, user space only: no off-CPU time);
* ``window``: [start, end] epoch seconds of the recording as planned.
* ``offcpu``: ``total_us`` off CPU of the server's threads in ``seconds``, of it ``runqueue_us`` waiting for
  a CPU after the wake-up and ``open_us`` in intervals still open at the end; ``by_state`` (S, D, R ...),
  ``by_syscall`` and ``by_kind_call`` (thread kind -> blocking call -> µs); or ``{"error": "..."}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from diag.core.schema.base import NUM, BundleFormatError, as_object, get_field, unknown_keys

UNWINDERS = ("fp", "dwarf")
SCOPES = ("system", "pids")


def _us_map(d: Mapping[str, Any], key: str, where: str) -> dict[str, int]:
    m = as_object(get_field(d, key, (dict,), where, {}), f"{where}: {key}")
    for k, v in m.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise BundleFormatError(f"{where}: {key}.{k} should be a number of µs >= 0, not {v!r:.40}")
    return {str(k): int(v) for k, v in m.items()}


@dataclass(frozen=True)
class OffCpuInfo:
    """The off-CPU part of a step's profile (see the module docstring)."""

    folded: str = ""
    error: str = ""
    seconds: float = 0.0
    total_us: int = 0
    runqueue_us: int = 0
    open_us: int = 0
    switches: int = 0
    threads: int = 0
    by_state: Mapping[str, int] = field(default_factory=dict)
    by_syscall: Mapping[str, int] = field(default_factory=dict)
    by_kind_call: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Any, where: str = "offcpu") -> OffCpuInfo:
        d = as_object(d, where)
        error = get_field(d, "error", (str,), where, "")
        folded = get_field(d, "folded", (str,), where, "")
        if not error and not folded:
            raise BundleFormatError(f"{where}: needs folded (the stacks' file) or error (why there are none)")
        nums = {k: get_field(d, k, (int,), where, 0) for k in ("total_us", "runqueue_us", "open_us", "switches",
                                                                "threads")}
        if any(v < 0 for v in nums.values()):
            raise BundleFormatError(f"{where}: counts and µs must be >= 0: {nums}")
        if nums["runqueue_us"] > nums["total_us"] or nums["open_us"] > nums["total_us"]:
            raise BundleFormatError(f"{where}: runqueue_us and open_us are parts of total_us: {nums}")
        kind_call = as_object(get_field(d, "by_kind_call", (dict,), where, {}), f"{where}: by_kind_call")
        return cls(folded=folded, error=error, seconds=float(get_field(d, "seconds", NUM, where, 0.0)), **nums,
                   by_state=_us_map(d, "by_state", where), by_syscall=_us_map(d, "by_syscall", where),
                   by_kind_call={str(k): _us_map(kind_call, str(k), f"{where}: by_kind_call") for k in kind_call},
                   extra=unknown_keys(d, ("folded", "error", "seconds", *nums, "by_state", "by_syscall",
                                          "by_kind_call")))


@dataclass(frozen=True)
class StepProfile:
    """A step's server profile summary (see the module docstring)."""

    folded: str = ""
    error: str = ""
    samples: int = 0
    freq_hz: int = 0
    scope: str = ""
    unwinder: str = "fp"
    unwinder_reason: str = ""
    usable_share: float | None = None
    window: tuple[float, float] | None = None
    offcpu: OffCpuInfo | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Any, where: str = "profile") -> StepProfile:
        d = as_object(d, where)
        error = get_field(d, "error", (str,), where, "")
        folded = get_field(d, "folded", (str,), where, "")
        if not error and not folded:
            raise BundleFormatError(f"{where}: needs folded (the stacks' file) or error (why there are none)")
        unwinder = get_field(d, "unwinder", (str,), where, "fp")
        scope = get_field(d, "scope", (str,), where, "")
        if unwinder not in UNWINDERS or (scope and scope not in SCOPES):
            raise BundleFormatError(f"{where}: unwinder should be one of {UNWINDERS} and scope one of {SCOPES}, "
                                    f"not {unwinder!r} / {scope!r}")
        share = get_field(d, "usable_share", NUM, where)
        if share is not None and not 0.0 <= share <= 1.0:
            raise BundleFormatError(f"{where}: usable_share should be within 0..1, not {share}")
        window = get_field(d, "window", (list, tuple), where)
        if window is not None and (len(window) != 2 or not all(isinstance(t, (int, float)) for t in window)):
            raise BundleFormatError(f"{where}: window should be [start, end] in epoch seconds")
        off = get_field(d, "offcpu", (dict,), where)
        return cls(folded=folded, error=error, samples=get_field(d, "samples", (int,), where, 0),
                   freq_hz=get_field(d, "freq_hz", (int,), where, 0), scope=scope, unwinder=unwinder,
                   unwinder_reason=get_field(d, "unwinder_reason", (str,), where, ""),
                   usable_share=share, window=(float(window[0]), float(window[1])) if window else None,
                   offcpu=OffCpuInfo.from_dict(off, f"{where}: offcpu") if off is not None else None,
                   extra=unknown_keys(d, ("folded", "error", "samples", "freq_hz", "scope", "unwinder",
                                          "unwinder_reason", "usable_share", "window", "offcpu")))
