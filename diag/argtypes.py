"""Argument types shared by the subcommands (one place, so every command validates alike)."""

from __future__ import annotations

import argparse

from diag.errors import UsageError
from diag.redact import redact_userinfo


def csv_ints(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of integers, got {text!r}") from None
    if not vals or any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError("client counts must be >= 1")
    return vals


def positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return v


def key_values(items: list[str] | None, option: str = "--set", form: str = "KEY=VALUE") -> dict[str, str]:
    out: dict[str, str] = {}
    for it in items or []:
        if "=" not in it:
            raise UsageError(f"{option} expects {form}, got {redact_userinfo(it)!r}")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """``--help`` that states each option's default, unless its help already says it or there is none to say.

    argparse's own ArgumentDefaultsHelpFormatter also prints "(default: None)" and
    "(default: False)" for options that have no default worth saying.
    """

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        d = action.default
        if not action.option_strings or d is None or d is False or d == "" or d == argparse.SUPPRESS or \
                "default" in text.lower():
            return text
        shown = ",".join(str(x) for x in d) if isinstance(d, (tuple, list)) else str(d)
        return f"{text} (default: {shown.replace('%', '%%')})"  # help text is %-formatted by argparse
