"""History: a baseline set of runs against a contender set, per step, with its interval and significance.

``dbdiag compare BASE... --vs CONTENDER...``: the steps (workload, client count,
target) of every bundle of a set are pooled (their per-interval or per-repeat
throughput, :mod:`reports.model.significance`); each step both sets ran gets the
contender's change against the baseline, its interval and p-value, and
"significant" or "within noise". Steps pair by target label when the sets share
labels, else (one target a set, e.g. the same server renamed) by workload and
client count alone.
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle
from diag.core.schema import ResultRow
from diag.core.stats import median
from reports.model.compare import run_name, step_workload
from reports.model.significance import compare_rows

Key = tuple[str, str, int]  # target label, workload, clients


def _steps(bundles: list[Bundle]) -> dict[Key, list[tuple[Bundle, ResultRow]]]:
    out: dict[Key, list[tuple[Bundle, ResultRow]]] = {}
    for b in bundles:
        for r in b.rows:
            if r.server_lost or r.aborted or r.stuck or not r.tps:
                continue
            key = (r.target, step_workload(b, r.workload), r.clients or 1)
            out.setdefault(key, []).append((b, r))
    return out


def _pairs(base: dict[Key, Any], cont: dict[Key, Any]) -> list[tuple[Key, Key]]:
    shared = sorted(set(base) & set(cont))
    if shared:
        return [(k, k) for k in shared]
    if len({k[0] for k in base}) == 1 and len({k[0] for k in cont}) == 1:
        by_step = {(k[1], k[2]): k for k in cont}
        return [(k, by_step[(k[1], k[2])]) for k in sorted(base) if (k[1], k[2]) in by_step]
    return []


def compare_sets(baseline: list[Bundle], contender: list[Bundle]) -> list[dict[str, Any]]:
    """One item per step both sets ran: medians, the change with its interval, the verdict."""
    base, cont = _steps(baseline), _steps(contender)
    out = []
    for kb, kc in _pairs(base, cont):
        v = compare_rows(base[kb], cont[kc])
        out.append({"workload": kb[1], "clients": kb[2], "baseline_target": kb[0], "contender_target": kc[0],
                    "baseline_runs": sorted({run_name(b) for b, _ in base[kb]}),
                    "contender_runs": sorted({run_name(b) for b, _ in cont[kc]}),
                    "baseline_tps": median([float(r.tps or 0.0) for _, r in base[kb]]),
                    "contender_tps": median([float(r.tps or 0.0) for _, r in cont[kc]]),
                    "significance": v.to_dict() if v else None})
    return out


def format_sets(items: list[dict[str, Any]]) -> str:
    """Plain text: one line per step (benchstat-like), the verdict after it."""
    if not items:
        return "no comparable steps: the two sets share no workload and client count"
    lines = []
    for e in items:
        who = e["baseline_target"] if e["baseline_target"] == e["contender_target"] else \
            f"{e['baseline_target']} -> {e['contender_target']}"
        sig = e["significance"]
        lines.append(f"{e['workload']} at {e['clients']} client{'s' if e['clients'] != 1 else ''} ({who}): "
                     f"baseline ({', '.join(e['baseline_runs'])}) {e['baseline_tps']:,.0f} tps, contender "
                     f"({', '.join(e['contender_runs'])}) {e['contender_tps']:,.0f} tps: "
                     + (sig["text"] if sig else "no per-interval throughput to compare"))
    return "\n".join(lines)
