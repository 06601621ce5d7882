"""results.json ``results[].statements``: the statement digests of one step, with plans of the top statements.

Written by the statement sources (:mod:`collectors.statements`) into the row of
the step they watched. Counters are the increase over the step's measured
window (snapshots at its start and end), dbdiag's own statements left out:

* ``total_ms``: server time of the statement (PostgreSQL ``total_exec_time``,
  MySQL/MariaDB ``SUM_TIMER_WAIT``), ms; ``rows``: rows returned or affected (PostgreSQL
  ``rows``; MySQL/MariaDB ``SUM_ROWS_SENT + SUM_ROWS_AFFECTED``: the same on both); ``rows_examined``: rows the server read for them (MySQL
  ``SUM_ROWS_EXAMINED``; PostgreSQL: the step's per-table tuple reads, ``tables``,
  attributed to the statements whose plan scans that table, ``examined_from``
  says which);
* PostgreSQL block counts (``shared_blks_hit`` ... ``temp_blks_written``, 8 KiB
  blocks); MySQL ``no_index_used`` (executions that used no index).

``plan``: the server's plan of the statement (generic, or with parameters
substituted: ``method`` says), flattened depth first into :class:`PlanNode`;
the raw plan is a file under artifacts/ (``artifact``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from diag.core.schema.base import NUM, BundleFormatError, as_object, get_field, str_list, unknown_keys

_NODE_STR = ("node", "table", "index", "filter")


@dataclass(frozen=True)
class PlanNode:
    """One node of a plan: ``node`` ("Seq Scan", or MySQL's access type "ALL"), the table and index it reads,
    the planner's row estimate, its filter, and whether it reads the whole table (``full_scan``)."""

    depth: int = 0
    node: str = ""
    table: str = ""
    index: str = ""
    rows: float | None = None
    filter: str = ""
    full_scan: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"depth": self.depth, "node": self.node, "table": self.table, "index": self.index,
                "rows": self.rows, "filter": self.filter, "full_scan": self.full_scan}

    @classmethod
    def from_dict(cls, d: Any, where: str) -> PlanNode:
        d = as_object(d, where)
        return cls(depth=get_field(d, "depth", (int,), where, 0),
                   **{k: get_field(d, k, (str,), where, "") for k in _NODE_STR},
                   rows=get_field(d, "rows", NUM, where), full_scan=get_field(d, "full_scan", (bool,), where, False))

    @property
    def label(self) -> str:
        """``Seq Scan on dbdiag.sbtest1`` / ``ALL on sbtest1 (key k_1)``."""
        on = f" on {self.table}" if self.table else ""
        return f"{self.node}{on}" + (f" using {self.index}" if self.index else "")


@dataclass(frozen=True)
class StatementPlan:
    """A statement's plan: how it was obtained (``method``), its nodes, the raw plan's file, or why none."""

    method: str = ""  # "generic_plan" (PostgreSQL 16+), "generic_prepared" (<16), "parameters_substituted"
    nodes: tuple[PlanNode, ...] = ()
    artifact: str = ""  # relative path of the raw JSON plan in the bundle
    error: str = ""  # why there is no plan ("" when there is one)
    # why dbdiag did not ask for a plan ("" when it did): whose statement it is, or what the text is
    not_made: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "nodes": [n.to_dict() for n in self.nodes], "artifact": self.artifact,
                "error": self.error, "not_made": self.not_made}

    @classmethod
    def from_dict(cls, d: Any, where: str) -> StatementPlan:
        d = as_object(d, where)
        nodes = get_field(d, "nodes", (list,), where, [])
        return cls(method=get_field(d, "method", (str,), where, ""),
                   nodes=tuple(PlanNode.from_dict(n, f"{where}: nodes[{i}]") for i, n in enumerate(nodes)),
                   artifact=get_field(d, "artifact", (str,), where, ""), error=get_field(d, "error", (str,), where, ""),
                   not_made=get_field(d, "not_made", (str,), where, ""))

    @property
    def full_scans(self) -> tuple[PlanNode, ...]:
        """The nodes that read a whole table."""
        return tuple(n for n in self.nodes if n.full_scan)


_STMT_INT = ("calls", "rows", "rows_examined", "shared_blks_hit", "shared_blks_read", "shared_blks_dirtied",
             "shared_blks_written", "temp_blks_read", "temp_blks_written", "no_index_used")
_STMT_NUM = ("total_ms", "plan_ms")


