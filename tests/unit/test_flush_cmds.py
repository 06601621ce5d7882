"""durability / fsync-test commands: argument parsing, flush capability for run.json (collectors.flush_capability),
text output (reports.views.durability_text); real disk, no servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors import flush_capability as fc
from diag.cli import build_parser
from diag.core.errors import DiagError
from reports.model import durability_view as dv
from reports.views.durability_text import format_durability
from tests.unit.test_flush_view import bundle, flush_series

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def disk_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="dbdiag-test-") as d:
        yield Path(d)


def test_parsers_are_registered() -> None:
    p = build_parser()
    a = p.parse_args(["durability", "embedded:postgres", "--set", "fsync=off", "--flush-capability", "120",
                      "-c", "2", "--seconds", "1.5"])
    assert (a.command, a.target, a.set, a.flush_capability, a.clients, a.seconds) == \
        ("durability", "embedded:postgres", ["fsync=off"], 120.0, (2,), 1.5)
    assert p.parse_args(["durability", "x"]).clients == (1, 4)
    f = p.parse_args(["fsync-test", "--dir", "/tmp", "--seconds", "0.1", "--json"])
    assert (f.command, f.dir, f.seconds, f.json, f.targets) == ("fsync-test", Path("/tmp"), 0.1, True, [])
    with pytest.raises(SystemExit):
        p.parse_args(["durability", "x", "--flush-capability", "0"])


def test_writable_dir_walks_up_on_the_same_filesystem(disk_dir: Path) -> None:
    assert fc.writable_dir_on_same_fs(str(disk_dir)) == disk_dir
    locked = disk_dir / "locked"
    locked.mkdir(mode=0o500)
    if os.geteuid() == 0:
        assert fc.writable_dir_on_same_fs(str(locked)) == locked  # root may write anywhere
    else:
        assert fc.writable_dir_on_same_fs(str(locked)) == disk_dir
    with pytest.raises(DiagError):
        fc.writable_dir_on_same_fs(str(disk_dir / "missing"))


def test_flush_capability_is_measured_once_per_device(disk_dir: Path) -> None:
    (disk_dir / "a").mkdir()
    (disk_dir / "b").mkdir()
    out = fc.measure_flush_capability([("a", str(disk_dir / "a")), ("b", str(disk_dir / "b")), ("r", None)],
                                      seconds_per_test=0.05, progress=None)
    json.dumps(out)  # run.json material
    dev = out["targets"]["a"]["device"]
    assert dev and out["targets"]["b"]["device"] == dev and list(out["devices"]) == [dev]
    assert out["targets"]["r"]["device"] is None and "not known" in out["targets"]["r"]["error"]
    entry = out["devices"][dev]
    assert entry["ops_per_s"] > 0 and entry["fsync_test"]["directory"] == str(disk_dir / "a")
    assert os.listdir(disk_dir / "a") == []  # the test file is gone
    run = {"flush_capability": out, "options": {}}
    assert dv.flush_capability(run, "b").ops_per_s == pytest.approx(entry["ops_per_s"])


def test_a_failed_test_is_recorded_not_raised(disk_dir: Path) -> None:
    out = fc.measure_flush_capability([("x", str(disk_dir / "gone"))], 0.05, progress=None)
    assert out["targets"]["x"]["device"] is None and out["targets"]["x"]["error"]


def test_text_output_shows_numbers_formulas_and_verdict() -> None:
    b = bundle(tps=600.0, clients=2, user_F=120.0, flush=flush_series(S=300.0, D=310.0))
    b.run["targets"][0].update(product="postgresql", data_directory="/srv/pg")
    steps = dv.durability_rows(b)
    code, line = dv.overall(steps)
    text = format_durability(b.run, steps, code, line)
    assert "Settings: DURABLE" in text
    assert "F (flush capability): 120.0 flushes/s" in text
    assert "[FAIL] flush_capacity: C <= F x c x 1.5: 600 <= 120 x 2 x 1.5 = 360" in text
    assert "data directory /srv/pg (ext4 on vda; write cache: write back)" in text
    assert text.rstrip().endswith("(exit 1)")
    row = next(ln for ln in text.splitlines() if ln.strip().startswith("2 "))
    assert "600.0" in row and "300.0" in row and "0.50" in row and "implausible" in row


def test_fsync_test_command_json(disk_dir: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "diag", "fsync-test", "--dir", str(disk_dir), "--seconds", "0.05",
                        "--json"], capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert p.returncode == 0, p.stderr
    (res,) = json.loads(p.stdout)["fsync_tests"]
    assert res["target"] is None and res["directory"] == str(disk_dir)
    assert res["best_flush_capability_ops_per_s"] > 0
    assert os.listdir(disk_dir) == []


def test_fsync_test_command_text_and_errors(disk_dir: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "diag", "fsync-test", "--dir", str(disk_dir), "--seconds", "0.05"],
                       capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert p.returncode == 0 and "fdatasync" in p.stdout and "ops/sec" in p.stdout
    p = subprocess.run([sys.executable, "-m", "diag", "fsync-test", "--dir", str(disk_dir / "nope")],
                       capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines()[-1].startswith("dbdiag: error:")
    p = subprocess.run([sys.executable, "-m", "diag", "fsync-test", "embedded:postgres", "--dir", str(disk_dir)],
                       capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert p.returncode == 2 and "either TARGETs or --dir" in p.stderr
