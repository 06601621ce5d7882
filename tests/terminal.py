"""A fake terminal for progress-output tests: a stream that says it is a TTY, and what it would show."""

from __future__ import annotations

import io


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def screen(text: str) -> list[str]:
    """What a terminal shows: '\\r' returns to column 0 and later characters overwrite."""
    lines: list[str] = []
    cur: list[str] = []
    col = 0
    for ch in text:
        if ch == "\n":
            lines.append("".join(cur).rstrip())
            cur, col = [], 0
        elif ch == "\r":
            col = 0
        else:
            if col < len(cur):
                cur[col] = ch
            else:
                cur.append(ch)
            col += 1
    lines.append("".join(cur).rstrip())
    return lines
