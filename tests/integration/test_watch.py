"""``dbdiag watch`` on real servers with real load tools (issue 21's must-show cases), kept short.

Each test makes its own uniquely named database on a server (the shared services or the session's
throwaway PostgreSQL) and drops it after. Expected figures come from the load tools' own output and the
bundle's raw rows, never from the report code under test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from diag.core.bundle import load_bundle
from diag.core.db import Session
from diag.core.targets import parse_target
from reports.model.accounting import accounts
from reports.model.watch_view import watch_section
from tests.retry import twice

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "watch"
PG = "postgresql://postgres@127.0.0.1:5432"
MY = "mysql://root@127.0.0.1:3306"


def dbdiag(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diag", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=str(REPO))


def _name(tag: str) -> str:
    return f"dbdiag_watch_{tag}_{os.getpid()}"


@pytest.fixture
def pg_db() -> Iterator[str]:
    """A fresh database on the shared PostgreSQL (its name)."""
    name = _name("pg")
    with Session(parse_target(f"{PG}/postgres")) as s:
        s.execute(f"DROP DATABASE IF EXISTS {name}")
        s.execute(f"CREATE DATABASE {name}")
    yield name
    with Session(parse_target(f"{PG}/postgres")) as s:
        s.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _rows(path: Path) -> list[dict]:
    return json.loads((path / "results.json").read_text())["results"]


def _run_json(path: Path) -> dict:
    return json.loads((path / "run.json").read_text())


def _lifetime(path: Path) -> float:
    cmd = _run_json(path)["watch"]["command"]
    return cmd["ended"] - cmd["started"]


def _wait_rows(path: Path, n: int, timeout_s: float = 60) -> None:
    """Until the watch at ``path`` has written ``n`` window rows."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (path / "results.json").exists() and len(_rows(path)) >= n:
            return
        time.sleep(0.2)
    raise AssertionError(f"the watch wrote fewer than {n} windows in {timeout_s} s")


def _every_window_names_a_limit(path: Path) -> None:
    rows = _rows(path)
    findings = json.loads((path / "findings.json").read_text())["findings"]
    named = {(f["target"], f["workload"]) for f in findings if f["category"] == "limit"}
    assert rows and all((r["target"], r["workload"]) in named for r in rows if r["transactions"] > 0), named


