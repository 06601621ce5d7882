"""A step's window (workloads.steps.window): the one lifecycle a local step and a step on Dask workers share.

What it writes into a real bundle (events, series, the histogram artifact) and what the hooks and the row get,
whoever fills it: the fillers themselves run against real servers in tests/integration (test_workload_engines,
test_dask_workers, test_stuck_statement, test_repeat_significance).
"""

from __future__ import annotations

import json
from pathlib import Path

from diag.core.bundle import BundleWriter, read_jsonl
from diag.core.schema import ResultRow
from workloads.steps.options import DriverOptions, StepPlan
from workloads.steps.window import StepWindow
from tests.sweep import RecordingHooks




def _window(tmp_path: Path, repeat: int = 0) -> tuple[StepWindow, BundleWriter, RecordingHooks]:
    bundle = BundleWriter(tmp_path / "run")
    hooks = RecordingHooks({"source_part": 1})
    plan = StepPlan("pg", "point-select", 4, DriverOptions(clients=(4,), duration_s=3.0, report_interval_s=1.0),
                    repeat)
    return StepWindow(plan, bundle, bundle.series("workload--pg"), hooks), bundle, hooks


def test_start_names_the_step_and_tells_the_hooks(tmp_path: Path) -> None:
    w, bundle, hooks = _window(tmp_path, repeat=2)
    info = w.start(3.0, 1000.5, (11, 12), (7,), how=" on 2 Dask worker(s)", workers=["a", "b"])
    assert hooks.started == [info] == [w.info]
    assert (info.target, info.workload, info.clients, info.client_pids, info.client_roots) == \
        ("pg", "point-select", 4, (11, 12), (7,))
    (ev,) = read_jsonl(bundle.path / "events.jsonl")
    assert ev["message"] == "pg: point-select with 4 clients on 2 Dask worker(s) (repeat 2)"
    assert set(ev) == {"t", "kind", "message", "target", "workload", "clients", "t_start", "workers", "repeat"}


def test_full_intervals_outside_the_tail_are_the_rows_samples(tmp_path: Path) -> None:
    w, bundle, _ = _window(tmp_path)
    w.interval({"t": 1.0, "transactions": 100}, 1.0, 100)
    w.interval({"t": 2.0, "transactions": 45}, 0.5, 45)  # short: a cut or the step's end
    w.interval({"t": 3.0, "transactions": 90}, 1.0, 90, tail=True)  # the run-on after the measured part
    w.interval({"t": 4.0, "transactions": 91}, 0.95, 91)
    w.series.close()  # type: ignore[attr-defined]
    assert w.interval_tps == [100.0, 95.79]
    assert [r["t"] for r in read_jsonl(bundle.path / "series" / "workload--pg.jsonl")] == [1.0, 2.0, 3.0, 4.0]


def test_finish_writes_the_end_and_returns_the_hooks_row(tmp_path: Path) -> None:
    w, bundle, hooks = _window(tmp_path, repeat=1)
    w.start(3.0, 1000.0)
    w.interval({"t": 1.0}, 1.0, 10)
    path = w.histogram("HISTFAKE")
    assert path == w.histogram_path() == "artifacts/workload--pg--point-select--c4--r1.hdr"
    assert (bundle.path / path).read_text() == "HISTFAKE\n"
    assert w.histogram("PART", "--w0") == "artifacts/workload--pg--point-select--c4--r1--w0.hdr"
    measured = ResultRow(target="pg", workload="point-select", clients=4, tps=10.0, complete=True)
    row = w.finish(measured, "10.0 tps")
    assert row is w.row and row.extra["source_part"] == 1
    (_, given), = hooks.finished
    assert given.interval_tps == (10.0,) and given.repeat == 1 and row.interval_tps == (10.0,)
    end = read_jsonl(bundle.path / "events.jsonl")[-1]
    assert end["kind"] == "step_finished" and end["message"] == "pg: point-select with 4 clients: 10.0 tps"
    assert (end["complete"], end["histogram"], end["repeat"]) == (True, path, 1)


def test_a_step_run_once_has_no_repeat_and_events_name_it(tmp_path: Path) -> None:
    w, bundle, _ = _window(tmp_path)
    w.start(3.0, 1000.0)
    w.event("step_aborted", f"{w.name} ended", client=3)
    w.event("intervals_late", "late", with_repeat=True, transactions=2)
    evs = read_jsonl(bundle.path / "events.jsonl")
    assert [(e["target"], e["workload"], e["clients"]) for e in evs] == [("pg", "point-select", 4)] * 3
    assert evs[0]["message"] == "pg: point-select with 4 clients" and not any("repeat" in e for e in evs)
    assert evs[1]["message"] == "pg: point-select with 4 clients ended"
    row = w.finish(ResultRow(target="pg", workload="point-select", clients=4, tps=1.0), "1.0 tps")
    assert row.repeat is None and "repeat" not in row.to_dict()
    bundle.write_results([row])  # the typed row is what the bundle writer takes
    assert json.loads((bundle.path / "results.json").read_text())["results"][0]["source_part"] == 1
