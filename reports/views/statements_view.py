"""The report's statement section: per target and step, the top statements, their plans, and A vs B.

Reads results.json rows' ``statements`` (:class:`diag.core.schema.StepStatements`) and
run.json's probe of each target's statement source (why a target has none).
Per-transaction figures divide a statement's server time over the digest window
by the transactions of that window (the step's tps x the window), so a window a
little shorter than the step (MySQL's end snapshot) does not change them.

A vs B: two targets that ran the same workload at the same client count have
their statements lined up by normalised text (:func:`normalise`: placeholders
``$1``/``?``, quoting, spacing and case made alike, so PostgreSQL and MySQL
spellings of one statement meet); the statement whose server time per
transaction differs most, in the direction of the gap, is named.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from diag.core.bundle import Bundle
from diag.core.schema import ResultRow, StatementStat, StepStatements
from diag.core.engines import Engine
from reports.model.accounting import accounts
from reports.model.plans import by_text, normalise, per_txn_us, plan_difference, typed_statements, window_s
from reports.model.steps import engine_of

SOURCE = "statements"  # the sources' name: run.json collectors["statements--<label>"]


def _plan_view(s: StatementStat) -> dict[str, Any] | None:
    p = s.plan
    if p is None:
        return None
    return {"method": p.method, "error": p.error, "artifact": p.artifact, "not_made": p.not_made,
            "nodes": [{"depth": n.depth, "label": n.label, "rows": n.rows, "filter": n.filter,
                       "full_scan": n.full_scan} for n in p.nodes]}


def _stmt_view(s: StatementStat, st: StepStatements, row: ResultRow) -> dict[str, Any]:
    return {"text": s.text, "calls": s.calls, "total_ms": s.total_ms, "mean_ms": s.mean_ms, "share": st.share(s),
            "per_txn_us": per_txn_us(s, st, row), "rows": s.rows, "rows_examined": s.rows_examined,
            "examined_per_row": s.examined_per_row, "examined_from": s.examined_from,
            "blocks_hit": s.shared_blks_hit, "blocks_read": s.shared_blks_read,
            "temp_blocks": (s.temp_blks_read or 0) + (s.temp_blks_written or 0)
            if s.temp_blks_read is not None or s.temp_blks_written is not None else None,
            "no_index_used": s.no_index_used, "plan": _plan_view(s)}


def _steps(b: Bundle, label: str) -> Iterator[tuple[ResultRow, StepStatements]]:
    for row in b.rows:
        if row.target == label and row.statements is not None:
            st = typed_statements(row)
            if st is not None:
                yield row, st


def statement_sections(b: Bundle) -> list[dict[str, Any]]:
    """One entry per target: its steps' top statements, or why it has none (the source's probe)."""
    out: list[dict[str, Any]] = []
    for t in b.run.get("targets") or []:
        label = str(t.get("label") or "")
        probe = (b.run.get("collectors") or {}).get(f"{SOURCE}--{label}") or {}
        steps = [{"workload": row.workload, "clients": row.clients, "source": st.source,
                  "total_ms": st.total_ms, "calls": st.calls, "seen": st.statements_seen,
                  "own_excluded": st.own_excluded, "window_s": window_s(st, row), "notes": list(st.notes),
                  "statements": [_stmt_view(s, st, row) for s in st.statements],
                  "tables": [x.to_dict() for x in st.tables]}
                 for row, st in _steps(b, label)]
        off = "" if steps else (probe.get("reason") or ("" if probe else "no statement source ran (--no-collect, or a bundle of an older dbdiag)"))
        dbms = engine_of(b, label)
        cost = (f"dbdiag started this server with statement instrumentation "
                f"({', '.join(sorted({k for k, _v, _o in dbms.instrumentation}))}): {dbms.instrumentation_cost}; "
                "this report's figures were measured with it on") if t.get("throwaway") and steps and dbms.instrumentation_cost else ""
        out.append({"target": label, "engine": dbms.title, "steps": steps, "off": off, "cost": cost,
                    "hint": probe.get("hint", "") if off else "", "missing": probe.get("missing", [])})
    return out


def _plan_text(s: StatementStat | None) -> str:
    if s is None or s.plan is None:
        return ""
    if s.plan.not_made:
        return f"plan not made: {s.plan.not_made}"
    return s.plan.error or "; ".join(n.label for n in s.plan.nodes if n.table or n.depth == 0)


def _wall_us(b: Bundle) -> dict[tuple[str, str, int | None], float]:
    """Each accounted row's mean transaction wall time (µs), keyed by its step: the accounting's own figure."""
    return {step.row.key: acc.wall_us_per_txn for step, acc in accounts(b)}


def compare_statements(b: Bundle) -> list[dict[str, Any]]:
    """Per (workload, clients) run by two or more targets with statements: the first two side by side."""
    groups: dict[tuple[str, int], list[tuple[ResultRow, StepStatements]]] = {}
    for t in b.run.get("targets") or []:
        for row, st in _steps(b, str(t.get("label") or "")):
            groups.setdefault((row.workload, row.clients or 0), []).append((row, st))
    walls = _wall_us(b) if any(len(v) > 1 for v in groups.values()) else {}
    out = []
    for (workload, clients), sides in groups.items():
        if len(sides) < 2:
            continue
        (ra, sa), (rb, sb) = sides[:2]
        wa, wb = walls.get(ra.key), walls.get(rb.key)
        out.append(compare_pair(workload, clients, ra, sa, rb, sb,
                                scopes=(engine_of(b, ra.target, ra), engine_of(b, rb.target, rb)),
                                txn_gap_us=wb - wa if wa is not None and wb is not None else None))
    return out


def step_statements(b: Bundle, target: str, workload: str, clients: int
                    ) -> tuple[ResultRow, StepStatements] | None:
    """One step's result row and statements, if the bundle recorded statements for it."""
    for row, st in _steps(b, target):
        if row.workload == workload and (row.clients or 0) == clients:
            return row, st
    return None


