"""Run bundle writing and tolerant reading."""

import json

import pytest

from diag.core.bundle import BundleWriter, load_bundle, read_jsonl
from diag.core.errors import DiagError


def test_series_append_and_cut_off_last_line(tmp_path):
    b = BundleWriter(tmp_path / "run")
    s = b.series("host")
    s.write({"t": 1.0, "x": 1})
    s.write({"t": 2.0, "x": 2})
    s.close()
    with open(tmp_path / "run" / "series" / "host.jsonl", "a") as fh:
        fh.write('{"t": 3.0, "x"')  # a crash mid-write
    assert [r["x"] for r in read_jsonl(tmp_path / "run" / "series" / "host.jsonl")] == [1, 2]


def test_load_bundle_and_scrub(tmp_path):
    b = BundleWriter(tmp_path / "r", secrets=("hunter22",))
    b.write_json("run.json", {"status": "complete", "command": ["mysql://u:hunter22@h/"]})
    b.write_json("results.json", {"results": [{"tps": 1}]})
    b.event("collector_off", "x failed: password hunter22 rejected")
    bundle = load_bundle(tmp_path / "r")
    assert bundle.results == [{"tps": 1}] and bundle.findings == [] and not bundle.partial
    assert "hunter22" not in (tmp_path / "r" / "run.json").read_text()
    assert "hunter22" not in (tmp_path / "r" / "events.jsonl").read_text()


def test_not_a_bundle(tmp_path):
    with pytest.raises(DiagError):
        load_bundle(tmp_path)


def test_unwritable(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(DiagError) as e:
        BundleWriter(f / "sub")
    assert "cannot write the run bundle" in str(e.value)


def test_partial_when_no_end(tmp_path):
    b = BundleWriter(tmp_path / "r")
    b.write_json("run.json", {"status": "running"})
    assert load_bundle(tmp_path / "r").partial
    assert json.loads((tmp_path / "r" / "run.json").read_text())["status"] == "running"
