"""Repeats, intervals, significance and the noise rules (issue 16): pure functions on known values, and the
rules on saved real bundles in both directions (tests/data/bundles/repeat_insert_pg_noisy: two interleaved
repeats of 1 s inserts on two throwaway PostgreSQL servers, 3,968 vs 433 tps on a loaded machine)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from diag.core.bundle import BundleWriter, load_bundle
from diag.core.errors import DiagError
from diag.core.schema import FORMAT, ResultRow
from diag.core.stats import median
from reports.model.compare import compare
from reports.model.compare_sets import compare_sets, format_sets
from reports.rules import noise
from reports.model.significance import compare_samples, interval_samples, series_interval_tps
from workloads.steps.repeats import add_result, combine, tps_interval

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"
NOISY = DATA / "repeat_insert_pg_noisy"
# 200 clients on a loaded machine: 4 intervals of 5,347-8,419 tps, an interquartile range of 26% of the median.
SPREAD = "many_clients_pg_c200_host_stalled"
SINGLE = sorted(p.name for p in DATA.iterdir() if (p / "run.json").exists() and p != NOISY and p.name != SPREAD)


def _row(rep: int, tps: float, t0: float, ivs: list[float], **kw) -> ResultRow:
    return ResultRow.from_dict({"target": "a", "workload": "insert", "clients": 1, "repeat": rep, "tps": tps,
                                "t_start": t0, "t_end": t0 + 1, "transactions": int(tps),
                                "latency_ms": {"p95": 1.0 / tps}, "interval_tps": ivs, "complete": True, **kw})


def test_combine_takes_the_median_and_keeps_every_repeat() -> None:
    rows = [_row(1, 100.0, 10, [90, 110]), _row(2, 300.0, 20, [290, 310]), _row(3, 200.0, 30, [190, 210])]
    r = combine(rows)
    assert r.tps == 200.0 and r.representative_repeat == 3 and (r.t_start, r.t_end) == (30, 31)
    assert [x["repeat"] for x in r.repeats] == [1, 2, 3] and r.repeat_count == 3 and r.repeat is None
    assert r.interval_tps == (90, 110, 290, 310, 190, 210)
    assert r.tps_ci is not None
    ci = r.tps_ci  # 6 pooled intervals (< 6 repeats): [x(1), x(6)], coverage 1 - 2/64
    assert ci["basis"] == "intervals" and (ci["low"], ci["high"], ci["level"]) == (90, 310, 0.9688)
    even = combine(rows[:2])  # of two, the lower: one repeat's own figure, with its window
    assert even.tps == 100.0 and even.representative_repeat == 1 and even.t_start == 10
    cut = combine([*rows[:2], _row(3, 5.0, 30, [5], complete=False, server_lost={"t": 31})])
    assert cut.tps == 100.0 and cut.complete is False and cut.server_lost == {"t": 31}
    assert ResultRow.from_dict(r.to_dict()) == r and r.extra == {}  # every key is declared in the schema
    profiled = combine([_row(1, 100.0, 10, [100], profile={"folded": "a"}, client_profile={"b": 1}),
                        _row(2, 300.0, 20, [300]), _row(3, 200.0, 30, [200], interrupted=True)])
    assert profiled.profile == {"folded": "a"} and profiled.extra == {"client_profile": {"b": 1}} and profiled.interrupted


def test_interval_basis_switches_to_repeats_at_six() -> None:
    ci = tps_interval([float(x) for x in range(1, 7)], [1.0] * 50)
    assert ci["basis"] == "repeats" and (ci["low"], ci["high"]) == (1, 6) and ci["level"] == 0.9688


def test_add_result_rebuilds_the_step_row() -> None:
    results: list[ResultRow] = []
    reps: dict = {}
    add_result(results, reps, ResultRow(target="b", workload="insert", clients=1, tps=5.0, interval_tps=(4, 6)))
    add_result(results, reps, _row(1, 100.0, 10, [100]))
    add_result(results, reps, _row(2, 120.0, 20, [120]))
    assert [r.target for r in results] == ["b", "a"] and results[1].repeat_count == 2
    assert results[0].tps_ci is not None and results[0].tps_ci["n"] == 2


def test_verdicts_on_known_values() -> None:
    v = compare_samples([1, 2, 3, 4], [5, 6, 7, 8], "per-repeat")
    assert v.verdict == "significant" and v.p == pytest.approx(0.02857, abs=1e-5)
    ratios = sorted(y / x for x in (1, 2, 3, 4) for y in (5, 6, 7, 8))  # Hodges-Lehmann of log throughput
    assert v.change == pytest.approx((ratios[7] * ratios[8]) ** 0.5 - 1) and v.text().startswith("significant: 2.58x")
    assert v.low == pytest.approx(ratios[0] - 1) and v.high == pytest.approx(ratios[-1] - 1)  # 4 vs 4: the extremes
    same = compare_samples([10, 12, 11, 13, 9], [11, 10, 12, 9, 13], "per-repeat")
    assert same.verdict == "within noise" and same.p == 1.0 and same.low <= 0 <= same.high
    few = compare_samples([1, 2, 3], [7, 8, 9], "per-repeat")  # 3 vs 3: the smallest p is 0.1
    assert few.verdict == "too few values" and few.min_p == pytest.approx(0.1) and "too few values" in few.text()


def test_saved_rows_read_intervals_from_the_series() -> None:
    b = load_bundle(DATA / "insert_flush_cap_120")  # format 2: no interval_tps in its rows
    assert b.source_format < 3 and b.run["format"] == FORMAT
    assert "interval_tps" not in b.results[0]
    row = b.rows[0]
    ivs = interval_samples(b, row)
    assert ivs == series_interval_tps(b, row) and len(ivs) == 3
    assert sum(ivs) / len(ivs) == pytest.approx(row.tps, rel=0.15)


def test_noisy_measurement_on_a_noisy_run_and_not_on_the_others() -> None:
    found = noise.noisy_measurement(load_bundle(NOISY))
    by = {f.target: f for f in found}
    assert set(by) == {"a", "b"}
    ev = by["a"].evidence
    reps = [x["tps"] for x in load_bundle(NOISY).results[0]["repeats"]]
    assert ev["spread_pct"] == pytest.approx(100 * (max(reps) - min(reps)) / median(reps), abs=0.5)
    assert ev["repeats_tps"] == reps and ev["median_tps"] == min(reps)  # the lower of two is the median
    saw = by["a"].extra["windows"]
    assert [w["window"] for w in saw] == ["repeat 1", "repeat 2"] and all("other_processes_cpus" in w for w in saw)
    assert ev["what_each_window_saw"].startswith(f"repeat 1: {reps[0]:,.0f} tps, other processes ")
    for name in SINGLE:  # single-run bundles whose intervals are steady enough: no noise finding
        assert noise.noisy_measurement(load_bundle(DATA / name)) == [], name
    (spread,) = noise.noisy_measurement(load_bundle(DATA / SPREAD))
    # Tukey's hinges of 5,347 6,349 | 6,683 8,419: (7,551 - 5,848) / 6,516, worked out here from the intervals
    assert spread.evidence["spread_pct"] == pytest.approx(100 * ((6683 + 8419) / 2 - (5347 + 6349) / 2) / 6516, abs=0.1)


def test_unsteady_window_says_how_much_it_moves_the_figure() -> None:
    (f,) = noise.unsteady_window(load_bundle(DATA / "insert_flush_cap_120"))[:1]
    (c,) = f.extra["causes"]
    assert f.evidence["causes"].startswith("window: a cold start (first interval ")
    assert c["cause"] == "cold start" and c["first_interval_tps"] < 0.8 * c["rest_median_tps"]
    assert c["moves_figure_pct"] == pytest.approx(100 * (c["figure_tps"] / c["against_tps"] - 1), abs=0.2)
    assert noise.unsteady_window(load_bundle(DATA / "insert_pg_fsync_off")) == []


def test_compare_of_the_noisy_run_and_sets() -> None:
    b = load_bundle(NOISY)
    (e,) = compare(b)
    assert e["significance"]["unit"] == "per-interval" and e["significance"]["verdict"] == "within noise"
    assert e["sentences"][0].startswith(f"{e['fast_name']} and {e['slow_name']} are within noise of each other: ")
    (s,) = [x for x in compare_sets([b], [b]) if x["baseline_target"] == "a"]
    assert s["significance"]["change"] == 0.0 and s["significance"]["p"] == 1.0
    assert f"baseline (repeat_insert_pg_noisy) {b.results[0]['tps']:,.0f} tps" in format_sets([s])


def test_repeat_fields_are_validated(tmp_path: Path) -> None:
    w = BundleWriter(tmp_path / "r")
    w.write_json("run.json", {"status": "complete"})
    w.write_json("results.json", {"results": [{"target": "a", "tps_ci": {"median": 1, "low": 0, "level": 0.9, "n": 3}}]})
    with pytest.raises(DiagError, match="tps_ci: high is missing"):
        load_bundle(tmp_path / "r")
    w.write_json("results.json", {"results": [{"target": "a", "repeats": [{"repeat": "one", "tps": 1}]}]})
    with pytest.raises(DiagError, match=r"repeats\[0\]: repeat should be an integer"):
        load_bundle(tmp_path / "r")
    json.dumps(ResultRow.from_dict(json.loads((NOISY / "results.json").read_text())["results"][0]).to_dict())


def test_sides_with_equal_labels_are_named_by_run(tmp_path: Path) -> None:
    """Two runs of the same targets: the sides are named by --name (run.json name), else the bundle folder."""
    a, b = tmp_path / "first", tmp_path / "second"
    shutil.copytree(NOISY, a)
    shutil.copytree(NOISY, b)
    run = json.loads((a / "run.json").read_text())
    (a / "run.json").write_text(json.dumps({**run, "name": "before"}))
    items = [e for e in compare(load_bundle(a), load_bundle(b)) if e["fast"] == e["slow"]]
    assert items and all({e["fast_name"], e["slow_name"]} == {"before", "second"} for e in items)
    assert all(e["significance"]["verdict"] == "within noise" and e["significance"]["change"] == 0 for e in items)


def test_a_step_whose_repeats_mostly_measured_nothing_is_noisy(tmp_path: Path) -> None:
    """Two of three repeats at 0 tps (stalled clients on a saturated machine): the median is 0, and (max - min) /
    median used to make that the steadiest step of all (spread 0, no finding)."""
    shutil.copytree(NOISY, tmp_path / "b")
    res = json.loads((tmp_path / "b" / "results.json").read_text())
    row = res["results"][0]
    first = row["repeats"][0]
    row["repeats"] = [{**first, "tps": 0.0}, {**row["repeats"][1], "tps": 0.0}, {**first, "repeat": 3}]
    row["repeat_count"] = 3
    (tmp_path / "b" / "results.json").write_text(json.dumps(res))
    by = {f.target: f for f in noise.noisy_measurement(load_bundle(tmp_path / "b"))}
    ev = by["a"].evidence
    assert ev["repeats_tps"] == [0.0, 0.0, first["tps"]] and ev["spread_pct"] == pytest.approx(300.0)
    assert "mean of 3 repeats" in ev["spread_is"] and "median is 0" in ev["spread_is"]
