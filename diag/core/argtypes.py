"""Argument types shared by the subcommands (one place, so every command validates alike)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from diag.core.errors import UsageError
from diag.core.redact import redact_userinfo


def csv_ints(text: str) -> tuple[int, ...]:
    """``--clients 1,2,4``: the integers, checked by :func:`client_counts` (so a bad count is an argument
    error, answered before any command module is imported)."""
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of integers, got {text!r}") from None
    try:
        return client_counts(vals)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def duration(text: str) -> float:
    """``-T``: seconds measured per step, checked by :func:`step_seconds`."""
    try:
        return step_seconds(float(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def client_counts(counts: Iterable[object]) -> tuple[int, ...]:
    """``--clients``' one rule, wherever the counts come from: the command line (:func:`csv_ints`) or a caller
    that builds ``workloads.steps.options.DriverOptions`` itself: whole numbers of at least 1, at least one."""
    vals = tuple(counts)
    if not vals or any(not isinstance(c, int) or isinstance(c, bool) or c < 1 for c in vals):
        raise UsageError("--clients needs positive whole numbers, e.g. 1,2,4,8")
    return vals  # type: ignore[return-value]  # every one is an int: checked above


def step_seconds(seconds: float) -> float:
    """``-T``'s one rule (:func:`duration`, ``DriverOptions``): the seconds measured per step, more than 0."""
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not seconds > 0:
        raise UsageError("--duration must be more than 0 seconds")
    return float(seconds)


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