def test_pgbench_server_side_matches_pgbench(pg_server, tmp_path):
    """pgbench -S under a watch on a throwaway server with pg_stat_statements: the server's transactions/s
    over pgbench's life within 10% of pgbench's own, every window a limit, pgbench's statement in the
    statements, and the load's client CPU (pgbench's process) in the accounting."""
    db = _name("pgb")
    with Session(pg_server.target()) as s:
        s.execute(f"CREATE DATABASE {db}")
    dsn = pg_server.dsn().rsplit("/", 1)[0] + f"/{db}"
    try:
        with Session(parse_target(dsn)) as s:  # the test's own set-up: a watch never creates extensions
            s.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn = ["-h", "127.0.0.1", "-p", str(pg_server.port), "-U", "postgres"]
        subprocess.run(["pgbench", *conn, "-i", "-s", "1", "-q", db], check=True, capture_output=True, timeout=120)
        out = tmp_path / "w"
        p = dbdiag("watch", f"pg={dsn}", "--window", "2", "--no-profile", "--out", str(out), "--",
                   "pgbench", *conn, "-n", "-c", "4", "-j", "2", "-T", "6", "-P", "1", "-S", db)
        assert p.returncode == 0, p.stderr[-3000:]
        log = (out / "artifacts" / "load-command.log").read_text()
        pgbench_tps = float(re.search(r"^tps = ([\d.]+)", log, re.M)[1])
        server_txn = sum(r["transactions"] for r in _rows(out))
        server_tps = server_txn / _lifetime(out)
        assert abs(server_tps - pgbench_tps) / pgbench_tps < 0.10, (server_tps, pgbench_tps)
        _every_window_names_a_limit(out)
        texts = [s["text"] for r in _rows(out) for s in (r.get("statements") or {}).get("statements", [])]
        assert any("pgbench_accounts" in t and "abalance" in t for t in texts), texts
        b = load_bundle(out)
        client = [acc for _step, acc in accounts(b) if acc.us("client_cpu") > 0
                  and "psutil" in str(acc.evidence.get("client_cpu_source"))]
        assert client, [acc.evidence for _s, acc in accounts(b)]
        report = (out / "report.html").read_text()
        assert "Watched load" in report
        # the statements section of the report has pgbench's statement (a fingerprint: its literal is a "?")
        stmts = report[report.index('id="statements"'):]
        assert re.search(r"SELECT abalance FROM pgbench_accounts WHERE aid = (\?|\$1)", stmts), stmts[:2000]
        # the report states the watch's own cost: its sessions' backends' CPU, from the host series
        assert re.search(r"its \d+ session\(s\)&#39; backends used [\d.]+% of one core of server CPU", report)
    finally:
        with Session(pg_server.target()) as s:
            s.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def test_sysbench_on_mariadb(pg_db, tmp_path):
    """sysbench oltp_read_write under a watch of the shared MariaDB: Com_commit + Com_rollback counts
    sysbench's transactions (within 10% of its own rate), every window names a limit, sysbench's CPU is the
    client CPU of the accounting."""
    db = _name("sb")
    with Session(parse_target(f"{MY}/")) as s:
        s.execute(f"DROP DATABASE IF EXISTS {db}")
        s.execute(f"CREATE DATABASE {db}")
    sb = ["sysbench", "oltp_read_write", "--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-user=root",
          f"--mysql-db={db}", "--tables=1", "--table-size=1000"]
    try:
        subprocess.run([*sb, "prepare"], check=True, capture_output=True, timeout=120)
        out = tmp_path / "w"
        # two targets watched at once; the command loads only MariaDB (an idle PostgreSQL database beside it)
        p = dbdiag("watch", f"maria={MY}/{db}", f"idle={PG}/{pg_db}", "--window", "2", "--no-profile", "--out",
                   str(out), "--", *sb, "--threads=4", "--time=6", "--report-interval=1", "run")
        assert p.returncode == 0, p.stderr[-3000:]
        log = (out / "artifacts" / "load-command.log").read_text()
        sb_txn = int(re.search(r"transactions:\s+(\d+)", log)[1])
        maria = [r for r in _rows(out) if r["target"] == "maria"]
        server_txn = sum(r["transactions"] for r in maria)
        assert abs(server_txn - sb_txn) / sb_txn < 0.10, (server_txn, sb_txn)
        assert all("Com_commit" in r["counted"] for r in maria if r["transactions"] > 0)
        _every_window_names_a_limit(out)
        assert any(isinstance(r.get("client"), dict) and r["client"]["tool"] == "sysbench" for r in maria)
        b = load_bundle(out)  # sysbench's process tree (the load command) is the clients: their CPU is accounted
        assert any(acc.us("client_cpu") > 0 for step, acc in accounts(b) if step.target == "maria"), \
            [acc.evidence for _s, acc in accounts(b)]
        idle = [r for r in _rows(out) if r["target"] == "idle"]
        assert idle and not any(r.get("client") for r in idle)  # the command's figures are not the idle one's
        findings = json.loads((out / "findings.json").read_text())["findings"]
        assert not [f for f in findings if f["category"] == "client_server_disagree"], findings
    finally:
        with Session(parse_target(f"{MY}/")) as s:
            s.execute(f"DROP DATABASE IF EXISTS {db}")


def test_application_script_dbdiag_does_not_know(pg_db, tmp_path):
    """A Python application (psycopg, three statements per transaction, 10 ms think time): the server's count
    agrees with the script's own within 10%, and its process tree's CPU is the clients'."""
    out = tmp_path / "w"
    dsn = f"{PG}/{pg_db}"
    p = dbdiag("watch", f"app={dsn}", "--window", "2", "--no-profile", "--out", str(out), "--",
               sys.executable, str(DATA / "app_like.py"), dsn, "4")
    assert p.returncode == 0, p.stderr[-3000:]
    log = (out / "artifacts" / "load-command.log").read_text()
    app_txn = int(re.search(r"app finished: (\d+) business transactions", log)[1])
    server_txn = sum(r["transactions"] for r in _rows(out))
    assert app_txn > 50 and abs(server_txn - app_txn) / app_txn < 0.10, (server_txn, app_txn)
    assert not any(r.get("client") for r in _rows(out))  # nothing it prints is a known progress line
    _every_window_names_a_limit(out)
    b = load_bundle(out)
    assert any(acc.us("client_cpu") > 0 for _s, acc in accounts(b))


