"""Verdict summary and scaling knees: the report's first paragraph per target (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from diag.core.bundle import Bundle
from diag.core.schema import FindingRecord, ResultRow

# A step "still scales" when more clients bring at least this much more throughput. 10% is well above
# the round-to-round noise of a steady run here (a few %) and well below the gain of a real doubling.
SCALING_MIN_GAIN = 0.10


def scaling_knees(results: Sequence[ResultRow]) -> list[dict[str, Any]]:
    """Per target and workload: the client count after which throughput stops rising.

    Steps are ordered by clients; the knee is the last count before the first step whose TPS gain is
    below SCALING_MIN_GAIN. ``knee`` is None when every step still gained (or only one step ran).
    """
    by: dict[tuple[str, str], list[ResultRow]] = {}
    for r in results:
        if r.tps is not None and r.clients:
            by.setdefault((r.target, r.workload), []).append(r)
    out = []
    for (target, workload), rows in sorted(by.items()):
        rows.sort(key=lambda r: r.clients or 0)
        knee = None
        for prev, cur in zip(rows, rows[1:]):
            assert prev.tps is not None and cur.tps is not None
            if prev.tps > 0 and (cur.tps - prev.tps) / prev.tps < SCALING_MIN_GAIN:
                knee = prev
                break
        best = max(rows, key=lambda r: r.tps or 0.0)
        out.append({"target": target, "workload": workload, "steps": len(rows),
                    "knee_clients": knee.clients if knee else None, "knee_tps": knee.tps if knee else None,
                    "best_tps": best.tps, "best_clients": best.clients})
    return out


def _top_finding(findings: Sequence[tuple[FindingRecord, dict[str, Any]]], target: str,
                 workload: str | None = None, clients: int | None = None) -> dict[str, Any] | None:
    """Highest-impact speed finding for a target (optionally one step); durability ones are separate."""
    for f, raw in findings:  # already sorted by impact
        if f.target != target or f.is_durability:
            continue
        if workload is not None and f.workload not in (None, workload):
            continue
        if clients is not None and f.clients not in (None, clients):
            continue
        return raw
    return None


def _durability_sentence(label: str, findings: Sequence[tuple[FindingRecord, dict[str, Any]]],
                         durability: list[Any]) -> str:
    """Whether the target's results were durable: a critical finding, else the durability panel's verdicts."""
    crit = [f for f, _ in findings if f.target == label and f.is_durability and f.severity == "critical"]
    if crit:
        return f"not real: {crit[0].title}"
    durs = [d for d in durability if getattr(d, "target", None) == label]
    if not durs:
        return "not judged: no write workload ran"
    ok = all(d.settings.status == "durable" and (d.plausibility is None or d.plausibility.status != "implausible")
             for d in durs)
    return ("durable settings, and the measured commit and flush rates are physically plausible" if ok
            else "could not be confirmed: see the durability panel")


def target_verdicts(b: Bundle, findings: list[dict[str, Any]], durability: list[Any],
                    knees: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per target: best throughput, what limits it (with the finding), durability."""
    found = [(FindingRecord.from_dict(f, "finding"), f) for f in findings]
    steps = b.rows
    out = []
    for t in b.info.targets:
        label = t.label
        rows = [row for row in steps if row.target == label]
        entry: dict[str, Any] = {"label": label, "product": t.product or t.engine,
                                 "version": t.version.split(" on ")[0]}
        if rows:
            best = max(rows, key=lambda r: r.tps or 0)
            entry["best"] = best  # a ResultRow
            entry["limit"] = _top_finding(found, label, best.workload, best.clients) or _top_finding(found, label)
        entry["knees"] = [k for k in knees if k["target"] == label and k["knee_clients"] is not None]
        for k in entry["knees"]:
            f = _top_finding(found, label, k["workload"], k["knee_clients"])
            k["explained_by"] = f.get("title") if f else None
        entry["durability"] = _durability_sentence(label, found, durability)
        out.append(entry)
    return out
