"""Lost connections and lost servers, on real throwaway servers, through `dbdiag run`.

(a) One workload backend terminated from an outside session mid-step (``pg_terminate_backend`` /
    ``KILL``): the client reconnects, the step runs its whole time, the run exits 0.
(b) The server process killed with SIGKILL mid-step, in a run with a second target: exit code 3, the
    cut step's row says ``complete: false`` and how long it measured, a critical ``server_lost`` finding
    names the step with the server's exit status and log, the lost target's next step is skipped and
    the second target's steps still run. On MariaDB the same at the sweep level (mariadbd killed).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from diag.core import servers
from diag.core.bundle import BundleWriter, load_bundle, read_jsonl
from diag.core.db import Session
from diag.core.errors import ServerLost
from workloads.driver import DriverOptions
from tests.sweep import KillServerAfter, sweep_rows

REPO = Path(__file__).resolve().parents[2]
START_DEADLINE_S = 150.0  # server start and data load on a busy 2-vCPU machine
STEP_S = 2.5


def _run(out: Path, *targets: str, workload: str = "point-select", clients: str = "2",
         collect: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "diag", "run", *targets, "-w", workload, "-c", clients,
                             "-T", str(STEP_S), "--warmup", "0.3", "--no-profile", "--out", str(out),
                             *(() if collect else ("--no-collect",))],
                            cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _measuring(p: subprocess.Popen[str], out: Path, target: str) -> None:
    """Wait until the first step of ``target`` is in its measured part (its step_started event)."""
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise AssertionError(f"dbdiag run ended early ({p.returncode}): {p.communicate()[1][-2000:]}")
        if any(e.get("kind") == "step_started" and e.get("target") == target
               for e in read_jsonl(out / "events.jsonl")):
            return
        time.sleep(0.1)
    p.kill()
    raise AssertionError("the step did not start within the deadline")


def _finish(p: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        _, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    assert "Traceback" not in err, err[-3000:]
    return p.returncode, err


def _clients(s: Session) -> list[Any]:
    """The workload clients' backends: PostgreSQL's by application name, MariaDB's by what they run."""
    if s.dbms.name == "postgres":
        return [r["pid"] for r in s.query("SELECT pid FROM pg_stat_activity WHERE application_name = "
                                          "'dbdiag-workload'")]
    return [r["id"] for r in s.query("SELECT id FROM information_schema.processlist WHERE id <> connection_id() "
                                     "AND info LIKE '%sbtest%'")]


