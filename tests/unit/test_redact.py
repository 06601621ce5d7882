"""diag.core.redact: every form a password takes in a DSN, a URL, a conninfo string or a command line, hidden."""

from __future__ import annotations

import json
import sys
import urllib.parse
from pathlib import Path

import pytest

from diag.core.engines.base import DriverInfo
from diag.core.errors import UsageError
from diag.core.redact import (MASK, RedactingStream, redact_argv, redact_text, redact_url, redact_userinfo, spellings,
                         url_credentials)
from diag.core.targets import parse_target

# (text as given, the password the target parses from it, the text as it must be written)
DSN_FORMS = [
    ("postgresql://postgres:s3cr3tpw@127.0.0.1:5432/postgres", "s3cr3tpw",
     "postgresql://postgres:***@127.0.0.1:5432/postgres"),
    ("postgresql://postgres:p@ss9999@127.0.0.1:5432/postgres", "p@ss9999",
     "postgresql://postgres:***@127.0.0.1:5432/postgres"),
    ("postgresql://postgres:p%40ss9999@127.0.0.1/db", "p@ss9999", "postgresql://postgres:***@127.0.0.1/db"),
    ("postgresql://postgres@127.0.0.1:5432/postgres?password=abc", "abc",
     "postgresql://postgres@127.0.0.1:5432/postgres?password=***"),
    ("postgresql://postgres@127.0.0.1/postgres?password=p%40ss1234&sslmode=disable", "p@ss1234",
     "postgresql://postgres@127.0.0.1/postgres?password=***&sslmode=disable"),
    ("postgresql://postgres@127.0.0.1/postgres?sslmode=disable&password=a+b1234", "a+b1234",
     "postgresql://postgres@127.0.0.1/postgres?sslmode=disable&password=***"),
    ("mysql://root:x@127.0.0.1:3306/db", "x", "mysql://root:***@127.0.0.1:3306/db"),
    ("mariadb://u:a:b:c@h/db", "a:b:c", "mariadb://u:***@h/db"),
    ("mysql://u@h/db?password=Zz9&x=1", "Zz9", "mysql://u@h/db?password=***&x=1"),
    ("lbl=postgresql://:only-pw@h/db", "only-pw", "lbl=postgresql://:***@h/db"),
]


@pytest.mark.parametrize("given,password,shown", DSN_FORMS, ids=[f[0] for f in DSN_FORMS])
def test_every_dsn_form_is_redacted_and_still_parses(given: str, password: str, shown: str) -> None:
    assert redact_text(given) == shown
    t = parse_target(given)
    assert t.password == password  # the password still reaches the driver, unchanged ("+" stays a plus, as libpq)
    assert password not in t.redacted() and password not in json.dumps(t.to_dict())


@pytest.mark.parametrize("text,shown", [
    ("host=127.0.0.1 user=postgres password=s3cr3t dbname=x", "host=127.0.0.1 user=postgres password=*** dbname=x"),
    ("host=h password = 'it\\'s a secret' dbname=y", "host=h password = *** dbname=y"),
    ("dbname=x PASSWORD=ab", "dbname=x PASSWORD=***"),
    ("host=h sslpassword=keypw", "host=h sslpassword=***"),
    ("user=u passwd=pw1 pwd=pw2", "user=u passwd=*** pwd=***"),
])
def test_conninfo_key_values(text: str, shown: str) -> None:
    assert redact_text(text) == shown


def test_a_conninfo_target_is_refused_without_echoing_its_password() -> None:
    with pytest.raises(UsageError) as e:
        parse_target("host=127.0.0.1 user=postgres password=hunter2xyz dbname=postgres")
    assert "hunter2xyz" not in str(e.value) and MASK in str(e.value)


def test_unparseable_dsn_message_hides_password() -> None:
    with pytest.raises(UsageError) as e:
        parse_target("postgresql://u:p@ss!word@h:notaport/db")
    assert "ss!word" not in str(e.value)


def test_names_that_hold_the_word_stay() -> None:
    text = ('{"password_encryption": "scram-sha-256", "default_password_lifetime": "0", '
            '"t": "postgres@127.0.0.1:5432", "passfile": "/root/.pgpass", "url": "http://127.0.0.1:9100/metrics"}')
    assert redact_text(text) == text
    # a passfile reference names a file: it stays (dbdiag never reads it)
    assert redact_text("postgresql://u@h/db?passfile=/home/u/.pgpass") == "postgresql://u@h/db?passfile=/home/u/.pgpass"


