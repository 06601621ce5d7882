"""End-to-end `dbdiag run` on real servers: bundle contents, no password anywhere, report re-rendering."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diag.core.bundle import load_bundle
from diag.core.db import connect

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "Zq7-secret-Pw-9"


def dbdiag(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diag", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=str(REPO))


@pytest.fixture(scope="module")
def pw_bundle(my_server, tmp_path_factory) -> Path:
    c = connect(my_server.target())
    cur = c.cursor()
    cur.execute(f"CREATE USER IF NOT EXISTS 'benchu'@'%' IDENTIFIED BY '{PASSWORD}'")
    cur.execute("GRANT ALL ON *.* TO 'benchu'@'%'")
    c.close()
    out = tmp_path_factory.mktemp("e2e") / "bundle"
    p = dbdiag("run", f"my=mysql://benchu:{PASSWORD}@127.0.0.1:{my_server.port}/", "pg=postgresql://postgres@"
               "127.0.0.1:5432/postgres", "-c", "2", "-T", "1.5", "--warmup", "0.5", "--profile-seconds", "1",
               "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    assert PASSWORD not in p.stdout + p.stderr
    return out


def test_bundle_files_and_results(pw_bundle):
    for name in ("run.json", "results.json", "findings.json", "report.html", "events.jsonl"):
        assert (pw_bundle / name).exists(), name
    b = load_bundle(pw_bundle)
    assert b.run["status"] == "complete"
    # one client count (a sweep's rows: test_default_run): each step here costs its profile's recording and analysis
    assert {(r["target"], r["clients"]) for r in b.results} == {("my", 2), ("pg", 2)}
    for r in b.results:
        assert r["tps"] > 0 and r["transactions"] > 0 and r["driver"]
    assert isinstance(json.loads((pw_bundle / "findings.json").read_text())["findings"], list)
    run = b.run
    assert run["host"]["cpus_logical"] >= 1 and run["host"]["kernel"]
    targets = {t["label"]: t for t in run["targets"]}
    assert targets["my"]["product"] == "mariadb" and "innodb_flush_log_at_trx_commit" in targets["my"]["settings"]
    assert targets["pg"]["product"] == "postgresql" and targets["pg"]["settings"]["fsync"] == "on"
    assert targets["pg"]["data_directory"] and targets["pg"]["storage"].get("fs_type")
    assert b.series.get("host"), "host CPU sampled"
    assert len(b.series["host"]) >= 3


def test_password_appears_nowhere_under_the_bundle(pw_bundle):
    hits = []
    for root, _dirs, files in os.walk(pw_bundle):
        for f in files:
            data = (Path(root) / f).read_bytes()
            if PASSWORD.encode() in data:
                hits.append(f)
    assert hits == []
    cmd = " ".join(json.loads((pw_bundle / "run.json").read_text())["command"])
    assert "benchu:***@" in cmd


def test_report_rerenders_identically(pw_bundle):
    first = (pw_bundle / "report.html").read_bytes()
    p = dbdiag("report", str(pw_bundle))
    assert p.returncode == 0, p.stderr
    assert (pw_bundle / "report.html").read_bytes() == first
    html = first.decode()
    assert "results-table" in html and "my" in html and "pg" in html


def test_cut_off_bundle_renders_as_partial(pw_bundle, tmp_path):
    import shutil

    cut = tmp_path / "cut"
    shutil.copytree(pw_bundle, cut)
    run = json.loads((cut / "run.json").read_text())
    run["status"] = "running"
    (cut / "run.json").write_text(json.dumps(run))
    with open(cut / "series" / "host.jsonl", "a") as fh:
        fh.write('{"t": 1, "cpu.all.us')
    p = dbdiag("report", str(cut))
    assert p.returncode == 0, p.stderr
    assert 'id="partial-banner"' in (cut / "report.html").read_text()


# Ctrl-C mid-step: test_stuck_statement (Ctrl-C while commits hang); SIGTERM and SIGHUP, the same handler, on an
# embedded server whose directory must go and whose step's intervals must stay: test_no_orphans.
