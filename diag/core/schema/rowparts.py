"""A step's result row meets the parts other owners add to it in one place.

The step makes its :class:`~diag.core.schema.ResultRow` once, from what it measured; the sources that add to
a step's row (statements, profiles, table scans, the oldest transaction, flush calls in the tail) each declare
the row fields they own (``collectors.base.Collector.row_fields``) and return their part from
``step_finished``. :func:`with_part` is how a part goes in: a field the source did not declare is refused
(:class:`UndeclaredPartError`, a defect of that source, not a condition of the run), and the values are
checked as the loader checks them, so a part of the wrong shape fails here, naming its source, rather than
when the bundle is read.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from diag.core.schema.records import ResultRow


class UndeclaredPartError(TypeError):
    """A source returned a row field it does not declare as its own."""


def with_part(row: ResultRow, part: Mapping[str, Any], declared: Collection[str], who: str) -> ResultRow:
    """``row`` with ``part`` (field name -> value) in it; ``declared``: the fields ``who`` owns.

    A name that is a field of :class:`ResultRow` sets that field, any other goes in ``extra``. Raises
    :class:`UndeclaredPartError` for a name not in ``declared``, and
    :class:`~diag.core.schema.BundleFormatError` for a value of the wrong type."""
    undeclared = sorted(set(part) - set(declared))
    if undeclared:
        raise UndeclaredPartError(f"{who} returned {', '.join(undeclared)} for the step's row, which it does not "
                                  f"declare as its own (row_fields: {', '.join(sorted(declared)) or 'none'})")
    return ResultRow.from_dict({**row.to_dict(), **part}, f"{who}'s part of the step's row")
