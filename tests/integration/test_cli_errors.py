"""Bad input gets one clear line and exit code 2, never a traceback (real servers, real binaries)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from diag.core.db import connect


def dbdiag(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "diag", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=str(Path(__file__).resolve().parents[2]))


def assert_one_error_line(p: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("dbdiag: error:")]
    assert len(errors) == 1, p.stderr
    for n in needles:
        assert n.lower() in errors[0].lower(), errors[0]
    return errors[0]


def test_unknown_scheme(tmp_path):
    assert_one_error_line(dbdiag("run", "oracle://scott@127.0.0.1/orcl", "--out", str(tmp_path / "b")),
                          "unknown scheme", "oracle")


def test_unreachable_host(tmp_path):
    # Port 1 on loopback: nothing listens there, the connect is refused at once.
    assert_one_error_line(dbdiag("run", "postgresql://postgres@127.0.0.1:1/postgres", "--out", str(tmp_path / "b")),
                          "127.0.0.1")


def test_wrong_password(my_server, tmp_path):
    c = connect(my_server.target())
    cur = c.cursor()
    cur.execute("CREATE USER IF NOT EXISTS 'pwuser'@'%' IDENTIFIED BY 'right-password-1'")
    c.close()
    line = assert_one_error_line(
        dbdiag("run", f"mysql://pwuser:wrong-password-2@127.0.0.1:{my_server.port}/", "--out", str(tmp_path / "b")),
        "access denied", "password")
    assert "wrong-password-2" not in line


def test_missing_binary(tmp_path):
    assert_one_error_line(dbdiag("run", "embedded:postgres", "--out", str(tmp_path / "b"),
                                 env={"DBDIAG_PG_BINDIR": str(tmp_path / "nowhere")}), "initdb not found")


def test_missing_mysql_binary_in_server_command(tmp_path):
    assert_one_error_line(dbdiag("server", "start", "mysql", env={"DBDIAG_MYSQL_BINDIR": str(tmp_path)}),
                          "mariadbd or mysqld", "apt-get install")


def test_unwritable_out(pg_service):
    # /proc does not allow creating directories, even for root.
    assert_one_error_line(dbdiag("run", "postgresql://postgres@127.0.0.1:5432/postgres", "--out",
                                 "/proc/dbdiag-cannot-write-here"), "cannot write the run bundle")


@pytest.mark.parametrize("args", [["run", "-c", "0"], ["run", "--duration", "x"]])
def test_bad_options(args):
    p = dbdiag(*args)
    assert p.returncode == 2 and "Traceback" not in p.stderr
