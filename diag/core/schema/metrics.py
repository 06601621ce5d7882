"""Metric declarations: what a collector says about each field it writes (unit, counter or gauge)."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from diag.core.schema.base import BundleFormatError, as_object, get_field, safe_name

METRIC_KINDS = ("counter", "gauge")


# --------------------------------------------------------------------------- metric declarations


@functools.lru_cache(maxsize=1024)
def _pattern(name: str) -> re.Pattern[str]:
    """Regex of a declared name: ``<anything>`` is a placeholder, ``{a,b}`` an alternative."""
    out = []
    for part in re.split(r"(<[^>]*>|\{[^}]*\})", name):
        if part.startswith("<") and part.endswith(">"):
            out.append(".+")
        elif part.startswith("{") and part.endswith("}"):
            out.append("(?:" + "|".join(re.escape(p.strip()) for p in part[1:-1].split(",")) + ")")
        else:
            out.append(re.escape(part))
    return re.compile("".join(out))


@dataclass(frozen=True)
class MetricDecl:
    """One metric a collector declares: name (may hold ``<placeholders>``), unit, counter or gauge.

    A counter is monotonic and raw (turn it into a rate with :mod:`collectors.rates`);
    a gauge is a value as it stands.
    """

    name: str
    unit: str
    kind: Literal["counter", "gauge"]
    description: str = ""

    @property
    def is_pattern(self) -> bool:
        return "<" in self.name or "{" in self.name

    def matches(self, key: str) -> bool:
        """True when record field ``key`` is this metric (exactly, or through its placeholders)."""
        return key == self.name or (self.is_pattern and _pattern(self.name).fullmatch(key) is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "unit": self.unit, "kind": self.kind, "description": self.description}

    @classmethod
    def from_dict(cls, d: Any, where: str = "metric") -> MetricDecl:
        d = as_object(d, where)
        kind = get_field(d, "kind", (str,), where, required=True)
        if kind not in METRIC_KINDS:
            raise BundleFormatError(f"{where}: kind should be counter or gauge, not {kind!r:.40}")
        return cls(name=get_field(d, "name", (str,), where, required=True), unit=get_field(d, "unit", (str,), where, ""),
                   kind=kind, description=get_field(d, "description", (str,), where, ""))


@dataclass(frozen=True)
class MetricDeclarations:
    """run.json ``metrics``: per series name, the declared metrics of the collector that wrote it."""

    series: Mapping[str, tuple[MetricDecl, ...]] = field(default_factory=dict)

    def for_series(self, name: str) -> tuple[MetricDecl, ...]:
        """Declarations of series ``name`` (a file stem or a raw key); a series of the same collector stands in."""
        if name in self.series:
            return self.series[name]
        for key, decls in self.series.items():
            if safe_name(key) == name:
                return decls
        collector = name.split("--", 1)[0]
        for key, decls in self.series.items():
            if key.split("--", 1)[0] == collector:
                return decls
        return ()

    def find(self, series: str, key: str) -> MetricDecl | None:
        """The declaration of field ``key`` of ``series``: an exact name first, else the most specific pattern."""
        decls = self.for_series(series)
        for m in decls:
            if m.name == key:
                return m
        hits = [m for m in decls if m.matches(key)]
        return max(hits, key=lambda m: len(_pattern(m.name).pattern), default=None)

    def kind(self, series: str, key: str) -> str | None:
        """"counter", "gauge", or None when ``key`` of ``series`` is not declared."""
        m = self.find(series, key)
        return m.kind if m else None

    def merged(self, other: MetricDeclarations) -> MetricDeclarations:
        """These declarations, with ``other``'s for series these do not declare."""
        return MetricDeclarations({**dict(other.series), **dict(self.series)})

    def to_dict(self) -> dict[str, Any]:
        return {k: [m.to_dict() for m in v] for k, v in sorted(self.series.items())}

    @classmethod
    def from_dict(cls, d: Any, where: str = "metrics") -> MetricDeclarations:
        d = as_object(d, where)
        out: dict[str, tuple[MetricDecl, ...]] = {}
        for k, v in d.items():
            if not isinstance(v, list):
                raise BundleFormatError(f"{where}.{k} should be a list of metric declarations")
            out[str(k)] = tuple(MetricDecl.from_dict(m, f"{where}.{k}[{i}]") for i, m in enumerate(v))
        return cls(out)
