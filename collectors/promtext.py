"""The Prometheus text exposition format (version 0.0.4), as node_exporter serves it on /metrics.

One sample a line: ``name{label="value",...} value [timestamp_ms]``; ``#`` lines
are HELP / TYPE comments. Label values escape backslash, double quote and
newline (``\\\\``, ``\\"``, ``\\n``). Values are Go floats: ``NaN``, ``+Inf`` and
``-Inf`` included. Only what a scrape of node_exporter needs: no OpenMetrics
exemplars, no protobuf. A line that is not a sample raises :class:`ParseError`
naming the line, so a page that is not node_exporter's is one clear message.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from diag.core.errors import ParseError

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*\"")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


@dataclass(frozen=True)
class Sample:
    """One sample: metric name, its labels and value (the scrape's own unit: seconds, bytes, counts)."""

    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    def label(self, key: str, default: str = "") -> str:
        """The value of label ``key`` (``default`` when the sample has no such label)."""
        return next((v for k, v in self.labels if k == key), default)


def _value(text: str) -> float:
    t = text.strip()
    if t in ("+Inf", "Inf"):
        return math.inf
    if t == "-Inf":
        return -math.inf
    return float(t)  # "NaN" included


def _labels(line: str, i: int, lineno: int) -> tuple[tuple[tuple[str, str], ...], int]:
    """The labels of ``line`` from just after its ``{``; returns them and the index after ``}``."""
    out: list[tuple[str, str]] = []
    while True:
        while i < len(line) and line[i] in " ,":
            i += 1
        if i < len(line) and line[i] == "}":
            return tuple(out), i + 1
        m = _LABEL.match(line, i)
        if not m:
            raise ParseError(f"metrics line {lineno}: bad label at column {i + 1}: {line[:120]!r}")
        i = m.end()
        buf: list[str] = []
        while True:
            if i >= len(line):
                raise ParseError(f"metrics line {lineno}: unterminated label value: {line[:120]!r}")
            ch = line[i]
            if ch == "\\" and i + 1 < len(line):
                buf.append(_ESCAPES.get(line[i + 1], "\\" + line[i + 1]))
                i += 2
                continue
            if ch == '"':
                i += 1
                break
            buf.append(ch)
            i += 1
        out.append((m.group(1), "".join(buf)))


def parse_line(line: str, lineno: int = 0) -> Sample | None:
    """One exposition line as a :class:`Sample`; None for a blank or comment line."""
    s = line.strip()
    if not s or s.startswith("#"):
        return None
    m = _NAME.match(s)
    if not m:
        raise ParseError(f"metrics line {lineno}: no metric name: {s[:120]!r}")
    i = m.end()
    labels: tuple[tuple[str, str], ...] = ()
    if i < len(s) and s[i] == "{":
        labels, i = _labels(s, i + 1, lineno)
    rest = s[i:].split()
    if not rest or len(rest) > 2:
        raise ParseError(f"metrics line {lineno}: expected a value (and a timestamp) after the name: {s[:120]!r}")
    try:
        value = _value(rest[0])
    except ValueError:
        raise ParseError(f"metrics line {lineno}: value {rest[0][:40]!r} is not a number") from None
    return Sample(m.group(0), labels, value)


def parse_metrics(text: str) -> dict[str, list[Sample]]:
    """Every sample of a scrape, grouped by metric name (in page order)."""
    out: dict[str, list[Sample]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        smp = parse_line(line, n)
        if smp is not None:
            out.setdefault(smp.name, []).append(smp)
    return out
