"""reports.model.observer: where a step's profile ran, and which rate its per-transaction figures divide by."""

from __future__ import annotations

from diag.core.schema import ResultRow
from reports.model.observer import in_tail, profiled_tps

TAIL = {"t_start": 110.0, "t_end": 114.25, "seconds": 4.25, "transactions": 4250, "tps": 1000.0, "tps_ratio": 0.1}


def test_a_profile_in_the_tail_divides_by_the_tail_s_rate() -> None:
    row = ResultRow(tps=10000.0, t_start=100.0, t_end=110.0, profile={"window": [111.0, 114.0]}, profile_tail=TAIL)
    assert in_tail(row) and profiled_tps(row) == 1000.0


def test_a_profile_inside_the_measured_part_divides_by_the_step_s_rate() -> None:
    # an ssh profile records in the middle of the measured part even when the run has a tail
    row = ResultRow(tps=10000.0, t_start=100.0, t_end=110.0, profile={"window": [103.5, 106.5]}, profile_tail=TAIL)
    assert not in_tail(row) and profiled_tps(row) == 10000.0
    assert not in_tail(ResultRow(tps=5.0, profile={"window": [1.0, 2.0]})) and profiled_tps(ResultRow(tps=0)) is None
