"""What an engine contributes to the report model: :class:`ModelParts`, one per engine module beside this one.

Today that is the rules that judge its durability settings (:func:`reports.model.durability_settings.settings_verdict`
runs them on a :class:`SettingsReader`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

TRUE = ("on", "true", "yes", "1")
FALSE = ("off", "false", "no", "0")


class RelaxedSetting(NamedTuple):
    """A setting that weakens durability: its name, its value, and what it risks (one sentence)."""

    setting: str
    value: str
    risk: str


class SettingsReader:
    """A server's settings (names in lower case) and what an engine's durability rules found in them, as they run."""

    def __init__(self, settings: dict[str, str]) -> None:
        self.s = {k.strip().lower(): str(v).strip() for k, v in settings.items() if v is not None}
        self.relaxed: list[RelaxedSetting] = []
        self.unknown: list[str] = []
        self.notes: list[RelaxedSetting] = []
        self.waits: bool | None = True  # flips to False/None as rules find out

    def get(self, name: str) -> str | None:
        v = self.s.get(name)
        if v is None or v == "":
            self.unknown.append(name)
            return None
        return v

    def relax(self, name: str, value: str, risk: str) -> None:
        self.relaxed.append(RelaxedSetting(name, value, risk))

    def note(self, name: str, value: str, risk: str) -> None:
        self.notes.append(RelaxedSetting(name, value, risk))

    def no_wait(self) -> None:
        self.waits = False

    def wait_unknown(self) -> None:
        if self.waits is True:
            self.waits = None


@dataclass(frozen=True)
class ModelParts:
    """One engine's part of the report model."""

    durability_rules: Callable[[SettingsReader], None]  # judges its settings: relax / note / no_wait / unknown
