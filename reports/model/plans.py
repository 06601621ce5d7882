"""Statements of two steps lined up, and where their plans differ: what the comparison and the report share.

Reads results.json rows' ``statements`` (:class:`diag.core.schema.StepStatements`). Two steps' statements meet
by normalised text (:func:`normalise`: placeholders ``$1``/``?``, quoting, spacing and case made alike, so
PostgreSQL and MySQL spellings of one statement meet). A statement whose plans read a table differently on the
two sides (a full scan against an index lookup) is said by :func:`plan_difference`: in the comparison's
sentences (:mod:`reports.model.compare`) and the report's Statements A vs B
(:mod:`reports.views.statements_view`).
"""

from __future__ import annotations

import re
from diag.core.schema import BundleFormatError, ResultRow, StatementStat, StepStatements

# Placeholders and literals: PostgreSQL's normalised text has $n where MySQL's prepared text keeps a constant.
_PARAM = re.compile(r"\$\d+|\?|'(?:[^']|'')*'|(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """A statement text made comparable across engines and parameter styles."""
    t = _PARAM.sub("?", text.replace("`", "").replace('"', ""))
    t = _SPACE.sub(" ", t).strip().rstrip(";").lower()
    return re.sub(r"\s*([.,()=])\s*", r"\1", t)


def typed_statements(row: ResultRow) -> StepStatements | None:
    """A result row's statements record, typed (None when it has none or it does not read)."""
    try:
        return row.step_statements
    except BundleFormatError:
        return None


def window_s(st: StepStatements, row: ResultRow) -> float:
    """Seconds the digest snapshots span (the step's measured time when they do not say)."""
    if st.t0 is not None and st.t1 is not None and st.t1 > st.t0:
        return st.t1 - st.t0
    return float(row.measured_s or 0.0)


def per_txn_us(s: StatementStat, st: StepStatements, row: ResultRow) -> float | None:
    """Server time of ``s`` per transaction of the step, µs."""
    tps = row.tps
    txns = float(tps) * window_s(st, row) if tps is not None else 0.0
    return s.total_ms * 1000.0 / txns if txns > 0 else None


def by_text(st: StepStatements, row: ResultRow) -> dict[str, tuple[StatementStat, float]]:
    """A step's statements by normalised text: (the first statement, server µs per transaction of all of them)."""
    out: dict[str, tuple[StatementStat, float]] = {}
    for s in st.statements:
        us = per_txn_us(s, st, row)
        if us is not None:
            k = normalise(s.text)
            prev = out.get(k)
            out[k] = (s, us + (prev[1] if prev else 0.0))
    return out


def _access(s: StatementStat | None) -> tuple[str, ...] | None:
    """How a statement's plan reads its tables, engine-neutral: per table, "full scan" or "index"; None when
    there is no plan to tell."""
    if s is None or s.plan is None or s.plan.error or s.plan.not_made or not s.plan.nodes:
        return None
    return tuple(sorted(f"{n.table.rsplit('.', 1)[-1]}: {'full scan' if n.full_scan else 'index'}"
                        for n in s.plan.nodes if n.table))


def plan_difference(text: str, a: str, sa: StatementStat | None, b: str, sb: StatementStat | None) -> str:
    """A sentence when the same statement's plans read a table differently on the two sides ("" otherwise)."""
    pa, pb = _access(sa), _access(sb)
    if pa is None or pb is None or pa == pb or not pa or not pb:
        return ""
    return (f"The plans differ for {text[:100]!r}: {a} reads {', '.join(pa)}; {b} reads {', '.join(pb)}")


def plan_differences(ra: ResultRow, a: str, rb: ResultRow, b: str) -> list[str]:
    """One sentence (:func:`plan_difference`) per statement both steps ran whose plans read a table differently,
    in A's order; [] when a side recorded no statements or no plans. For the comparison's own sentences: a full
    scan against a key lookup of the same statement is a cause of the gap that no timer comparison states."""
    sa = typed_statements(ra) if ra.statements is not None else None
    sb = typed_statements(rb) if rb.statements is not None else None
    if sa is None or sb is None:
        return []
    by_a, by_b = by_text(sa, ra), by_text(sb, rb)
    said = (plan_difference(s.text, a, s, b, by_b[k][0]) for k, (s, _us) in by_a.items() if k in by_b)
    return [x for x in said if x]
