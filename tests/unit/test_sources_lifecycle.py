"""collectors.registry and collectors.lifecycle: which sources a plan makes, and the one probe/start/stop path.

The sources here are small real Collector subclasses (a counter sampled in its
own process, a step-hook source in this process); no database is needed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from collectors.base import Collector, CollectorContext, Metric, Probe, ServerFacts
from collectors.flush import FlushCollector
from collectors.host import HostCollector
from collectors.lifecycle import Lifecycle
from collectors.mysql import MYSQL_COLLECTORS, MyStatusCollector
from collectors.pg import PG_COLLECTORS, PgStatsCollector
from collectors.registry import SourcePlan, engine_collectors, sources_for
from collectors.step_profiles import ClientProfileSource, ServerProfileSource
from diag.core.bundle import BundleWriter, read_jsonl
from diag.core.engines import MYSQL, POSTGRES
from diag.core.errors import DiagError
from diag.core.schema import ResultRow, UndeclaredPartError
from diag.run import FSYNC_TEST_SECONDS, RunOptions, run_plan
from diag.core.targets import parse_target
from workloads.driver import DriverOptions, StepInfo

PG = parse_target("a=postgresql://u@127.0.0.1:5432/x")
MY = parse_target("b=mysql://u@127.0.0.1:3306/")


class Ticker(Collector):
    name = "ticker"
    metrics = (Metric("ticks", "count", "counter", "samples taken"), Metric("level", "units", "gauge", "a level"))
    interval_s = 0.05

    def probe(self) -> Probe:
        return Probe(True)

    def start(self) -> None:
        self.n = 0

    def sample(self) -> dict[str, Any]:
        self.n += 1
        return {"ticks": self.n, "level": 1}


class Silent(Ticker):
    """Never writes a record: a source that does not get ready."""

    name = "silent"
    ready_timeout_s = 0.3

    def sample(self) -> None:
        return None


class Marker(Collector):
    """In-process: adds facts once started and a key to every step row."""

    name = "marker"
    per_target = False
    sampled = False

    def probe(self) -> Probe:
        return Probe(True, "", "", ("half of it: off",))

    def start(self) -> None:
        self.steps: list[int] = []

    def sample(self) -> None:
        return None

    def step_started(self, info: Any) -> None:
        self.steps.append(info.clients)

    row_fields = ("marker",)

    def step_finished(self, info: Any) -> dict[str, Any] | None:
        return {"marker": len(self.steps)}

    def facts(self) -> dict[str, Any]:
        return {"marked": True}


class Broken(Ticker):
    name = "broken"

    def probe(self) -> Probe:
        return Probe(False, "cannot here", "do this")


def ctx(tmp_path: Path, target: Any = PG, **options: Any) -> CollectorContext:
    return CollectorContext(target=target, artifacts=tmp_path / "artifacts", options=options,
                            servers=(ServerFacts(target.label, True, 1, str(tmp_path)),))


def lifecycle(tmp_path: Path) -> tuple[Lifecycle, dict[str, Any], list[str]]:
    run: dict[str, Any] = {}
    said: list[str] = []
    return Lifecycle(BundleWriter(tmp_path / "b"), run.update, said.append), run, said


def test_engine_registries_are_chosen_by_engine_name() -> None:
    assert engine_collectors(POSTGRES) == PG_COLLECTORS and engine_collectors(MYSQL) == MYSQL_COLLECTORS
    assert engine_collectors(POSTGRES, "stats") == (PgStatsCollector,)
    assert engine_collectors(MYSQL, "stats") == (MyStatusCollector,)
    assert engine_collectors(MYSQL, "none") == ()


def test_plans_make_the_sources_they_name(tmp_path: Path) -> None:
    names = [c.name for c in sources_for("target", SourcePlan(flush_off="read-only"), ctx(tmp_path))]
    assert names == [c.name for c in PG_COLLECTORS] + ["flush"]
    off = sources_for("target", SourcePlan(engine="none", flush_off="read-only"), ctx(tmp_path))[0]
    assert off.quiet and off.probe() == Probe(False, "read-only")
    probe_plan = SourcePlan(host=False, engine="stats", flush_interval_s=0.25)
    made = sources_for("target", probe_plan, ctx(tmp_path, MY))
    assert [type(c) for c in made] == [MyStatusCollector, FlushCollector]
    assert made[1].perf_interval_s == 0.25
    run_wide = sources_for("run", SourcePlan(fsync_test_s=0.1, profile=True, client_profile=True, profile_s=2),
                           ctx(tmp_path))
    assert [c.name for c in run_wide] == ["flush_capability", "host", "profile", "client_profile"]
    assert isinstance(run_wide[1], HostCollector) and isinstance(run_wide[2], ServerProfileSource)
    assert isinstance(run_wide[3], ClientProfileSource) and run_wide[3].seconds == 2
    assert sources_for("run", SourcePlan(host=False), ctx(tmp_path)) == []


def test_run_plan_traces_flushes_and_measures_F_only_with_writes() -> None:
    def plan(workload: str, **kw: Any) -> SourcePlan:
        return run_plan(RunOptions(targets=[], workloads=[workload], driver=DriverOptions(), **kw))

    ro = plan("point-select")
    assert not ro.flush and "write workload" in ro.flush_off and ro.fsync_test_s is None and ro.profile
    rw = plan("insert")
    assert rw.flush and not rw.flush_off and rw.fsync_test_s == FSYNC_TEST_SECONDS
    assert plan("insert", flush_capability=120.0).fsync_test_s is None
    bare = plan("insert", collect=False, profile=False)
    assert not bare.host and bare.engine == "none" and not bare.flush and not bare.flush_off and not bare.profile


def test_lifecycle_records_probes_metrics_and_facts_and_passes_step_hooks(tmp_path: Path) -> None:
    lc, run, said = lifecycle(tmp_path)
    c = ctx(tmp_path)
    ticker, marker = Ticker(c), Marker(c)
    batch = lc.start([ticker, marker, Broken(c)])
    try:
        assert run["collectors"]["ticker--a"]["ok"] and not run["collectors"]["broken--a"]["ok"]
        assert run["metrics"] == {"ticker--a": Ticker.declared()}  # only sampled, started sources
        assert run["metrics"]["ticker--a"][1] == {"name": "level", "unit": "units", "kind": "gauge",
                                                  "description": "a level"}
        assert run["marked"] is True
        assert said == ["dbdiag: note: marker: half of it: off",
                        "dbdiag: note: broken--a not collected: cannot here (do this)"]
        assert lc.collector_pids() == batch.runner.pids() and len(batch.runner.pids()) == 1
        info = StepInfo("a", "insert", 2, 1.0, time.time(), (11, 12))
        lc.step_started(info)
        assert lc.client_pids() == [11, 12] and marker.steps == [2]
        row = ResultRow(tps=1.0)
        got = lc.step_finished(info, row)
        assert got.to_dict() == {**row.to_dict(), "marker": 1} and got.extra == {"marker": 1}
        assert row.extra == {} and lc.client_pids() == []  # the step's record is not changed: a new one comes back
        time.sleep(0.3)
    finally:
        lc.stop(batch)
    recs = read_jsonl(tmp_path / "b" / "series" / "ticker--a.jsonl")
    assert len(recs) >= 2 and [r["ticks"] for r in recs] == list(range(1, len(recs) + 1))
    assert lc.collector_pids() == [] and lc.batches == []
    json.dumps(run)  # run.json material


class Overreach(Marker):
    """Declares its marker but also writes the step's throughput."""

    name = "overreach"

    def step_finished(self, info: Any) -> dict[str, Any] | None:
        return {"marker": 1, "tps": 0.0}


