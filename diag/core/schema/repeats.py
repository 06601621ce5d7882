"""The repeat fields of a result row (format 3): per-interval throughput, the repeats, the interval.

``interval_tps``: transactions/s of each full report interval of the step's measured
part (of every repeat, pooled, in a combined row). Under ``--repeat N`` the row is
built from N repeats (:mod:`workloads.steps.repeats`): ``repeats[]`` holds each one
(:class:`RepeatSummary`), ``repeat_count`` N, ``representative_repeat`` the repeat
whose window the row's other fields describe. ``tps_ci`` (:class:`TpsInterval`) is
the median throughput with its interval, on every row written since format 3.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from diag.core.schema.base import NUM, BundleFormatError, as_object, get_field


def num_list(d: Mapping[str, Any], key: str, where: str) -> tuple[float, ...]:
    """``d[key]`` as a tuple of numbers (empty when absent)."""
    items = get_field(d, key, (list, tuple), where, [])
    if not all(isinstance(x, NUM) and not isinstance(x, bool) for x in items):
        raise BundleFormatError(f"{where}: {key} should be a list of numbers")
    return tuple(items)


@dataclass(frozen=True)
class TpsInterval:
    """``tps_ci``: the median throughput (transactions/s) and its interval [low, high].

    ``level``: the coverage the interval really has (0..1; below 0.95 with few values);
    ``n``: how many values; ``basis``: "repeats" (one value per repeat) or "intervals"
    (per-interval throughput of every repeat pooled); ``method``: in words."""

    median: float
    low: float
    high: float
    level: float
    n: int
    basis: str
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "low": self.low, "high": self.high, "level": self.level, "n": self.n,
                "basis": self.basis, "method": self.method}

    @classmethod
    def from_dict(cls, d: Any, where: str = "tps_ci") -> TpsInterval:
        d = as_object(d, where)
        median, low, high, level = (get_field(d, k, NUM, where, required=True) for k in ("median", "low", "high",
                                                                                        "level"))
        return cls(median=median, low=low, high=high, level=level, n=get_field(d, "n", (int,), where, required=True),
                   basis=get_field(d, "basis", (str,), where, ""), method=get_field(d, "method", (str,), where, ""))


@dataclass(frozen=True)
class RepeatSummary:
    """``repeats[]``: one repeat of a step: which, its throughput (transactions/s), window (Unix s), p95 (ms)."""

    repeat: int
    tps: float
    t_start: float | None = None
    t_end: float | None = None
    transactions: int | None = None
    complete: bool = True
    p95_ms: float | None = None
    interval_tps: tuple[float, ...] = ()

    @classmethod
    def from_dict(cls, d: Any, where: str = "repeat") -> RepeatSummary:
        d = as_object(d, where)
        return cls(repeat=get_field(d, "repeat", (int,), where, required=True),
                   tps=get_field(d, "tps", NUM, where, required=True),
                   t_start=get_field(d, "t_start", NUM, where), t_end=get_field(d, "t_end", NUM, where),
                   transactions=get_field(d, "transactions", (int,), where),
                   complete=get_field(d, "complete", (bool,), where, True),
                   p95_ms=get_field(d, "p95_ms", NUM, where), interval_tps=num_list(d, "interval_tps", where))


def check_repeat_fields(d: Mapping[str, Any], where: str) -> None:
    """Validate a row's repeat fields (the loader calls it so a bad one names its row)."""
    num_list(d, "interval_tps", where)
    if d.get("tps_ci") is not None:
        TpsInterval.from_dict(d["tps_ci"], f"{where}: tps_ci")
    for i, r in enumerate(get_field(d, "repeats", (list,), where, [])):
        RepeatSummary.from_dict(r, f"{where}: repeats[{i}]")
    for k in ("repeat", "repeat_count", "representative_repeat"):
        get_field(d, k, (int,), where)
