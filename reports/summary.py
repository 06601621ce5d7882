"""Verdict summary and scaling knees: the report's first paragraph per target (pure functions)."""

from __future__ import annotations

from typing import Any

from diag.bundle import Bundle

# A step "still scales" when more clients bring at least this much more throughput. 10% is well above
# the round-to-round noise of a steady run here (a few %) and well below the gain of a real doubling.
SCALING_MIN_GAIN = 0.10


def scaling_knees(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per target and workload: the client count after which throughput stops rising.

    Steps are ordered by clients; the knee is the last count before the first step whose TPS gain is
    below SCALING_MIN_GAIN. ``knee`` is None when every step still gained (or only one step ran).
    """
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        if r.get("tps") is not None and r.get("clients"):
            by.setdefault((str(r.get("target")), str(r.get("workload"))), []).append(r)
    out = []
    for (target, workload), rows in sorted(by.items()):
        rows.sort(key=lambda r: r["clients"])
        knee = None
        for prev, cur in zip(rows, rows[1:]):
            if prev["tps"] > 0 and (cur["tps"] - prev["tps"]) / prev["tps"] < SCALING_MIN_GAIN:
                knee = prev
                break
        out.append({"target": target, "workload": workload, "steps": len(rows),
                    "knee_clients": knee["clients"] if knee else None,
                    "knee_tps": knee["tps"] if knee else None,
                    "best_tps": max(r["tps"] for r in rows),
                    "best_clients": max(rows, key=lambda r: r["tps"])["clients"]})
    return out


def _top_finding(findings: list[dict[str, Any]], target: str, workload: str | None = None,
                 clients: int | None = None) -> dict[str, Any] | None:
    """Highest-impact speed finding for a target (optionally one step); durability ones are separate."""
    for f in findings:  # already sorted by impact
        if f.get("target") != target or str(f.get("category", "")).startswith("durability"):
            continue
        if workload is not None and f.get("workload") not in (None, workload):
            continue
        if clients is not None and f.get("clients") not in (None, clients):
            continue
        return f
    return None


def target_verdicts(b: Bundle, findings: list[dict[str, Any]], durability: list[Any],
                    knees: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per target: best throughput, what limits it (with the finding), durability."""
    out = []
    for t in b.run.get("targets", []):
        label = str(t.get("label"))
        rows = [r for r in b.results if r.get("target") == label]
        entry: dict[str, Any] = {"label": label, "product": t.get("product", t.get("engine")),
                                 "version": str(t.get("version") or "").split(" on ")[0]}
        if rows:
            best = max(rows, key=lambda r: r.get("tps") or 0)
            entry["best"] = best
            entry["limit"] = _top_finding(findings, label, best.get("workload"), best.get("clients")) or \
                _top_finding(findings, label)
        entry["knees"] = [k for k in knees if k["target"] == label and k["knee_clients"] is not None]
        for k in entry["knees"]:
            f = _top_finding(findings, label, k["workload"], k["knee_clients"])
            k["explained_by"] = f.get("title") if f else None
        durs = [d for d in durability if getattr(d, "target", None) == label]
        crit = [f for f in findings if f.get("target") == label and str(f.get("category", "")).startswith(
            "durability") and f.get("severity") == "critical"]
        if crit:
            entry["durability"] = f"not real: {crit[0].get('title')}"
        elif durs:
            ok = all(d.settings.status == "durable" and (d.plausibility is None or
                                                         d.plausibility.status != "implausible") for d in durs)
            entry["durability"] = ("durable settings, and the measured commit and flush rates are physically "
                                   "plausible" if ok else "could not be confirmed: see the durability panel")
        else:
            entry["durability"] = "not judged: no write workload ran"
        out.append(entry)
    return out
