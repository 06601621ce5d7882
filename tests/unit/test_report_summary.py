"""Scaling knees and per-target verdicts (pure functions of a bundle)."""

from pathlib import Path

from diag.core.bundle import Bundle
from diag.core.schema import ResultRow
from reports.model.summary import scaling_knees, target_verdicts


def _r(target, clients, tps, workload="point-select"):
    return {"target": target, "workload": workload, "clients": clients, "tps": tps,
            "latency_ms": {"p95": 1.0}}


def test_knee_where_gain_drops_below_ten_percent():
    rows = [_r("a", 1, 10_000), _r("a", 2, 19_000), _r("a", 4, 20_000), _r("a", 8, 19_500)]
    (k,) = scaling_knees([ResultRow.from_dict(r) for r in rows])
    assert k["knee_clients"] == 2 and k["knee_tps"] == 19_000 and k["best_clients"] == 4


def test_no_knee_while_it_scales_or_with_one_step():
    rows = [_r("a", 1, 10_000), _r("a", 2, 19_000), _r("a", 4, 30_000)]
    assert scaling_knees([ResultRow.from_dict(r) for r in rows])[0]["knee_clients"] is None
    assert scaling_knees([ResultRow.from_dict(_r("b", 4, 5_000))])[0]["knee_clients"] is None


def _bundle(results):
    run = {"targets": [{"label": "pg", "product": "postgresql", "version": "PostgreSQL 18.6 on x86"}]}
    return Bundle(path=Path("."), run=run, results=results, findings=[], events=[])


def test_verdict_names_the_limit_and_the_knee():
    results = [_r("pg", 1, 10_000), _r("pg", 2, 10_500)]
    findings = [{"target": "pg", "category": "lock_contention", "title": "Lock waits 80%", "workload": "point-select",
                 "clients": 1, "severity": "warning"}]
    b = _bundle(results)
    (v,) = target_verdicts(b, findings, [], scaling_knees(b.rows))
    assert v["best"].clients == 2 and v["limit"]["title"] == "Lock waits 80%"
    assert v["knees"][0]["knee_clients"] == 1 and v["knees"][0]["explained_by"] == "Lock waits 80%"
    assert v["durability"].startswith("not judged")


def test_critical_durability_finding_says_not_real():
    findings = [{"target": "pg", "category": "durability_unsafe", "title": "fsync=off", "severity": "critical"}]
    (v,) = target_verdicts(_bundle([_r("pg", 1, 100)]), findings, [], [])
    assert v["durability"] == "not real: fsync=off" and v.get("limit") is None