def _per_call(v: float | None, calls: int) -> float | None:
    return v / calls if v is not None and calls > 0 else None


def compare_pair(workload: str, clients: int, ra: ResultRow, sa: StepStatements, rb: ResultRow,
                 sb: StepStatements, scopes: tuple[Engine, Engine] | None = None,
                 txn_gap_us: float | None = None) -> dict[str, Any]:
    """One step of two targets: statements lined up, the gap per transaction and the statement explaining most.

    ``scopes``: the two sides' engines; their statement timers are subtracted only when they time the same span
    (:attr:`Engine.statement_timer_scope`), else the rows are shown side by side with what each timer covers
    and the units that mean the same on both (calls per transaction, rows per call). ``txn_gap_us``: the time
    accounting's gap of the mean transaction (b - a, µs); a statement-time gap larger than it is said to be so
    and never given as a share of the transaction gap.
    """
    a, bb = by_text(sa, ra), by_text(sb, rb)
    comparable = scopes is None or scopes[0].statement_timer_scope == scopes[1].statement_timer_scope
    rows: list[dict[str, Any]] = []
    for k in dict.fromkeys([*a, *bb]):
        sa_, ua = a.get(k, (None, 0.0))
        sb_, ub = bb.get(k, (None, 0.0))
        s = sa_ or sb_
        assert s is not None
        rows.append({"text": s.text, "a_us": ua if sa_ else None, "b_us": ub if sb_ else None,
                     "diff_us": ub - ua if comparable else None,
                     "a_rows_per_call": _per_call(float(sa_.rows), sa_.calls) if sa_ and sa_.rows is not None else None,
                     "b_rows_per_call": _per_call(float(sb_.rows), sb_.calls) if sb_ and sb_.rows is not None else None,
                     "a_plan": _plan_text(sa_), "b_plan": _plan_text(sb_),
                     "plan_difference": plan_difference(s.text, ra.target, sa_, rb.target,
                                                        sb_)})
    base = {"workload": workload, "clients": clients, "a": ra.target, "b": rb.target,
            "comparable": comparable, "txn_gap_us": txn_gap_us, "rows": rows, "lead": None, "gap_us": None}
    if not comparable:
        assert scopes is not None
        slower = rb.target if (txn_gap_us or 0) > 0 else ra.target
        gap_words = (f"; the time accounting measures {slower}'s whole mean transaction {abs(txn_gap_us):.0f} µs "
                     "slower" if txn_gap_us is not None else "")
        base["sentence"] = (f"The two servers' statement timers cover different spans ({ra.target}: "
                            f"{scopes[0].statement_timer_text}; {rb.target}: {scopes[1].statement_timer_text}), "
                            f"so their statement times are shown side by side, not subtracted{gap_words}; "
                            "rows per call mean the same on both")
        return base
    gap = sum(r["diff_us"] for r in rows)
    rows.sort(key=lambda r: -abs(r["diff_us"]))
    lead = next((r for r in rows if r["diff_us"] * gap > 0), None)
    sentence = ""
    if lead is not None and gap:
        slower = rb.target if gap > 0 else ra.target
        sentence = (f"{slower} spends {abs(gap):.0f} µs more statement time per transaction in these statements; "
                    f"{lead['text'][:120]!r} explains {100 * lead['diff_us'] / gap:.0f}% of that statement-time "
                    f"difference ({(lead['a_us'] or 0):.0f} µs vs {(lead['b_us'] or 0):.0f} µs per transaction)")
        if txn_gap_us is not None and (txn_gap_us * gap <= 0 or abs(gap) > abs(txn_gap_us)):
            sentence += (f"; that is more than the whole transaction's measured gap ({txn_gap_us:+.0f} µs, b - a, "
                         "from the time accounting): statement timers also count time the accounting puts "
                         "elsewhere (waiting for a CPU, for locks), so read it as where the statements differ, "
                         "not as a share of the gap")
    base.update({"gap_us": gap, "rows": rows, "lead": lead, "sentence": sentence})
    return base
