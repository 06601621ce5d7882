"""What an engine contributes to the sources: :class:`SourceParts`, one per engine package (``PARTS`` in
collectors/pg/, collectors/mysql/), found through :mod:`collectors.engines`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from collectors.base import Collector


@dataclass(frozen=True)
class SourceParts:
    """One engine's sources: the collectors started for each of its targets, and how its server's processes or
    threads are told apart in CPU profiles (server pid, proc_root -> {pid or tid: role})."""

    collectors: tuple[type[Collector], ...]
    process_kinds: Callable[[int, Path], dict[int, str]]