def test_a_source_cannot_write_a_row_field_it_did_not_declare(tmp_path: Path) -> None:
    lc, _run, _said = lifecycle(tmp_path)
    batch = lc.start([Overreach(ctx(tmp_path))])
    try:
        info = StepInfo("a", "insert", 2, 1.0, time.time(), (11,))
        lc.step_started(info)
        with pytest.raises(UndeclaredPartError, match=r"overreach returned tps .*\(row_fields: marker\)"):
            lc.step_finished(info, ResultRow(tps=1.0))
    finally:
        lc.stop(batch)


class Misshapen(Marker):
    """Declares statements but returns a list for them."""

    name = "misshapen"
    row_fields = ("statements",)

    def step_finished(self, info: Any) -> dict[str, Any] | None:
        return {"statements": ["not a record"]}


def test_a_part_of_the_wrong_shape_is_left_out_and_said(tmp_path: Path) -> None:
    lc, _run, _said = lifecycle(tmp_path)
    c = ctx(tmp_path)
    batch = lc.start([Misshapen(c), Marker(c)])
    try:
        info = StepInfo("a", "insert", 2, 1.0, time.time(), (11,))
        lc.step_started(info)
        got = lc.step_finished(info, ResultRow(target="a", workload="insert", clients=2, tps=1.0))
    finally:
        lc.stop(batch)
    assert got.statements is None and got.extra == {"marker": 1}  # the other source's part is in
    (ev,) = [e for e in read_jsonl(tmp_path / "b" / "events.jsonl") if e["kind"] == "source_part_refused"]
    assert ev["collector"] == "misshapen" and "statements" in ev["message"]


def test_a_source_that_does_not_get_ready_fails_a_strict_run_only(tmp_path: Path) -> None:
    lc, run, _ = lifecycle(tmp_path)
    batch = lc.start([Silent(ctx(tmp_path))])  # not strict: the run goes on without its records
    lc.stop(batch)
    with pytest.raises(DiagError, match="silent did not start: no record within 0.3 s"):
        lc.start([Silent(ctx(tmp_path))], strict=True)
    assert lc.batches == [] and lc.collector_pids() == []  # what it started was stopped again