def test_host_metrics_url() -> None:
    url = "http://nodeuser:n0de%40pw@127.0.0.1:9100/metrics"
    assert redact_url(url) == "http://nodeuser:***@127.0.0.1:9100/metrics"
    assert url_credentials(url) == ("http://127.0.0.1:9100/metrics", "nodeuser", "n0de@pw")
    assert url_credentials("http://127.0.0.1:9100/metrics") == ("http://127.0.0.1:9100/metrics", None, None)
    assert url_credentials("https://u@h/m") == ("https://h/m", "u", None)
    assert redact_url("https://u@h/m") == "https://u@h/m"  # a user name alone is no secret


def test_argv_with_every_form() -> None:
    argv = ["dbdiag", "run", "a=postgresql://postgres:p@ss9999@127.0.0.1/postgres",
            "b=postgresql://postgres@127.0.0.1/postgres?password=p%40ss1234", "--host-metrics",
            "a=http://u:np4ss@127.0.0.1:9100/metrics", "--ssh", "a=admin:sshpw@db1", "--ssh=b=admin:sshpw2@db2",
            "--ssh", "c=db3", "-w", "point-select"]
    out = redact_argv(argv, ["p@ss9999", "p@ss1234", "np4ss"])
    assert out == ["dbdiag", "run", "a=postgresql://postgres:***@127.0.0.1/postgres",
                   "b=postgresql://postgres@127.0.0.1/postgres?password=***", "--host-metrics",
                   "a=http://u:***@127.0.0.1:9100/metrics", "--ssh", "a=admin:***@db1", "--ssh=b=admin:***@db2",
                   "--ssh", "c=db3", "-w", "point-select"]
    assert redact_userinfo("admin@db1") == "admin@db1"


def test_known_secrets_in_every_spelling_and_short_ones_left_to_the_patterns() -> None:
    pw = 'p@ss "w0rd"+/'
    forms = list(spellings(pw))
    assert urllib.parse.quote(pw, safe="") in forms and urllib.parse.quote_plus(pw) in forms
    assert json.dumps(pw)[1:-1] in forms
    for f in forms:
        assert f not in redact_text(f"said: {f}!", [pw])
    # blind replacement of a short secret would mangle ordinary words; its DSN forms are still caught
    assert redact_text("abc abcdef", ["abc"]) == "abc abcdef"
    assert redact_text("mysql://u:abc@h/", ["abc"]) == "mysql://u:***@h/"


def test_redacting_stream(capsys: pytest.CaptureFixture[str]) -> None:
    out = RedactingStream(sys.stderr, ["longsecret"])
    print("connect postgresql://u:longsecret@h/db failed; longsecret", file=out)
    err = capsys.readouterr().err
    assert "longsecret" not in err and err.count(MASK) == 2


def test_where_the_password_comes_from_is_said_never_the_password(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """run.json's ``credentials`` of a target: the DSN, PGPASSWORD or the passfile libpq reads (by path)."""
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.delenv("PGPASSFILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.pgpass here
    pf = tmp_path / "pgpass"
    pf.write_text("*:*:*:*:Pa55file-secret\n")
    t = parse_target(f"postgresql://u@h/db?passfile={pf}")
    assert t.passfile == str(pf) and t.password is None
    kw = t.dbms.connect_kwargs(t, DriverInfo("psycopg", "", None), True, 5, "x")
    assert kw["passfile"] == str(pf) and "password" not in kw  # libpq reads it, dbdiag does not
    said = json.dumps(t.to_dict())
    assert f"passfile {pf}" in said and "Pa55file-secret" not in said
    assert parse_target("postgresql://u@h/db").to_dict()["credentials"] == "no password"
    (tmp_path / ".pgpass").write_text("")
    assert parse_target("postgresql://u@h/db").to_dict()["credentials"].startswith(f"passfile {tmp_path}/.pgpass")
    monkeypatch.setenv("PGPASSWORD", "env-secret-1")
    said = json.dumps(parse_target("postgresql://u@h/db").to_dict())
    assert "PGPASSWORD" in said and "env-secret-1" not in said
    assert parse_target("mysql://u:pw@h/").to_dict()["credentials"] == "password in the DSN (***)"


def test_a_status_line_is_searched_for_key_value_passwords_only_when_it_has_an_equals_sign():
    """Every series line passes redact_text; a MariaDB status record holds "Sort_merge_passes" and no "=", and
    the password=VALUE patterns are not run over its 20 KB (they cost ~0.5 ms there). With an "=" they are."""
    line = '{"status.Sort_merge_passes": 0, "status.Com_select": 5}'
    assert redact_text(line) == line
    with_dsn = line[:-1] + ', "dsn": "host=db password=hunter2 user=u"}'
    assert redact_text(with_dsn) == line[:-1] + ', "dsn": "host=db password=*** user=u"}'
    url = '{"passes": 1, "url": "pg://h/d?password=p%40ss"}'
    assert redact_text(url) == '{"passes": 1, "url": "pg://h/d?password=***"}'