@dataclass(frozen=True)
class StatementStat:
    """One statement's increase over a step (see the module docstring for each counter)."""

    key: str  # queryid|role (PostgreSQL) or digest|schema (MySQL/MariaDB)
    text: str = ""
    calls: int = 0
    total_ms: float = 0.0
    plan_ms: float | None = None
    rows: int | None = None
    rows_examined: int | None = None
    examined_from: str = ""  # "server" (MySQL counts it), "tables" (PostgreSQL: attributed from table tuples)
    shared_blks_hit: int | None = None
    shared_blks_read: int | None = None
    shared_blks_dirtied: int | None = None
    shared_blks_written: int | None = None
    temp_blks_read: int | None = None
    temp_blks_written: int | None = None
    no_index_used: int | None = None
    tables: tuple[str, ...] = ()  # tables its plan reads
    plan: StatementPlan | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def mean_ms(self) -> float:
        """Server time per call, ms."""
        return self.total_ms / self.calls if self.calls else 0.0

    @property
    def examined_per_row(self) -> float | None:
        """Rows examined per row returned (a statement returning none counts as returning one)."""
        if self.rows_examined is None or self.rows is None:
            return None
        return self.rows_examined / max(self.rows, 1)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {**dict(self.extra), "key": self.key, "text": self.text, "examined_from": self.examined_from,
                             "tables": list(self.tables)}
        d.update({k: getattr(self, k) for k in (*_STMT_INT, *_STMT_NUM) if getattr(self, k) is not None})
        d["calls"] = self.calls
        d["total_ms"] = self.total_ms
        if self.plan is not None:
            d["plan"] = self.plan.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str) -> StatementStat:
        d = as_object(d, where)
        plan = d.get("plan")
        kw: dict[str, Any] = {k: get_field(d, k, (int,), where) for k in _STMT_INT}
        kw.update({k: get_field(d, k, NUM, where) for k in _STMT_NUM})
        kw["calls"] = kw["calls"] or 0
        kw["total_ms"] = float(kw["total_ms"] or 0.0)
        return cls(key=get_field(d, "key", (str,), where, required=True), text=get_field(d, "text", (str,), where, ""),
                   examined_from=get_field(d, "examined_from", (str,), where, ""), tables=str_list(d, "tables", where),
                   plan=StatementPlan.from_dict(plan, f"{where}: plan") if plan is not None else None,
                   extra=unknown_keys(d, ("key", "text", "examined_from", "tables", "plan", *_STMT_INT, *_STMT_NUM)),
                   **kw)


_TABLE_INT = ("seq_scan", "seq_tup_read", "idx_scan", "idx_tup_fetch", "n_tup_ins", "n_tup_upd", "n_tup_del")


@dataclass(frozen=True)
class TableStat:
    """One table's increase over a step (PostgreSQL pg_stat_user_tables): scans and the tuples they read."""

    table: str  # schema.name
    seq_scan: int = 0
    seq_tup_read: int = 0
    idx_scan: int = 0
    idx_tup_fetch: int = 0
    n_tup_ins: int = 0
    n_tup_upd: int = 0
    n_tup_del: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, **{k: getattr(self, k) for k in _TABLE_INT}}

    @classmethod
    def from_dict(cls, d: Any, where: str) -> TableStat:
        d = as_object(d, where)
        return cls(table=get_field(d, "table", (str,), where, required=True),
                   **{k: get_field(d, k, (int,), where, 0) for k in _TABLE_INT})


@dataclass(frozen=True)
class StepStatements:
    """The statements of one step: where they come from, the window, the total and the top statements.

    ``total_ms``/``calls``/``statements_seen``: over every workload statement of the
    window (not only the top ones kept in ``statements``); ``own_excluded``: dbdiag's
    own statements left out; ``notes``: what is partial (other roles' statements not
    visible, a plan that failed...).
    """

    source: str = ""  # "pg_stat_statements" or "events_statements_summary_by_digest"
    t0: float | None = None  # Unix s: the snapshots' times
    t1: float | None = None
    total_ms: float = 0.0
    calls: int = 0
    statements_seen: int = 0
    own_excluded: int = 0
    statements: tuple[StatementStat, ...] = ()
    tables: tuple[TableStat, ...] = ()
    notes: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    _KNOWN = ("source", "t0", "t1", "total_ms", "calls", "statements_seen", "own_excluded", "statements", "tables",
              "notes")

    def share(self, s: StatementStat) -> float:
        """``s``'s share of the step's statement server time (0..1)."""
        return s.total_ms / self.total_ms if self.total_ms > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**dict(self.extra), "source": self.source, "t0": self.t0, "t1": self.t1, "total_ms": self.total_ms,
                "calls": self.calls, "statements_seen": self.statements_seen, "own_excluded": self.own_excluded,
                "statements": [s.to_dict() for s in self.statements], "tables": [t.to_dict() for t in self.tables],
                "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: Any, where: str = "statements") -> StepStatements:
        d = as_object(d, where)
        stmts = get_field(d, "statements", (list,), where, [])
        tables = get_field(d, "tables", (list,), where, [])
        total = get_field(d, "total_ms", NUM, where, 0.0)
        if total < 0:
            raise BundleFormatError(f"{where}: total_ms should not be negative, not {total!r}")
        return cls(source=get_field(d, "source", (str,), where, ""), t0=get_field(d, "t0", NUM, where),
                   t1=get_field(d, "t1", NUM, where), total_ms=float(total),
                   calls=get_field(d, "calls", (int,), where, 0),
                   statements_seen=get_field(d, "statements_seen", (int,), where, 0),
                   own_excluded=get_field(d, "own_excluded", (int,), where, 0),
                   statements=tuple(StatementStat.from_dict(s, f"{where}: statements[{i}]") for i, s in enumerate(stmts)),
                   tables=tuple(TableStat.from_dict(t, f"{where}: tables[{i}]") for i, t in enumerate(tables)),
                   notes=str_list(d, "notes", where), extra=unknown_keys(d, cls._KNOWN))
