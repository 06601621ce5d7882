"""`dbdiag server start`: settings applied, everything gone after Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from diag.core.db import Session
from diag.core.targets import parse_target


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    p = subprocess.Popen([sys.executable, "-m", "diag", "server", "start", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=str(Path(__file__).resolve().parents[2]))
    assert p.stdout is not None
    dsn = p.stdout.readline().strip()
    assert dsn, p.stderr.read() if p.stderr else ""
    return p, dsn


def _stop_and_check_gone(p: subprocess.Popen[str]) -> None:
    children = psutil.Process(p.pid).children(recursive=True)
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=60) == 0
    err = p.stderr.read() if p.stderr else ""
    assert "Traceback" not in err
    dirs = [ln.split(" in ", 1)[1].split(";")[0] for ln in err.splitlines() if " in /" in ln]
    assert dirs and not os.path.exists(dirs[0]), err
    deadline = time.time() + 10
    while time.time() < deadline and any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children):
        time.sleep(0.2)
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)


def test_postgres_fsync_off_then_gone():
    p, dsn = _start("postgres", "--set", "fsync=off")
    try:
        with Session(parse_target(dsn)) as s:
            assert s.query("SHOW fsync")[0]["fsync"] == "off"
    finally:
        _stop_and_check_gone(p)


def test_mysql_setting_then_gone():
    p, dsn = _start("mysql", "--set", "innodb_flush_log_at_trx_commit=2")
    try:
        with Session(parse_target(dsn)) as s:
            assert int(s.query("SELECT @@innodb_flush_log_at_trx_commit AS v")[0]["v"]) == 2
    finally:
        _stop_and_check_gone(p)
