"""Passwords stay out of everything a run writes or prints: every form, real servers, every file grepped.

Two short ``dbdiag run``s (a ``SELECT 1`` script, 1 client, 0.5 s steps, collectors on, no profiles), each with
several targets so that one run carries several password forms:

* the machine's PostgreSQL 15 (trust authentication: the run succeeding with made-up passwords shows it takes
  any), one target per form: userinfo with ``@`` in the password, ``?password=`` percent-encoded, with ``+``,
  and a two-character one;
* the machine's MariaDB, as a user made for this module with a password holding ``@`` and ``+`` (dropped
  afterwards): userinfo as typed and ``?password=`` percent-encoded; here the steps running at all shows each
  form reached the server intact.

Each run also reads a node_exporter started here that answers only to a user and password given in the
``--host-metrics`` URL (basic auth): its host series being collected shows the credentials were used.

Every file of each bundle (recursively, as bytes: run.json with its command line, events, series, artifacts,
findings, results, report.html) and the run's stdout and stderr are searched for each secret in the spellings
it was given and the ones it decodes to. The error paths (a wrong MariaDB password, a key=value conninfo
string, an ssh destination with a password) give one line that holds no secret.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from diag.cli import main
from diag.core.db import Session
from diag.core.targets import Target
from tests.integration.test_cli_errors import assert_one_error_line, dbdiag
from tests.remote_hosts import node_exporter_with_login

NODE_USER = "nodeuser"
NODE_PW = "n0de:Pw@9137"  # in the URL: n0de%3APw%409137
NODE_NEEDLES = ("n0de:Pw@9137", "n0de%3APw%409137", "Pw@9137", "Pw%409137")
PG = "127.0.0.1:5432/postgres"
# (target, the strings that must appear nowhere)
PG_FORMS = [
    (f"a=postgresql://postgres:p@ss9999@{PG}", ("p@ss9999", "p%40ss9999", "ss9999")),
    (f"b=postgresql://postgres@{PG}?password=p%40ss1234", ("p@ss1234", "p%40ss1234", "ss1234")),
    (f"c=postgresql://postgres@{PG}?password=a+b1234", ("a+b1234", "a%2Bb1234", "a b1234", "b1234")),
    # two characters: searched in the forms they were given in ("Q7" alone may be in any histogram's base64)
    (f"d=postgresql://postgres@{PG}?password=Q7", ("password=Q7", "=Q7&", '"Q7"')),
]
MY_USER = f"dbdiag_secret_{os.getpid()}"
MY_PW = "My@pw+42"
MY_NEEDLES = ("My@pw+42", "My%40pw%2B42", "My%40pw+42", "My@pw%2B42", "pw+42", "pw%2B42", "My@pw 42")
# --flush-capability: no fsync test (a custom script may write, so one would be run)
STEP = ["-w", "custom", "-c", "1", "-T", "0.5", "--warmup", "0", "--no-profile", "--flush-capability", "100000"]


@pytest.fixture(scope="module")
def node_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """node_exporter behind basic auth: its /metrics URL with the credentials in it (NODE_PW percent-encoded)."""
    with node_exporter_with_login(tmp_path_factory.mktemp("node_auth"), NODE_USER, NODE_PW) as url:
        yield url.replace("http://", f"http://{NODE_USER}:n0de%3APw%409137@")


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> str:
    p = tmp_path_factory.mktemp("secrets_script") / "select1.sql"
    p.write_text("SELECT 1;\n")
    return str(p)


@pytest.fixture(scope="module")
def my_user(my_service: Target) -> Iterator[str]:
    """A MariaDB user with the password MY_PW on the machine's service, dropped afterwards."""
    hosts = ("localhost", "127.0.0.1", "%")
    with Session(my_service, statement_timeout_ms=0) as s:
        for h in hosts:
            s.execute(f"CREATE USER IF NOT EXISTS '{MY_USER}'@'{h}' IDENTIFIED BY '{MY_PW}'")
            s.execute(f"GRANT ALL ON dbdiag.* TO '{MY_USER}'@'{h}'")  # where workloads keep their tables
    try:
        yield MY_USER
    finally:
        with Session(my_service, statement_timeout_ms=0) as s:
            for h in hosts:
                s.execute(f"DROP USER IF EXISTS '{MY_USER}'@'{h}'")