def _kill_one(s: Session) -> None:
    """Terminate one workload client's backend from this outside session."""
    deadline = time.monotonic() + 10
    while not (ids := _clients(s)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert ids, "no workload client connection found"
    if s.dbms.name == "postgres":
        assert s.query(f"SELECT pg_terminate_backend({int(ids[0])}) AS ok")[0]["ok"]
    else:
        s.execute(f"KILL {int(ids[0])}")


@pytest.mark.parametrize("engine,workload", [("postgres", "read-write"), ("mysql", "point-select")])
def test_a_terminated_backend_reconnects_and_the_step_completes(engine: str, workload: str, tmp_path: Path,
                                                               request: pytest.FixtureRequest) -> None:
    srv: servers.ThrowawayServer = request.getfixturevalue("pg_server" if engine == "postgres" else "my_server")
    out = tmp_path / "run"
    with Session(srv.target(), statement_timeout_ms=0) as s:
        p = _run(out, f"db={srv.dsn()}", workload=workload)
        _measuring(p, out, "db")
        time.sleep(0.5)
        _kill_one(s)
    rc, err = _finish(p)
    assert rc == 0, err[-3000:]
    b = load_bundle(out)
    (row,) = b.results
    assert row["complete"] is True and "server_lost" not in row
    assert row["reconnects"] >= 1, row
    assert row["measured_s"] == pytest.approx(STEP_S, abs=0.3) and row["transactions"] > 0
    series = [r for k, v in b.series.items() if k.startswith("workload--") for r in v]
    assert sum(r.get("reconnects", 0) for r in series) == row["reconnects"]
    assert any(e["kind"] == "workload_client_reconnected" for e in b.events)
    assert b.run["status"] == "complete"
    assert not [f for f in b.findings if f["category"] == "server_lost"]


def test_b_a_killed_server_is_a_finding_and_the_next_target_still_runs(
        killed_server_run: tuple[Path, int, str]) -> None:
    # The run's own throwaway server, so the run knows its exit status and log; collectors on: they lose
    # the server too, and their evidence must not be read as the step's limit. Its postmaster SIGKILLed 0.7 s
    # into the first measured step (tests/conftest.py: the run test_report_reading renders too).
    out, rc, err = killed_server_run
    assert rc == ServerLost.exit_code, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("dbdiag: error: gone: the server went away (killed by signal 9 (SIGKILL))"), last
    b = load_bundle(out)
    assert b.run["status"] == "server_lost" and b.partial
    gone = [r for r in b.results if r["target"] == "gone"]
    nxt = [r for r in b.results if r["target"] == "next"]
    (cut,) = gone
    assert cut["clients"] == 1 and cut["complete"] is False and cut["measured_s"] < STEP_S - 0.5
    assert 0 <= cut["server_lost"]["after_s"] <= cut["measured_s"] + 0.01
    assert [(r["clients"], r["complete"]) for r in nxt] == [(1, True), (2, True)]
    assert all(r["transactions"] > 0 for r in nxt)
    skipped = [e for e in b.events if e["kind"] == "steps_skipped"]
    assert [e["steps"] for e in skipped] == [["point-select c=2"]]
    info = {t["label"]: t for t in b.run["targets"]}["gone"]["lost"]
    assert info["returncode"] == -signal.SIGKILL and info["log_tail"], info
    findings = json.loads((out / "findings.json").read_text())["findings"]
    (lost,) = [f for f in findings if f["category"] == "server_lost"]
    assert (lost["severity"], lost["target"], lost["workload"], lost["clients"]) == ("critical", "gone",
                                                                                    "point-select", 1)
    assert findings[0]["category"] == "server_lost"
    assert "SIGKILL" in lost["evidence"]["exit_status"] and lost["evidence"]["server_log"]
    assert lost["evidence"]["steps_not_run"] == ["point-select c=2"]
    # Nothing else reads the dead server's step as a measurement.
    assert not [f for f in findings if f["target"] == "gone" and f["category"] != "server_lost"]


def test_a_killed_mariadb_cuts_the_step_and_skips_the_rest(tmp_path: Path) -> None:
    """The same on MariaDB, at the sweep (no CLI): mariadbd SIGKILLed, the libmariadb clients see it, each with an
    error record (test_workload_engines kills a PostgreSQL that way; this is its MariaDB case, one server start
    for both)."""
    srv = servers.start_mysql()
    try:
        opts = DriverOptions(clients=(2, 4), duration_s=STEP_S, warmup_s=0.2, scale=0.02)
        rows = sweep_rows(srv.target(), ["point-select"], opts, BundleWriter(tmp_path / "run"),
                          hooks=KillServerAfter(srv, 0.7), progress=None)
    finally:
        srv.stop()
    (row,) = rows
    assert row["complete"] is False and 0.5 < row["measured_s"] < STEP_S - 0.5, row
    assert row["server_lost"]["probe"] and row["transactions"] > 0
    assert sum(row["errors"].values()) >= 2 and all(row["error_samples"].values()), row  # one per client at least
    events = read_jsonl(tmp_path / "run" / "events.jsonl")
    assert [e["steps"] for e in events if e["kind"] == "steps_skipped"] == [["point-select c=4"]]
    assert sum(1 for e in events if e["kind"] == "workload_client_lost") == 2


def test_on_error_abort_ends_the_step_at_the_first_error_and_continue_counts_on(
        pg_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    script = tmp_path / "div0.sql"
    script.write_text("\\set x random(1, 10)\nSELECT 1 / (:x * 0);\n")  # fails when run, not when prepared
    rows = {}
    for mode in ("abort", "continue"):
        opts = DriverOptions(clients=(2,), duration_s=1.5, warmup_s=0.0, script=str(script), on_error=mode)
        (rows[mode],) = sweep_rows(pg_server.target(), ["custom"], opts, BundleWriter(tmp_path / mode), progress=None)
    ab, co = rows["abort"], rows["continue"]
    assert ab["complete"] is False and ab["aborted"]["code"] == "22012" and "server_lost" not in ab
    assert ab["measured_s"] < 1.0 and 1 <= ab["errors"]["22012"] < co["errors"]["22012"]
    assert co["complete"] is True and co["measured_s"] == pytest.approx(1.5, abs=0.2) and co["transactions"] == 0
    events = read_jsonl(tmp_path / "abort" / "events.jsonl")
    assert [e["code"] for e in events if e["kind"] == "step_aborted"] == ["22012"]


def test_on_error_abort_through_the_cli_is_a_finding_and_exit_code_4(
        pg_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    """pgbench exits non-zero when a client aborted; so does dbdiag (4), with one line, a rendered report, a
    critical step_aborted finding naming the first error, and run.json's status ``aborted``."""
    script = tmp_path / "div0.sql"
    script.write_text("\\set x random(1, 10)\nSELECT 1 / (:x * 0);\n")
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "diag", "run", f"pg={pg_server.dsn()}", "-w", "custom", "--script",
                        str(script), "-c", "1", "-T", "1", "--warmup", "0", "--on-error", "abort", "--no-profile",
                        "--no-collect", "--out", str(out)], cwd=str(REPO), capture_output=True, text=True, timeout=120)
    assert p.returncode == 4, (p.returncode, p.stderr[-2000:])
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("dbdiag: error:")]
    assert len(lines) == 1 and "--on-error abort ended custom" in lines[0] and "22012" in lines[0], p.stderr
    assert "Traceback" not in p.stderr and (out / "report.html").exists()
    assert json.loads((out / "run.json").read_text())["status"] == "aborted"
    (f,) = [f for f in json.loads((out / "findings.json").read_text())["findings"] if f["category"] == "step_aborted"]
    assert f["severity"] == "critical" and f["target"] == "pg" and "22012" in f["evidence"]["first_error"]
