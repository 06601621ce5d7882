"""Statement rules: full_scan (a statement reads far more rows than it returns) and statement_hotspot.

Both read a step's statement digests (results.json ``statements``, written by
:mod:`collectors.statements`); a step without them gives no finding.

Impact: the share of the clients' time the statement held the server,
``server time in the window / (window x clients)``: in a closed loop each
client waits for its statement, so this is the part of transaction time the
statement explains (capped at 1).
"""

from __future__ import annotations

from collectors.statements import explainable
from diag.core.bundle import Bundle
from diag.core.schema import BundleFormatError, StatementStat, StepStatements
from reports.model.steps import Finding, Step, num, pct, steps

# A statement reading 100 rows per row it returns, and at least 1,000 rows per call, scans far more than it
# needs (an index lookup reads about one; a range of 100 rows reads about 100); smaller tables are cheap to scan.
FULL_SCAN_RATIO = 100.0
MIN_EXAMINED_PER_CALL = 1000.0
# One statement holding half the statement time of a step that runs several: the one to look at first.
HOTSPOT_SHARE = 0.5
MIN_STATEMENTS = 2
TEXT_CHARS = 160


def _statements(step: Step) -> StepStatements | None:
    try:
        return step.row.step_statements
    except BundleFormatError:
        return None


def _window(st: StepStatements, step: Step) -> float:
    if st.t0 is not None and st.t1 is not None and st.t1 > st.t0:
        return st.t1 - st.t0
    return step.duration


def client_share(s: StatementStat, st: StepStatements, step: Step) -> float:
    """Share of the clients' time the server spent on ``s`` (see the module docstring)."""
    return min(1.0, s.total_ms / 1000.0 / max(_window(st, step) * max(step.clients, 1), 1e-9))


def _short(text: str) -> str:
    t = " ".join(text.split())
    return t if len(t) <= TEXT_CHARS else t[: TEXT_CHARS - 1] + "…"


def _scan_node(s: StatementStat) -> tuple[str, str]:
    """(table, plan node) of the statement's first full scan; from its plan, else unknown."""
    if s.plan is not None and s.plan.full_scans:
        n = s.plan.full_scans[0]
        return n.table, n.label
    return "", ""


def full_scan(b: Bundle) -> list[Finding]:
    """A statement examining far more rows than it returns, with a plan (or the server's count) of a full scan."""
    out: list[Finding] = []
    for step in steps(b):
        st = _statements(step)
        if st is None:
            continue
        for s in st.statements:
            ratio = s.examined_per_row
            if ratio is None or s.rows_examined is None or not s.calls or ratio < FULL_SCAN_RATIO \
                    or s.rows_examined / s.calls < MIN_EXAMINED_PER_CALL:
                continue
            table, node = _scan_node(s)
            if not node and not s.no_index_used:
                continue  # many rows, but neither the plan nor the server says it scanned a table
            share = client_share(s, st, step)
            where = f" ({node})" if node else " (no index used)"
            out.append(step.finding(
                "full_scan", "warning",
                f"Full scan{where}: {num(ratio)} rows examined per row returned by {_short(s.text)!r}",
                {"statement": _short(s.text), "table": table or "not in a plan (no plan for this statement)",
                 "plan_node": node or None, "plan_method": s.plan.method if s.plan else None,
                 "calls": s.calls, "rows_examined": s.rows_examined, "rows_returned": s.rows,
                 "examined_per_call": num(s.rows_examined / s.calls), "examined_per_row": num(ratio),
                 "examined_from": s.examined_from, "share_of_statement_time": pct(st.share(s)),
                 "share_of_client_time": pct(share), "source": st.source},
                f"Give {table or 'the table'} an index on the columns {_short(s.text)!r} filters on, or "
                "rewrite the statement to use one; check the plan in the statements section.",
                share, statement=s.key))
    return out


def statement_hotspot(b: Bundle) -> list[Finding]:
    """One statement (not transaction control) holding most of the statement server time of a step that runs
    several."""
    out: list[Finding] = []
    for step in steps(b):
        st = _statements(step)
        if st is None or st.statements_seen < MIN_STATEMENTS or st.total_ms <= 0:
            continue
        # BEGIN / COMMIT are not statements to tune (a commit's time is its log flush: commit_flush_bound).
        top = next((s for s in st.statements if explainable(s.text)), None)
        if top is None:
            continue
        share = st.share(top)
        if share < HOTSPOT_SHARE:
            continue
        out.append(step.finding(
            "statement_hotspot", "info",
            f"One statement holds {pct(share)} of the server's statement time: {_short(top.text)!r}",
            {"statement": _short(top.text), "share_of_statement_time": pct(share), "calls": top.calls,
             "total_ms": num(top.total_ms), "mean_ms": num(top.mean_ms, 3),
             "statements_in_step": st.statements_seen,
             "next": next((_short(s.text) for s in st.statements if s is not top), None), "share_of_client_time": pct(client_share(top, st, step)),
             "source": st.source},
            "Tune this statement first (its plan is in the statements section): the others together hold "
            f"{pct(1 - share)}.", client_share(top, st, step), statement=top.key))
    return out
