"""table_scan: transactions that read whole tables, from the server's table or handler counters alone.

:func:`reports.rules.statements.full_scan` names the statement from its digest; most servers have no digests
(pg_stat_statements not loaded, performance_schema off as Debian ships MariaDB). This rule needs none:

* PostgreSQL: the step's ``table_scans`` (pg_stat_user_tables at the step's start and end,
  :mod:`collectors.pg.tables`): a table read by sequential scans in most transactions, many rows each time,
  named with its scans and rows per transaction;
* MySQL/MariaDB: ``Handler_read_rnd_next`` (rows read by table scans) and ``Select_scan`` (joins that scanned
  their first table) of ``my_status`` per transaction: the table cannot be named from them (server-wide
  counters; their per-table kin need performance_schema or userstat), and the evidence says what would name it.

A step whose statements already gave full_scan is left to it. Impact: untimed, a condition's rank
(:data:`reports.rules.cpu.CONDITION_WEIGHT`), with the step's server CPU share of the transaction as the
upper bound of what the scans can cost in the evidence.
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle
from diag.core.schema import BundleFormatError, TableStat
from reports.model.steps import Finding, Step, num, steps
from reports.rules.base import counter_around
from reports.rules.cpu import CONDITION_WEIGHT
from reports.rules.statements import MIN_EXAMINED_PER_CALL, full_scan

# A sequential scan in one transaction of two, reading 1,000 rows or more per scan (full_scan's per-call
# floor): small lookup tables are cheap to scan, and a scan now and then (a report, autovacuum's ANALYZE
# sampling does not count: it is not a seq_scan) is not the workload's.
MIN_SCANS_PER_TXN = 0.5
MIN_ROWS_PER_SCAN = MIN_EXAMINED_PER_CALL


def table_scan(b: Bundle) -> list[Finding]:
    """A finding per step (and table, where known) that scans whole tables (see the module docstring)."""
    named = {(f.target, f.workload, f.clients) for f in full_scan(b)}
    out: list[Finding] = []
    for step in steps(b):
        if step.key in named or step.transactions <= 0:
            continue
        if step.row.table_scans is not None:
            out.extend(_tables(step))
        elif step.engine.scan_counters:
            f = _handler(b, step)
            if f is not None:
                out.append(f)
    return out


def _advice(what: str) -> str:
    return (f"Give {what} an index on the columns the workload's statements filter on (or make them filter on an "
            "indexed one); a statement digest names the statement: see the statements section's hint.")


def _tables(step: Step) -> list[Finding]:
    out: list[Finding] = []
    scans = step.row.table_scans or {}
    span, tps = (scans.get("t0"), scans.get("t1")), step.row.tps
    nums = [float(x) for x in span if isinstance(x, (int, float))]
    if tps is None or len(nums) < 2:
        return out
    t0, t1 = nums
    if t1 <= t0 or tps <= 0:
        return out
    txn = tps * (t1 - t0)  # the transactions of the snapshots' span (it holds the warm-up and the end)
    for raw in scans.get("tables") or []:
        try:
            t = TableStat.from_dict(raw, "results.json table_scans")
        except BundleFormatError:
            continue
        if t.seq_scan <= 0 or t.seq_scan / txn < MIN_SCANS_PER_TXN or t.seq_tup_read / t.seq_scan < MIN_ROWS_PER_SCAN:
            continue
        ev: dict[str, Any] = {
            "source": "pg_stat_user_tables at the step's start and end (no statement digest needed), per "
                      "transaction of that span (the step's rate x its length)",
            "table": t.table, "sequential scans per transaction": num(t.seq_scan / txn, 2),
            "rows read per sequential scan": num(t.seq_tup_read / t.seq_scan),
            "rows read by sequential scans per transaction": num(t.seq_tup_read / txn),
            "index scans per transaction": num(t.idx_scan / txn, 2),
            "impact_from": "not timed without a statement digest: ranked as a condition"}
        title = (f"Full scans of {t.table}: {num(t.seq_scan / txn, 2)} sequential scans per transaction, "
                 f"{num(t.seq_tup_read / t.seq_scan)} rows each")
        out.append(step.finding("table_scan", "warning", title, ev, _advice(t.table),
                                CONDITION_WEIGHT * min(1.0, t.seq_scan / txn), table=t.table))
    return out


def _handler(b: Bundle, step: Step) -> Finding | None:
    txn = step.transactions
    rows_key, scans_key = step.engine.scan_counters
    rows = counter_around(b, step, step.engine.stats_series, rows_key)
    scans = counter_around(b, step, step.engine.stats_series, scans_key)
    if rows is None or scans is None or scans <= 0:
        return None
    if scans / txn < MIN_SCANS_PER_TXN or rows / scans < MIN_ROWS_PER_SCAN:
        return None
    ev = {"source": f"{step.engine.stats_series}: Handler_read_rnd_next and Select_scan, server-wide, counted "
                    "from the sample before the step to the one after it (other sessions' scans count too)",
          "rows read by table scans per transaction": num(rows / txn),
          "scans per transaction": num(scans / txn, 2), "rows per scan": num(rows / scans),
          "table": "not known: these counters are server-wide; performance_schema "
                   "(table_io_waits_summary_by_table, statement digests) or userstat=1 would name it",
          "impact_from": "not timed without a statement digest: ranked as a condition"}
    title = f"Full table scans: {num(scans / txn, 2)} per transaction, {num(rows / scans)} rows each"
    return step.finding("table_scan", "warning", title, ev, _advice("the scanned table"),
                        CONDITION_WEIGHT * min(1.0, scans / txn))
