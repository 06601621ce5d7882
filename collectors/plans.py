"""Plans as the servers print them (JSON), flattened into :class:`diag.core.schema.PlanNode` lists.

* PostgreSQL ``EXPLAIN (FORMAT JSON, VERBOSE)``: ``[{"Plan": {"Node Type", "Relation Name", "Schema",
  "Index Name", "Plan Rows", "Filter", "Plans": [...]}}]``; a ``Seq Scan`` reads the whole table.
* MySQL / MariaDB ``EXPLAIN FORMAT=JSON``: ``{"query_block": {...}}`` where every ``"table"`` object
  (under ``nested_loop``, ``ordering_operation``, subqueries...) has ``table_name``, ``access_type``,
  ``key``, ``rows`` (MySQL 8: ``rows_examined_per_scan``) and ``attached_condition``; access type
  ``ALL`` reads the whole table and ``index`` the whole of one index.

Both parsers take the decoded JSON and raise :class:`PlanFormatError` on a shape they do not know.
Tested on saved real plans in tests/data/plans/.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

from diag.core.errors import DiagError
from diag.core.schema import PlanNode, StatementPlan

_CONDITION_KEY = re.compile(r"cond|filter", re.IGNORECASE)  # attached_condition, "Index Cond", "Filter", ...
_NEAR = re.compile(r"(near ')(.*)(' at line \d+)", re.DOTALL)
_INPUT_SYNTAX = re.compile(r'((?:invalid input syntax|invalid input value) for [^:]*: )"(.*?)"')
FILTER_CHARS = 200  # a filter is shown, not parsed: enough to recognise it
PG_FULL_SCANS = frozenset({"Seq Scan"})
MY_FULL_SCANS = frozenset({"ALL", "index"})


class PlanFormatError(DiagError):
    """A plan does not have the shape this parser knows."""


def without_literals(plan: StatementPlan, raw: Any, statement_text: Callable[[str], str]) -> tuple[StatementPlan, Any]:
    """A plan whose conditions quote no literal: ``statement_text`` (CollectorContext.statement_text) applied to
    each node's filter and to every condition or filter of the raw plan (a plan of a sampled MySQL statement
    shows its constants: ``attached_condition`` "(`t`.`id` = 42)")."""
    def walk(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {k: statement_text(v) if isinstance(v, str) and _CONDITION_KEY.search(k) else walk(v)
                    for k, v in obj.items()}
        return [walk(v) for v in obj] if isinstance(obj, list) else obj
    nodes = tuple(dataclasses.replace(n, filter=statement_text(n.filter)) for n in plan.nodes)
    return dataclasses.replace(plan, nodes=nodes), walk(raw)


def error_without_literals(message: str, statement_text: Callable[[str], str]) -> str:
    """A server's error about a statement, its quotes of the statement as fingerprints: MySQL's ``near '...'
    at line N`` and PostgreSQL's ``invalid input syntax for type T: "..."`` quote the text and its values."""
    message = _NEAR.sub(lambda m: f"{m.group(1)}{statement_text(m.group(2))}{m.group(3)}", message)
    return _INPUT_SYNTAX.sub(lambda m: m.group(1) + statement_text(f"'{m.group(2)}'").replace("'", '"'), message)


def decode(text: Any) -> Any:
    """A plan as the driver returned it (text, bytes, or already decoded) as JSON values."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8", "replace")
    if isinstance(text, str):
        try:
            return json.loads(text)
        except ValueError as e:
            raise PlanFormatError(f"plan is not JSON: {e}") from None
    return text


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def pg_plan_nodes(plan: Any) -> list[PlanNode]:
    """The nodes of a PostgreSQL JSON plan, depth first."""
    plan = decode(plan)
    if isinstance(plan, list) and plan and isinstance(plan[0], dict):
        plan = plan[0]
    if not isinstance(plan, dict) or not isinstance(plan.get("Plan"), dict):
        raise PlanFormatError("PostgreSQL plan without a top 'Plan' object")
    out: list[PlanNode] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        kind = str(node.get("Node Type") or "")
        rel = str(node.get("Relation Name") or "")
        schema = str(node.get("Schema") or "")
        table = f"{schema}.{rel}" if schema and rel else rel
        cond = node.get("Filter") or node.get("Index Cond") or ""
        out.append(PlanNode(depth=depth, node=kind, table=table, index=str(node.get("Index Name") or ""),
                            rows=_num(node.get("Plan Rows")), filter=str(cond)[:FILTER_CHARS],
                            full_scan=kind in PG_FULL_SCANS and bool(rel)))
        for child in node.get("Plans") or []:
            if isinstance(child, dict):
                walk(child, depth + 1)

    walk(plan["Plan"], 0)
    return out


def _my_tables(obj: Any, depth: int) -> Iterator[tuple[int, dict[str, Any]]]:
    """Every ``table`` object of a MySQL JSON plan with its nesting depth."""
    if isinstance(obj, dict):
        t = obj.get("table")
        if isinstance(t, dict) and "table_name" in t:
            yield depth, t
        for k, v in obj.items():
            yield from _my_tables(v, depth + (1 if k in ("nested_loop", "query_block", "subqueries") else 0))
    elif isinstance(obj, list):
        for v in obj:
            yield from _my_tables(v, depth)


def my_plan_nodes(plan: Any) -> list[PlanNode]:
    """The table accesses of a MySQL / MariaDB JSON plan, in the order the plan lists them."""
    plan = decode(plan)
    if not isinstance(plan, dict) or "query_block" not in plan:
        raise PlanFormatError("MySQL plan without a 'query_block'")
    out: list[PlanNode] = []
    for depth, t in _my_tables(plan, 0):
        access = str(t.get("access_type") or "")
        rows = _num(t.get("rows")) if "rows" in t else _num(t.get("rows_examined_per_scan"))
        out.append(PlanNode(depth=max(depth - 1, 0), node=access, table=str(t.get("table_name") or ""),
                            index=str(t.get("key") or ""), rows=rows,
                            filter=str(t.get("attached_condition") or "")[:FILTER_CHARS],
                            full_scan=access in MY_FULL_SCANS))
    return out
