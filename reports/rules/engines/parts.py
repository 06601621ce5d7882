"""What an engine contributes to the findings rules: :class:`RuleParts`, one per engine module beside this one.

The rules that read an engine's own counters (lock_contention, latch_contention, io_read_bound, cache,
commit_flush_bound's note, checkpoint_pressure) ask their step's engine for its :class:`RuleParts` through
:func:`reports.rules.engines.rule_parts`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from diag.core.bundle import Bundle
from reports.model.steps import Finding, Step

Counters = Callable[[Bundle, Step], dict[str, Any]]  # evidence from the engine's counters over a step


@dataclass(frozen=True)
class RuleParts:
    """How one engine's findings read its counters: the notes and counters beside its wait samples (who sampled
    them is ``Engine.wait_samplers``), and its judge of checkpoint pressure."""

    flush_note: Callable[[str], str]  # the wait records' source -> what to know about its flush waits ("" = nothing)
    lock_counters: Counters  # the engine's own lock counters over a step (evidence of lock_contention)
    latch_counters: Counters  # ... of latch_contention
    cache_counters: Counters  # ... of io_read_bound and reports.rules.cache
    checkpoint_pressure: Callable[[Bundle, Step], Finding | None]  # forced checkpoints, a nearly full log


def no_note(source: str) -> str:
    """An engine whose flush waits need no note."""
    return ""


def no_counters(b: Bundle, step: Step) -> dict[str, Any]:
    """An engine that has no counters of this kind."""
    return {}
