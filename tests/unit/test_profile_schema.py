"""The typed profile record of a result row (diag.core.schema.profile): what the profile source writes loads, what
it could not have written is refused with the row named."""

from __future__ import annotations

import pytest

from diag.core.schema.base import BundleFormatError
from diag.core.schema.profile import OffCpuInfo, StepProfile
from diag.core.schema.records import ResultRow

# As the source wrote it in a run of the embedded PostgreSQL 18 (insert, 2 clients), by_kind_call trimmed.
WRITTEN = {
    "folded": "artifacts/profile--pg--insert--c2.folded", "samples": 222, "freq_hz": 249, "scope": "system",
    "unwinder": "dwarf", "stack_bytes": 8192, "usable_share": 0.977, "symbol_hint": "", "warnings": [],
    "unwinder_reason": "first window: DWARF while frame pointers gave 0% usable stacks in a 0.5 s check (70 "
                       "samples); DWARF from now on",
    "unresolved_share": 0.01, "window": [1796124784.26, 1796124786.66],
    "offcpu": {"folded": "artifacts/offcpu--pg--insert--c2.folded", "unit": "us", "seconds": 1.005,
               "total_us": 6128153, "runqueue_us": 266158, "open_us": 1110938, "switches": 16518, "threads": 16,
               "by_state": {"D": 736469, "R": 169262, "S": 5222422},
               "by_syscall": {"epoll_wait": 4722189, "fdatasync": 729958, "futex": 504142},
               "by_kind_call": {"backend": {"fdatasync": 729958, "futex": 504142}}, "unwinder": "fp",
               "window": [1796124784.26, 1796124785.26]},
}


def test_written_profile_loads_typed() -> None:
    p = StepProfile.from_dict(WRITTEN)
    assert p.unwinder == "dwarf" and p.scope == "system" and p.usable_share == 0.977
    assert p.window == (1796124784.26, 1796124786.66) and p.extra["stack_bytes"] == 8192
    assert isinstance(p.offcpu, OffCpuInfo) and p.offcpu.by_kind_call["backend"]["fdatasync"] == 729958
    assert p.offcpu.extra["unit"] == "us"


def test_old_and_failed_profiles_load() -> None:
    old = StepProfile.from_dict({"folded": "artifacts/x.folded", "samples": 3, "freq_hz": 499})
    assert old.unwinder == "fp" and old.offcpu is None
    assert StepProfile.from_dict({"error": "profile: perf not found on PATH"}).error
    assert StepProfile.from_dict({**WRITTEN, "offcpu": {"error": "not recorded: per-process"}}).offcpu.error


@pytest.mark.parametrize("bad", [
    {"samples": 3},  # neither stacks nor a reason
    {**WRITTEN, "unwinder": "lbr"},
    {**WRITTEN, "scope": "host"},
    {**WRITTEN, "usable_share": 1.5},
    {**WRITTEN, "window": [1.0]},
    {**WRITTEN, "offcpu": {**WRITTEN["offcpu"], "runqueue_us": 9_000_000}},
    {**WRITTEN, "offcpu": {**WRITTEN["offcpu"], "by_state": {"S": -1}}},
    {**WRITTEN, "offcpu": {"seconds": 1.0}},
])
def test_impossible_profiles_are_refused_naming_the_row(bad: dict) -> None:
    with pytest.raises(BundleFormatError):
        StepProfile.from_dict(bad)
    row = {"target": "pg", "workload": "insert", "clients": 2, "tps": 1.0, "profile": bad}
    with pytest.raises(BundleFormatError, match="profile"):
        ResultRow.from_dict(row, "results[0]")