def leaks(bundle: Path, p: subprocess.CompletedProcess[str], needles: tuple[str, ...]) -> list[str]:
    """Where any needle appears: "FILE: needle" for every file under ``bundle`` and the run's output."""
    found = [f"{f.relative_to(bundle)}: {n}" for f in sorted(bundle.rglob("*")) if f.is_file()
             for n in needles if n.encode() in f.read_bytes()]
    found += [f"{name}: {n}" for name, text in (("stdout", p.stdout), ("stderr", p.stderr)) for n in needles
              if n in text]
    return found


def check_run(bundle: Path, p: subprocess.CompletedProcess[str], needles: tuple[str, ...], labels: list[str]) -> None:
    assert p.returncode == 0, p.stderr[-3000:]
    names = {f.name for f in bundle.iterdir()}
    assert {"run.json", "events.jsonl", "results.json", "findings.json", "report.html", "series"} <= names, names
    assert len(list((bundle / "series").iterdir())) >= 3  # the collectors ran: their series are searched too
    run = (bundle / "run.json").read_text()
    assert "***" in run  # the command line is recorded, redacted
    assert leaks(bundle, p, needles) == []
    # every target ran its step (each password form reached the server) ...
    results = (bundle / "results.json").read_text()
    for label in labels:
        assert f'"target": "{label}"' in results, label
    # ... and node_exporter, which answers only with its login, fed the host series
    assert (bundle / "series" / f"host--{labels[0]}.jsonl").stat().st_size > 0


def test_postgres_password_forms(node_url: str, script: str, pg_service: Target, tmp_path: Path) -> None:
    out = tmp_path / "pg"
    p = dbdiag("run", *(t for t, _ in PG_FORMS), *STEP, "--script", script, "--host-metrics", f"a={node_url}",
               "--out", str(out), timeout=180)
    needles = tuple(n for _, ns in PG_FORMS for n in ns) + NODE_NEEDLES
    check_run(out, p, needles, ["a", "b", "c", "d"])
    run = json.loads((out / "run.json").read_text())
    assert {t["label"]: (t["dsn"], t["credentials"]) for t in run["targets"]} == {
        x: ("postgresql://postgres:***@127.0.0.1:5432/postgres", "password in the DSN (***)") for x in "abcd"}
    assert run["targets"][0]["host_metrics"].startswith(f"http://{NODE_USER}:***@127.0.0.1:")


def test_mariadb_password_forms(node_url: str, script: str, my_user: str, tmp_path: Path) -> None:
    out = tmp_path / "my"
    p = dbdiag("run", f"m1=mysql://{my_user}:{MY_PW}@127.0.0.1:3306/",
               f"m2=mysql://{my_user}@127.0.0.1:3306/?password=My%40pw+42", *STEP, "--script", script,
               "--host-metrics", f"m1={node_url}", "--out", str(out), timeout=180)
    check_run(out, p, MY_NEEDLES + NODE_NEEDLES, ["m1", "m2"])


def test_wrong_password_is_one_line_without_it(my_user: str, tmp_path: Path) -> None:
    out = tmp_path / "b"
    p = dbdiag("run", f"mysql://{my_user}:Wr0ng@Pw-77@127.0.0.1:3306/", "--out", str(out))
    assert_one_error_line(p, "access denied")
    assert (out / "run.json").exists()  # the bundle was begun (its command line written) before the connect failed
    assert leaks(out, p, ("Wr0ng@Pw-77", "Pw-77", "Wr0ng%40Pw-77")) == []


@pytest.mark.parametrize("args,secret", [
    (["host=127.0.0.1 user=postgres password=Conn1nfo-Pw dbname=postgres"], "Conn1nfo-Pw"),
    ([f"a=postgresql://postgres@{PG}", "--ssh", "a=admin:Ssh-Pw-55@db1"], "Ssh-Pw-55"),
    ([f"a=postgresql://postgres@{PG}", "--host-metrics", "a=ftp://u:Ftp-Pw-66@h/metrics"], "Ftp-Pw-66"),
])
def test_refused_forms_do_not_echo_the_secret(args: list[str], secret: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before anything starts (in this process: no server is reached): one line, no secret, no bundle."""
    rc = main(["run", *args, "--out", str(tmp_path / "b")])
    out, err = capsys.readouterr()
    assert rc == 2 and "Traceback" not in err
    assert [ln for ln in err.splitlines() if ln.startswith("dbdiag: error:")] == err.splitlines()[-1:], err
    assert len(err.splitlines()) == 1 and "***" in err, err
    assert secret not in out + err
    assert not (tmp_path / "b").exists()
