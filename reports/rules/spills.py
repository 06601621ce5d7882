"""temp_spill: sorts, hashes and temporary tables that outgrew their memory and went to temporary files.

Evidence from the server's own counters, which every server has without changes: PostgreSQL's
pg_stat_database ``temp_files`` / ``temp_bytes`` of the target's database (``pg_stats``), MySQL/MariaDB's
``Created_tmp_disk_tables`` and ``Sort_merge_passes`` (``my_status``); the engine names its counters
(:attr:`diag.core.engines.Engine.spill_counters`). Counted from the sample before the step to the one after it, so
a spill of the step's last second is not lost (:func:`reports.rules.base.counter_around`); the counters are
server-wide (MySQL) or database-wide (PostgreSQL), so another session's spills count too: the evidence says so.

Where statement digests count temporary blocks (pg_stat_statements), the statement that spilled most is named
and the finding's impact is its share of the transaction's time (its server time per transaction over the mean
transaction); without digests the impact is that of a condition (:data:`reports.rules.cpu.CONDITION_WEIGHT`
times the share of transactions that spilled, at most 1), and the evidence says the spill was not timed.
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle
from diag.core.schema import BundleFormatError, StatementStat
from reports.model.steps import Finding, Step, num, steps
from reports.rules.base import counter_around
from reports.rules.cpu import CONDITION_WEIGHT

# One spill in ten transactions, and at least a handful in the step: a sort that spills now and then is not
# a cause, one that spills in a good share of the transactions is (each spill writes and reads a file).
MIN_SPILLS_PER_TXN = 0.1
MIN_SPILLS = 5


def temp_spill(b: Bundle) -> list[Finding]:
    """A finding per step whose transactions spill to temporary files (see the module docstring)."""
    out: list[Finding] = []
    for step in steps(b):
        f = _step_spills(b, step)
        if f is not None:
            out.append(f)
    return out


def _step_spills(b: Bundle, step: Step) -> Finding | None:
    eng, txn = step.engine, step.transactions
    if not eng.spill_counters or txn <= 0:
        return None
    counts = {words: counter_around(b, step, eng.stats_series, key) for key, words in eng.spill_counters}
    seen = {w: c for w, c in counts.items() if c is not None}
    total = sum(seen.values())
    if not seen or total < MIN_SPILLS or total / txn < MIN_SPILLS_PER_TXN:
        return None
    ev: dict[str, Any] = {"source": f"{eng.stats_series} ({', '.join(k for k, _w in eng.spill_counters)}), "
                                    "counted from the sample before the step to the one after it; "
                                    "these counters include every session's spills, not only the workload's",
                          **{f"{w} per transaction": num(c / txn, 2) for w, c in seen.items()},
                          **{w: round(c) for w, c in seen.items()}, "transactions": txn}
    spilled_bytes = counter_around(b, step, eng.stats_series, eng.spill_bytes_counter) \
        if eng.spill_bytes_counter else None
    if spilled_bytes is not None:
        ev["temporary bytes per transaction"] = round(spilled_bytes / txn)
    share = min(1.0, total / txn)
    impact = CONDITION_WEIGHT * share
    lead = _spilling_statement(step)
    wall_us = step.clients * step.duration * 1e6 / txn
    if lead is not None:
        s, per_txn_us = lead
        ev["statement"] = s.text[:300]
        ev["statement temporary blocks per call"] = num(((s.temp_blks_read or 0) + (s.temp_blks_written or 0))
                                                        / max(s.calls, 1), 1)
        ev["statement server time per transaction (µs)"] = num(per_txn_us)
        impact = min(1.0, per_txn_us / wall_us)
        ev["impact_from"] = "the spilling statement's server time over the mean transaction's time"
    else:
        ev["impact_from"] = ("not timed: no statement digest counts temporary blocks here, so the rank is that "
                             "of a condition (half the share of transactions that spilled)")
    what = " and ".join(f"{num(c / txn, 2)} {w}" for w, c in seen.items())
    title = f"Sorts or hashes spill to disk: {what} per transaction"
    advice = (f"Give the spilling operation more memory ({eng.spill_settings}), or make it smaller (an index "
              "that returns rows in order instead of a sort, fewer rows before the sort or the grouping).")
    return step.finding("temp_spill", "warning", title, ev, advice, impact)


def _spilling_statement(step: Step) -> tuple[StatementStat, float] | None:
    """The step's statement with the most temporary blocks and its server time per transaction (µs)."""
    try:
        st = step.row.step_statements
    except BundleFormatError:
        return None
    if st is None:
        return None
    spilling = [s for s in st.statements if (s.temp_blks_read or 0) + (s.temp_blks_written or 0) > 0]
    if not spilling:
        return None
    s = max(spilling, key=lambda x: (x.temp_blks_read or 0) + (x.temp_blks_written or 0))
    window = (st.t1 - st.t0) if st.t0 is not None and st.t1 is not None and st.t1 > st.t0 else step.duration
    txns = step.transactions * window / step.duration if step.duration > 0 else 0
    return (s, s.total_ms * 1000.0 / txns) if txns > 0 else None