def test_idle_server_says_no_load_and_sigterm_ends_cleanly(pg_db, tmp_path):
    """A watch of a database nobody uses: "no load seen", exit 0; SIGTERM mid-watch ends it with a complete
    bundle and a rendered report. The shared PostgreSQL has no pg_stat_statements: the report says why. A local
    process connected to another database is not taken for a client of the watched one."""
    out = tmp_path / "w"
    # a local process connected to another database of the server: not a client of the watched one
    other = subprocess.Popen([sys.executable, "-c", "import sys, time, psycopg; c = psycopg.connect(sys.argv[1]); "
                              "print('up', flush=True); time.sleep(60)", f"{PG}/postgres"], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "up"
        proc = subprocess.Popen([sys.executable, "-m", "diag", "watch", f"idle={PG}/{pg_db}", "-T", "60",
                                 "--window", "2", "--no-profile", "--out", str(out)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=str(REPO))
        _wait_rows(out, 2)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        other.kill()
        other.wait(10)
    assert proc.returncode == 0, stderr[-3000:]
    assert "Traceback" not in stderr
    assert "no load seen" in stdout, stdout
    run = _run_json(out)
    assert run["status"] == "complete" and run["watch"]["ended_by"] == "stopped by SIGTERM"
    rows = _rows(out)
    assert len(rows) >= 2 and all(r["tps"] < 2.0 for r in rows), rows
    # the server did count dbdiag's own reads, and the estimate taken out covers them (it errs high on an idle
    # database: PostgreSQL defers the counts of sessions busier than once a second)
    raw = sum(r["server_transactions"] for r in rows)
    secs = sum(r["measured_s"] for r in rows)
    assert raw > 0 and all(r["server_transactions"] - r["own_estimate"] < 2.0 * r["measured_s"] for r in rows), rows
    assert secs > 3
    report = (out / "report.html").read_text()
    assert "No load seen" in report and "pg_stat_statements" in report
    # the server names the other process's session as one of database postgres: it is left out
    assert all(other.pid not in r["local_clients"]["pids"] and r["local_clients"]["elsewhere"] >= 1
               for r in rows), [r["local_clients"] for r in rows]
    assert "client CPU: not known" in report


def test_failing_load_command_is_one_line_and_keeps_the_bundle(pg_db, tmp_path):
    out = tmp_path / "w"
    p = dbdiag("watch", f"pg={PG}/{pg_db}", "--window", "1", "--no-collect", "--no-profile", "--out", str(out),
               "--", "sh", "-c", "echo the load failed; exit 3")
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("dbdiag: error:")]
    assert len(errors) == 1 and "status 3" in errors[0], p.stderr
    assert _run_json(out)["watch"]["command"]["exit_status"] == 3
    assert "the load failed" in (out / "artifacts" / "load-command.log").read_text()
    assert (out / "report.html").exists()


def test_compare_two_watches_synchronous_commit_on_and_off(tmp_path):
    """The same pgbench (simple-update: no branch-row hot spot) watched with synchronous_commit on and off
    (set per session by the client through PGOPTIONS, the server untouched): ``dbdiag compare`` pairs each watch
    as one step whose samples are its 1 s windows wholly inside pgbench's life (6-7 a side), says the gap is
    significant, that the two are not at the same durability level, and names the commit flush as the largest
    part of the gap, in its sentences and its table. Here the flush makes "on" 2-3x slower (01:43 UTC, load 10
    on 2 vCPUs: 620 against 1,400 tps, p=0.0006 with 7+7 windows). The pair runs once more when it misses
    (tests.retry)."""
    db = _name("sc")
    with Session(parse_target(f"{PG}/postgres")) as s:
        s.execute(f"DROP DATABASE IF EXISTS {db}")
        s.execute(f"CREATE DATABASE {db}")
    conn = ["-h", "127.0.0.1", "-U", "postgres"]
    try:
        subprocess.run(["pgbench", *conn, "-i", "-s", "1", "-q", db], check=True, capture_output=True, timeout=120)

        def attempt(i: int) -> None:
            paths = {}
            for sc in ("on", "off"):
                paths[sc] = tmp_path / f"{sc}{i}"
                p = subprocess.run([sys.executable, "-m", "diag", "watch", f"pg={PG}/{db}", "--window", "1",
                                    "--no-profile", "--out", str(paths[sc]), "--", "pgbench", *conn, "-n", "-N", "-c",
                                    "4", "-j", "2", "-T", "8", db], capture_output=True, text=True, timeout=120,
                                   cwd=str(REPO), env={**os.environ, "PGOPTIONS": f"-c synchronous_commit={sc}"})
                assert p.returncode == 0, p.stderr[-3000:]
            p = dbdiag("compare", str(paths["on"]), str(paths["off"]), "--json")
            assert p.returncode == 0, p.stderr
            items = json.loads(p.stdout)["comparisons"]
            assert [(e["workload"], e["clients"]) for e in items] == [("watch", 4)], items
            e = items[0]
            sig = e["significance"]
            assert sig["verdict"] == "significant" and sig["n_a"] >= 5 and sig["n_b"] >= 5, sig
            # the faster side is the second watch named (synchronous_commit=off), and the sentences say so
            assert e["fast_name"] == "pg (second run)" and e["slow_name"] == "pg (first run)", e
            text = " ".join(e["sentences"])
            assert "within noise" not in text, text
            assert "synchronous_commit=off" in text and "not at the same durability level" in text, text
            gap = max(e["differences"], key=lambda d: d.get("share_of_gap") or 0)
            # The largest part, not a majority: a backend asleep in the flush is woken after it, and those wake-ups
            # show as their own parts (round trips, CPU per transaction: 41-61% of the gap was the flush here,
            # 29-30% round trips in the runs where it was least, and 39% against 35% in one CI run).
            assert gap["metric"] == "wait:commit_flush" and gap["share_of_gap"] > 0.3, e["differences"]
            # the first sentence that apportions the gap names the commit flush
            parts = [x for x in e["sentences"] if "of the gap" in x]
            assert parts and "commit flush" in parts[0], e["sentences"]

        twice(attempt)
    finally:
        with Session(parse_target(f"{PG}/postgres")) as s:
            s.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def _pg_state(s: Session) -> tuple:
    return (sorted((r["name"], r["setting"]) for r in s.query("SELECT name, setting FROM pg_settings")),
            sorted(r["extname"] for r in s.query("SELECT extname FROM pg_extension")))


def test_least_privilege_watch_of_a_running_load_shows_phases(pg_db, tmp_path):
    """A role without pg_monitor watches a database where another role's pgbench runs and then stops: the watch
    runs, counts the transactions (pg_stat_database is open to all), says the sessions' state was hidden and
    which role would show it, shows a load phase then an idle one, and changes no setting or extension. No load
    command names the clients: the local pgbench connected to the server's port is found, and its CPU is the
    client CPU of the accounting while it runs."""
    role = _name("lp")
    admin = parse_target(f"{PG}/{pg_db}")
    conn = ["-h", "127.0.0.1", "-U", "postgres"]
    subprocess.run(["pgbench", *conn, "-i", "-s", "1", "-q", pg_db], check=True, capture_output=True, timeout=120)
    with Session(admin) as s:
        s.execute(f"DROP ROLE IF EXISTS {role}")
        s.execute(f"CREATE ROLE {role} LOGIN")
        before = _pg_state(s)
    # the load is already there when the watch starts; it is stopped once two windows saw it
    load = subprocess.Popen(["pgbench", *conn, "-n", "-S", "-c", "2", "-T", "60", pg_db], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    out = tmp_path / "w"
    try:
        time.sleep(0.5)
        watch = subprocess.Popen([sys.executable, "-m", "diag", "watch", f"lp=postgresql://{role}@127.0.0.1:5432/"
                                  f"{pg_db}", "--window", "2", "--no-profile", "--out", str(out)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO))
        _wait_rows(out, 2)
        load.terminate()
        load.wait(30)
        _wait_rows(out, 5)
        watch.send_signal(signal.SIGINT)
        _stdout, stderr = watch.communicate(timeout=60)
        assert watch.returncode == 0, stderr[-3000:]
    finally:
        load.kill()
        load.wait(30)
        with Session(admin) as s:
            after = _pg_state(s)
            s.execute(f"DROP OWNED BY {role}")
            s.execute(f"DROP ROLE IF EXISTS {role}")
    assert before == after
    rows = _rows(out)
    assert rows[0]["tps"] > 50 and rows[-1]["tps"] < 2.0, [r["tps"] for r in rows]
    assert any(r.get("sessions_hidden") for r in rows), rows
    report = (out / "report.html").read_text()
    assert "pg_monitor" in report and "hidden from this role" in report
    b = load_bundle(out)
    findings = json.loads((out / "findings.json").read_text())["findings"]
    found = watch_section(b, findings)["phases"]  # as the report has them: with each window's named limit
    assert len(found) >= 2 and found[0]["limit"] not in ("idle", "unknown") and found[-1]["limit"] == "idle", found
    assert "<h3>Phases</h3>" in report and found[0]["limit"] in report
    # no load command named the clients: the local processes connected to the server's port are them
    assert "pgbench" in rows[0]["local_clients"]["names"], rows[0]
    assert "pgbench" not in rows[-1]["local_clients"]["names"], rows[-1]
    # the windows pgbench ran in (host samples at 1 s on a loaded machine: one of them may lack a baseline)
    loaded = {r["workload"] for r in rows if "pgbench" in r["local_clients"]["names"]}
    cpu = [acc for step, acc in accounts(b) if step.workload in loaded and acc.us("client_cpu") > 0]
    assert cpu, [acc.evidence for _s, acc in accounts(b)]
    assert "psutil" in str(cpu[0].evidence.get("client_cpu_source"))
    # (this role cannot see the sessions' ports: local processes connected to other databases are kept too,
    # and the report says so)
    assert re.search(r"measured for the processes of this host connected to the server \([^)]*pgbench", report)
    assert "sessions this role cannot see" in report


def test_client_and_server_disagree_when_a_tool_transaction_is_two(pg_db, tmp_path):
    """A pgbench script whose one "transaction" is two database transactions: the server counts twice pgbench's
    figure and the report says they disagree (client_server_disagree); the pgbench -S watch above agrees."""
    script = tmp_path / "two.sql"
    script.write_text("BEGIN;\nSELECT 1;\nCOMMIT;\nBEGIN;\nSELECT 2;\nCOMMIT;\n")
    out = tmp_path / "w"
    p = dbdiag("watch", f"pg={PG}/{pg_db}", "--window", "2", "--no-collect", "--no-profile", "--out", str(out),
               "--", "pgbench", "-h", "127.0.0.1", "-U", "postgres", "-n", "-f", str(script), "-c", "2", "-T", "3",
               pg_db)
    assert p.returncode == 0, p.stderr[-3000:]
    findings = json.loads((out / "findings.json").read_text())["findings"]
    dis = [f for f in findings if f["category"] == "client_server_disagree"]
    assert len(dis) == 1 and 70 < dis[0]["evidence"]["gap_pct"] < 130, dis


def test_least_privilege_watch_on_mariadb(tmp_path):
    """A MariaDB user with SELECT on one database only watches root's sysbench: the transactions are counted
    (global status is open to all) and the report names what PROCESS and SELECT on performance_schema hid."""
    db, user = _name("lpsb"), _name("lpu")
    root = parse_target(f"{MY}/")
    sb = ["sysbench", "oltp_read_write", "--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-user=root",
          f"--mysql-db={db}", "--tables=1", "--table-size=1000"]
    with Session(root) as s:
        s.execute(f"DROP DATABASE IF EXISTS {db}")
        s.execute(f"CREATE DATABASE {db}")
        s.execute(f"DROP USER IF EXISTS '{user}'@'%'")
        s.execute(f"CREATE USER '{user}'@'%'")
        s.execute(f"GRANT SELECT ON {db}.* TO '{user}'@'%'")
        before = sorted((r["Variable_name"], r["Value"]) for r in s.query("SHOW GLOBAL VARIABLES"))
    load = None
    try:
        subprocess.run([*sb, "prepare"], check=True, capture_output=True, timeout=120)
        load = subprocess.Popen([*sb, "--threads=2", "--time=60", "run"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        out = tmp_path / "w"
        p = dbdiag("watch", f"lp=mysql://{user}@127.0.0.1:3306/{db}", "-T", "2", "--window", "2", "--no-profile",
                   "--out", str(out))
        assert p.returncode == 0, p.stderr[-3000:]
        assert _rows(out)[0]["tps"] > 10, _rows(out)
        report = (out / "report.html").read_text()
        assert "GRANT PROCESS ON *.*" in report and "GRANT SELECT ON performance_schema.*" in report
    finally:
        if load is not None:
            load.kill()
            load.wait(10)
        with Session(root) as s:
            after = sorted((r["Variable_name"], r["Value"]) for r in s.query("SHOW GLOBAL VARIABLES"))
            s.execute(f"DROP USER IF EXISTS '{user}'@'%'")
            s.execute(f"DROP DATABASE IF EXISTS {db}")
    changed = {k for (k, v) in set(before) ^ set(after)}
    assert not changed - {"gtid_binlog_pos", "gtid_binlog_state", "gtid_current_pos"}, changed
