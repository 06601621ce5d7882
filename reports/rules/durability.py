"""Durability findings: settings that give durability up, and commit rates no flushing server can reach.

Both rest on :mod:`reports.model.durability` (the verdicts, with their sources and
margins) through :mod:`reports.model.durability_view` (the numbers of each step), so
the findings say exactly what the durability panel says.
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle
from diag.core.engines import engine_for
from reports.model.durability_view import durability_rows, target_settings_verdict
from reports.model.steps import Finding, num, steps, target_info
from reports.rules.base import READ_ONLY_WORKLOADS

# Critical durability findings outrank every speed finding: a result that is not
# durable, or not possible, must be read before any of its numbers.
CRITICAL_IMPACT = 1.0
# Relaxed settings on a target that ran only read-only workloads did not change
# what was measured; still worth saying, below the measured speed findings' top.
READ_ONLY_IMPACT = 0.3


def durability_unsafe(b: Bundle) -> list[Finding]:
    """A target's settings let committed transactions be lost or the data be corrupted by a crash."""
    out: list[Finding] = []
    for t in b.run.get("targets") or []:
        if not isinstance(t, dict) or not t.get("label"):
            continue
        label = str(t["label"])
        info = target_info(b, label)
        if not info.get("settings"):
            continue  # nothing collected: the settings verdict would only say "unknown"
        v = target_settings_verdict(info)
        if v.status != "relaxed":
            continue
        workloads = sorted({s.workload for s in steps(b) if s.target == label})
        writes = not workloads or any(w not in READ_ONLY_WORKLOADS for w in workloads)
        ev: dict[str, Any] = {"source": "server settings read at the start of the run (run.json)"}
        for r in v.relaxed:
            ev[r.setting] = f"{r.value}: {r.risk}"
        ev["workloads"] = ", ".join(workloads) or "none measured"
        names = ", ".join(f"{r.setting}={r.value}" for r in v.relaxed)
        advice = (f"Measured with {names}: its commit rates are not comparable with a durable server's. "
                  "Restore the durable values (" + engine_for(v.engine).durable_values + ") to measure what a "
                  "production server would do, or state the relaxed settings next to every number.")
        if not writes:
            advice += " The workloads here only read, so their numbers are not affected."
        out.append(Finding(
            category="durability_unsafe", severity="critical" if writes else "warning", target=label,
            title=f"Not durable: {names}", evidence=ev, advice=advice,
            impact=CRITICAL_IMPACT if writes else READ_ONLY_IMPACT,
            extra={"relaxed": [r._asdict() for r in v.relaxed]}))
    return out


def durability_implausible(b: Bundle) -> list[Finding]:
    """A write step committed faster than flushing every commit allows (reports.model.durability checks)."""
    out: list[Finding] = []
    by_window = {(st.target, st.t0): st for st in steps(b)}
    for s in durability_rows(b):
        pv = s.plausibility
        if pv is None or pv.status != "implausible":
            continue
        step = by_window.get((s.target, s.t_start))
        if step is None:
            continue
        failed = [ch for ch in pv.checks if ch.status == "failed"]
        ev: dict[str, Any] = {
            "commits_per_s": num(s.C) if s.C is not None else None,
            "commits_source": s.C_source,
            "clients": s.clients,
        }
        if s.F is not None:
            ev["flush_capability_per_s"] = num(s.F)
            ev["flush_capability_source"] = s.F_source
        if s.S is not None:
            ev["server_flush_calls_per_s"] = num(s.S)
            ev["server_flush_calls_source"] = s.S_source
        if s.D is not None:
            ev["device_flushes_per_s"] = num(s.D)
        for ch in failed:
            ev[f"failed: {ch.name}"] = ch.formula
        out.append(step.finding(
            "durability_implausible", "critical", f"{num(s.C or 0):g} commits/s cannot all have reached stable "
            "storage", ev,
            (failed[0].reason if failed else pv.reason) + " Check that the storage honours flushes (no volatile "
            "write cache acknowledging them, no nobarrier mount or eatmydata, no virtual disk with cache=unsafe) "
            "or, when the flush capability was given by hand, that it is right.",
            CRITICAL_IMPACT, failed_checks=[ch.name for ch in failed], formula=pv.formula))
    return out
