"""The verdict at the top of the page: per target what limits it and what would move it, per compared pair why
one is slower, each with the few numbers that carry the argument.

Pure functions of what the report already derived (:func:`reports.model.summary.target_verdicts` with its step's
``limit`` finding, and the comparison items of :func:`reports.model.compare.compare` with their sentences); nothing
here analyses the bundle again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from diag.core.schema import ResultRow
from reports.views.accounting_view import step_limit_finding
from reports.views.evidence_words import because_and_advice, key_figures
from reports.views.navigation import step_id

# Sentences of a pair's explanation the verdict repeats: the gap, then its largest cause (the rest are in
# "Why is one slower").
PAIR_SENTENCES = 2


def step_limits(label: str, results: Sequence[ResultRow], findings: list[dict[str, Any]]
                ) -> list[dict[str, Any]]:
    """Each step of a target in run order with its throughput and the short name of its limit (the limit
    finding's title up to its colon: "Round trips", "Log device"), linked to the step's time accounting."""
    out = []
    for r in results:
        if r.target != label:
            continue
        f = step_limit_finding(findings, label, r.workload, r.clients or 1)
        out.append({"workload": r.workload, "clients": r.clients, "tps": r.tps,
                    "limit": str(f.get("title")).split(":", 1)[0] if f else None,
                    "href": step_id("acc", None, r.workload, r.clients)})
    return out


def target_lines(verdicts: list[dict[str, Any]], results: Sequence[ResultRow] | None = None,
                 findings: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Per target: its best step, the limit there (title, because, what would move it) and that limit's figures;
    with ``results`` and ``findings``, every step's limit in a line (:func:`step_limits`)."""
    out = []
    for v in verdicts:
        entry = dict(v)
        steps = step_limits(str(v.get("label")), results or [], findings or [])
        entry["steps"] = steps if len(steps) > 1 else []
        lim = v.get("limit")
        if lim:
            because, advice = because_and_advice(str(lim.get("advice") or ""))
            entry["because"], entry["move"] = because, advice
            entry["figures"] = key_figures(lim, 3)
        out.append(entry)
    return out


def pair_lines(comparisons: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per pair of compared sides: the step with the most clients explained in a sentence or two, and the other
    steps' ratios in a line (so a pair whose order flips between client counts says so)."""
    by_pair: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in comparisons:
        key = tuple(sorted((str(e.get("fast_name")), str(e.get("slow_name")))))
        by_pair.setdefault((key[0], key[1]), []).append(e)
    out = []
    for (a, b), items in sorted(by_pair.items()):
        items.sort(key=lambda e: (str(e.get("workload")), int(e.get("clients") or 0)))
        main = max(items, key=lambda e: int(e.get("clients") or 0))
        sig = (main.get("significance") or {}).get("verdict")
        out.append({
            "a": a, "b": b, "workload": main.get("workload"), "clients": main.get("clients"),
            "fast": main.get("fast_name"), "slow": main.get("slow_name"),
            "sentences": list(main.get("sentences") or [])[:PAIR_SENTENCES],
            "figures": [("transactions/s", main.get("fast_tps"), main.get("slow_tps")),
                        ("p95 latency, ms", main.get("fast_p95_ms"), main.get("slow_p95_ms")),
                        ("mean transaction, µs", main.get("fast_wall_us"), main.get("slow_wall_us"))],
            "significance": sig,
            "others": [{"workload": e.get("workload"), "clients": e.get("clients"), "fast": e.get("fast_name"),
                        "ratio": e.get("tps_ratio")} for e in items if e is not main],
        })
    return out
