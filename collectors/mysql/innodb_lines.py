"""Reading numbers from the lines of one INNODB STATUS section: a collector of values and line rules.

A :class:`Rule` recognises a line (``detect``) and must then match it fully
(``pattern``); a recognised line that does not match is a problem of its
section (the server printed something we misread), never a wrong number.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DEC", "MAX_TOKEN_CHARS", "NUM", "Reader", "Rule", "apply_rules", "rule"]

# Real values fit in 64 bits; bound the token length so a fuzzed 5,000-digit
# "number" cannot hit int()'s digit limit or become float("inf").
MAX_TOKEN_CHARS = 24
NUM = r"(\d+)"
DEC = r"(\d+(?:\.\d+)?)"


class Reader:
    """Collects one section's values and the first problem met in it."""

    def __init__(self) -> None:
        self.values: dict[str, int | float] = {}
        self.problem: str | None = None

    def bad(self, line: str, what: str) -> None:
        """Remember the first line that looked like ``what`` but did not parse."""
        if self.problem is None:
            shown = line if len(line) <= 80 else line[:77] + "..."
            self.problem = f"cannot read {what} from line {shown!r}"

    def put(self, name: str, token: str | None, line: str) -> None:
        """Store ``token`` (digits, maybe with a decimal part) as ``name``; first one wins."""
        if token is None or name in self.values:
            return
        if len(token) > MAX_TOKEN_CHARS:
            self.bad(line, f"{name} (number too long)")
            return
        self.values[name] = float(token) if "." in token else int(token)

    def add(self, name: str, token: str, line: str) -> None:
        """Add ``token`` to ``name`` (for values printed once per sync array)."""
        if len(token) > MAX_TOKEN_CHARS:
            self.bad(line, f"{name} (number too long)")
            return
        self.values[name] = self.values.get(name, 0) + int(token)


@dataclass(frozen=True)
class Rule:
    """A line that ``detect`` recognises must match ``pattern``; its groups fill ``names``."""

    detect: re.Pattern[str]
    pattern: re.Pattern[str]
    names: tuple[str, ...]


def rule(detect: str, pattern: str, *names: str) -> Rule:
    return Rule(re.compile(detect), re.compile(pattern), names)


def apply_rules(lines: Sequence[str], rules: Sequence[Rule], reader: Reader) -> None:
    """Fill ``reader`` from every line that one of ``rules`` recognises."""
    for line in lines:
        for rule in rules:
            if not rule.detect.search(line):
                continue
            match = rule.pattern.match(line)
            if match is None:
                reader.bad(line, rule.names[0])
            else:
                for name, token in zip(rule.names, match.groups()):
                    reader.put(name, token, line)
            break
