"""The bundle's typed records (diag.core.schema), the format stamp, and the loader's validation and migration."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.host import PROC_FIELDS
from diag.core.bundle import BundleWriter, load_bundle
from diag.core.errors import DiagError
from diag.core.schema import (FORMAT, FindingRecord, FlushCapabilityInfo, FlushDevice, FlushTarget, MetricDecl,
                         MetricDeclarations, ResultRow, RunInfo, TargetInfo)
from reports.model.series import (PROC_COLUMNS, SERIES_COLLECTORS, declarations, metric_series, metric_unit,
                            migrate_metrics)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SAVED = sorted(p.name for p in (DATA / "bundles").iterdir() if (p / "run.json").exists())
GOLDEN = json.loads((DATA / "findings_golden.json").read_text(encoding="utf-8"))


def _copy(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(DATA / "bundles" / name, dest)
    return dest


# --------------------------------------------------------------------------- records


@pytest.mark.parametrize("name", SAVED)
def test_saved_bundles_validate_and_round_trip(name: str) -> None:
    raw_run = json.loads((DATA / "bundles" / name / "run.json").read_text(encoding="utf-8"))
    raw_rows = json.loads((DATA / "bundles" / name / "results.json").read_text(encoding="utf-8"))["results"]
    # Most were written before the format existed (what migration must handle); repeat_insert_pg_noisy in format 3.
    fmt = raw_run.get("format", 1)
    info = RunInfo.from_dict(raw_run)
    assert info.format == fmt and (info.metrics is None) == (fmt == 1)
    assert {k: v for k, v in info.to_dict().items() if k != "format" or fmt > 1} == raw_run
    assert [ResultRow.from_dict(r).to_dict() for r in raw_rows] == raw_rows
    assert all(t.dbms.name == t.engine for t in info.targets)


def test_wrong_type_names_file_and_field(tmp_path: Path) -> None:
    w = BundleWriter(tmp_path / "r")
    w.write_json("run.json", {"status": "complete", "targets": [{"label": "pg", "port": "5432"}]})
    with pytest.raises(DiagError) as e:
        load_bundle(tmp_path / "r")
    msg = str(e.value)
    assert "run.json" in msg and "targets[0]" in msg and "port" in msg and "integer" in msg and "\n" not in msg
    w.write_json("run.json", {"status": "complete"})
    w.write_json("results.json", {"results": [{"target": "pg", "clients": True}]})
    with pytest.raises(DiagError, match=r"results\[0\]: clients should be an integer"):
        load_bundle(tmp_path / "r")


def test_unknown_keys_are_kept() -> None:
    row = ResultRow.from_dict({"target": "a", "workload": "tpcc", "clients": 4, "nopm": 12.5, "tps": 3})
    assert row.extra == {"nopm": 12.5} and row.tps == 3 and row.to_dict()["nopm"] == 12.5
    t = TargetInfo.from_dict({"label": "a", "engine": "mysql", "new_fact": [1]})
    assert t.extra == {"new_fact": [1]} and t.to_dict()["new_fact"] == [1]
    assert RunInfo.from_dict({"later": 1}).to_dict()["later"] == 1


def test_finding_record_matches_the_rules_finding() -> None:
    from reports.model.steps import Finding

    f = Finding(category="cpu_bound", severity="warning", target="pg", title="t", evidence={"x": 1}, advice="a",
                impact=0.5, workload="w", clients=2, extra={"k": "v"})
    rec = FindingRecord.from_dict(f.to_dict())
    assert rec.to_dict() == f.to_dict() and not rec.is_durability


def test_flush_capability_record() -> None:
    fc = FlushCapabilityInfo(devices={"vda": FlushDevice(812.5, fsync_test={"directory": "/d"})},
                             targets={"pg": FlushTarget("vda", "/d"), "my": FlushTarget(None, None, "no dir")})
    back = FlushCapabilityInfo.from_dict(json.loads(json.dumps(fc.to_dict())))
    assert back == fc
    assert back.of("pg") == (FlushTarget("vda", "/d"), fc.devices["vda"])
    assert back.of("my")[1] is None and back.of("nobody")[0].device is None
    with pytest.raises(DiagError, match="ops_per_s should be a number"):
        FlushCapabilityInfo.from_dict({"devices": {"vda": {"ops_per_s": "fast"}}})


# --------------------------------------------------------------------------- metric declarations


def test_declared_names_match_their_placeholders() -> None:
    decls = MetricDeclarations({"my_status--a": (
        MetricDecl("metrics.<name>", "raw", "counter"), MetricDecl("metrics.os_log_fsyncs", "fsyncs", "counter"),
        MetricDecl("disk.<dev>.{flushes,flush_ms}", "count/ms", "counter"), MetricDecl("up", "s", "gauge"))})
    assert decls.find("my_status--a", "metrics.os_log_fsyncs").unit == "fsyncs"  # exact beats the pattern
    assert decls.kind("my_status--a", "metrics.log_writes") == "counter"
    assert decls.kind("my_status--a", "disk.vda.flush_ms") == "counter"
    assert decls.kind("my_status--a", "disk.vda.reads") is None
    assert decls.kind("my_status--b", "up") == "gauge"  # another target's series of the same collector
    assert decls.kind("host", "up") is None
    with pytest.raises(DiagError, match="kind should be counter or gauge"):
        MetricDecl.from_dict({"name": "x", "unit": "s", "kind": "rate"})


def test_every_collector_declaration_is_a_valid_record() -> None:
    for cls in SERIES_COLLECTORS:
        assert cls.metrics, cls.__name__
        for m in cls.declared():
            assert MetricDecl.from_dict(m).to_dict() == m


def test_process_columns_follow_the_host_collector() -> None:
    assert tuple(m.name for m in PROC_COLUMNS) == PROC_FIELDS[:len(PROC_COLUMNS)]
    assert PROC_FIELDS[len(PROC_COLUMNS):] == ("create_time", "reaped_user_s", "reaped_system_s", "ppid", "run_delay_s")


# --------------------------------------------------------------------------- format and migration


def test_writer_stamps_the_format(tmp_path: Path) -> None:
    w = BundleWriter(tmp_path / "r")
    w.write_json("run.json", {"status": "running"})
    w.write_json("results.json", {"results": []})
    assert json.loads((tmp_path / "r" / "run.json").read_text())["format"] == FORMAT
    assert "format" not in json.loads((tmp_path / "r" / "results.json").read_text())
    b = load_bundle(tmp_path / "r")
    assert b.source_format == FORMAT and b.info.format == FORMAT


def test_newer_format_is_refused_in_one_line(tmp_path: Path) -> None:
    w = BundleWriter(tmp_path / "r")
    w.write_json("run.json", {"format": FORMAT + 1, "status": "complete"})
    with pytest.raises(DiagError) as e:
        load_bundle(tmp_path / "r")
    assert f"bundle format {FORMAT + 1} is newer" in str(e.value) and "\n" not in str(e.value)
    w.write_json("run.json", {"format": "two"})
    with pytest.raises(DiagError, match="format should be a positive integer"):
        load_bundle(tmp_path / "r")


def test_format_1_is_migrated_in_memory(tmp_path: Path) -> None:
    path = _copy("point_select", tmp_path)
    b = load_bundle(path)
    assert b.source_format == 1 and b.run["format"] == FORMAT and b.metrics is None
    migrate_metrics(b)
    assert b.metrics is not None
    assert set(b.metrics.series) == {s for s in b.series if not s.startswith("workload--")}
    assert b.metrics.kind("host", "ctx_switches") == "counter"
    assert b.metrics.kind("host", "mem.used") == "gauge"
    assert b.metrics.kind("pg_waits--postgres_127.0.0.1_53339", "samples") == "gauge"
    assert b.metrics.kind("my_status--mysql_127.0.0.1_35561", "status.Innodb_log_writes") == "counter"
    assert "format" not in json.loads((path / "run.json").read_text())  # in memory only


def test_stored_declarations_decide_rate_or_value(tmp_path: Path) -> None:
    path = _copy("point_select", tmp_path)
    run = json.loads((path / "run.json").read_text())
    host = load_bundle(path).series["host"]
    raw = [(r["t"], float(r["ctx_switches"])) for r in host]
    rates = metric_series(load_bundle(path), "host", "ctx_switches")
    # A counter: one rate per interval, stamped at the interval's end, in context switches per second.
    assert [t for t, _ in rates] == [t for t, _ in raw[1:]]
    (t0, v0), (t1, v1) = raw[:2]
    assert rates[0][1] == pytest.approx((v1 - v0) / (t1 - t0))
    # The same field declared a gauge by the bundle itself: shown as stored, not as a rate.
    run["format"] = FORMAT
    run["metrics"] = {"host": [{"name": "ctx_switches", "unit": "count", "kind": "gauge", "description": ""}]}
    (path / "run.json").write_text(json.dumps(run))
    b = load_bundle(path)
    assert metric_series(b, "host", "ctx_switches") == raw and metric_unit(b, "host", "ctx_switches") == "count"
    # Series the bundle does not declare still get the collectors' declarations.
    assert declarations(b).kind("pg_stats--postgres_127.0.0.1_53339", "db.xact_commit") == "counter"
    with pytest.raises(DiagError, match="not a declared metric"):
        metric_series(b, "host", "no.such.field")


@pytest.mark.parametrize("name", ["point_select", "insert_flush_cap_120"])
def test_format_1_bundle_renders_with_dbdiag_report(name: str, tmp_path: Path) -> None:
    path = _copy(name, tmp_path)
    (path / "report.html").unlink(missing_ok=True)
    (path / "findings.json").unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "-m", "diag", "report", str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (path / "report.html").stat().st_size > 1000
    found = json.loads((path / "findings.json").read_text(encoding="utf-8"))["findings"]
    assert json.loads(json.dumps(found, sort_keys=True, default=str)) == GOLDEN[name]


def test_a_row_states_its_measured_seconds_once(tmp_path: Path) -> None:
    """Format 4: a row's measured seconds are ``measured_s`` only; rows of older bundles (``duration_s`` beside
    an equal ``measured_s``, or ``duration_s`` alone before ``measured_s`` existed) load in that form, and -T
    as planned stays run.json's ``options.duration_s``."""
    w = BundleWriter(tmp_path / "r")
    w.write_json("run.json", {"format": 3, "status": "complete", "options": {"duration_s": 10.0}})
    w.write_json("results.json", {"results": [
        {"target": "a", "workload": "insert", "clients": 1, "duration_s": 9.5, "measured_s": 9.5},
        {"target": "a", "workload": "insert", "clients": 2, "duration_s": 10.0},  # before measured_s
        {"target": "a", "workload": "insert", "clients": 4, "measured_s": 3.25, "complete": False}]})
    b = load_bundle(tmp_path / "r")
    assert b.source_format == 3 and b.run["format"] == FORMAT
    assert [r.measured_s for r in b.rows] == [9.5, 10.0, 3.25]
    assert not any("duration_s" in r for r in b.results) and not any("duration_s" in r.extra for r in b.rows)
    assert b.info.planned_s == 10.0
    # The writer writes the one form back, and the loader leaves a format-4 row as it is.
    w.write_results(b.rows)
    w.write_json("run.json", {**b.run})
    again = load_bundle(tmp_path / "r")
    assert again.source_format == FORMAT and [r.to_dict() for r in again.rows] == [r.to_dict() for r in b.rows]
