"""What every bundle record shares: the format number, the error, and typed field readers.

A reader takes a JSON object and a ``where`` (file and path of the object, for the
message) and returns the field checked against the Python types it may have.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from diag.core.errors import DiagError

FORMAT = 4  # the bundle format this code writes; see diag.core.schema for the history
FORMAT_KEY = "format"

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class BundleFormatError(DiagError):
    """A bundle file does not have the shape this dbdiag reads (says which file, field and value)."""


def safe_name(text: str) -> str:
    """A file-name-safe form of a label or collector name (how series files are named)."""
    return _SAFE.sub("_", text).strip("_") or "x"


# --------------------------------------------------------------------------- field readers

NUM = (int, float)


def typename(kinds: tuple[type, ...]) -> str:
    """The expected types in words, for a message ("a number", "a string or an object")."""
    names = {int: "an integer", float: "a number", str: "a string", bool: "true/false", dict: "an object",
             list: "a list"}
    return " or ".join(names.get(k, k.__name__) for k in kinds if not (k is int and float in kinds))


def get_field(d: Mapping[str, Any], key: str, kinds: tuple[type, ...], where: str, default: Any = None,
              required: bool = False) -> Any:
    """``d[key]`` checked against ``kinds``; None/absent gives ``default`` (or an error when ``required``)."""
    v = d.get(key)
    if v is None:
        if required:
            raise BundleFormatError(f"{where}: {key} is missing")
        return default
    # JSON true/false are Python bools, which are ints: never accept one as a number.
    if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
        raise BundleFormatError(f"{where}: {key} should be {typename(kinds)}, not {type(v).__name__} {v!r:.60}")
    return v


def as_object(d: Any, where: str) -> Mapping[str, Any]:
    """``d`` when it is a JSON object; else a BundleFormatError naming ``where``."""
    if not isinstance(d, Mapping):
        raise BundleFormatError(f"{where} should be an object, not {type(d).__name__}")
    return d


def unknown_keys(d: Mapping[str, Any], known: Sequence[str]) -> dict[str, Any]:
    """The keys of ``d`` a record has no field for: kept so a round trip loses nothing."""
    return {k: v for k, v in d.items() if k not in known}


def str_list(d: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    """``d[key]`` as a tuple of strings (empty when absent)."""
    items = get_field(d, key, (list, tuple), where, [])
    if not all(isinstance(x, str) for x in items):
        raise BundleFormatError(f"{where}: {key} should be a list of strings")
    return tuple(items)
