"""Target parsing and redaction; the targets of throwaway servers."""

from pathlib import Path

import pytest

from diag.core import servers
from diag.core.engines import ENGINES
from diag.core.errors import UsageError
from diag.core.redact import redact_argv
from diag.core.targets import parse_target


def test_postgres_url_with_password_and_label():
    t = parse_target("fast=postgresql://alice:s3cr3t@db.example:6543/bench")
    assert (t.label, t.engine, t.host, t.port, t.user, t.password, t.database) == (
        "fast", "postgres", "db.example", 6543, "alice", "s3cr3t", "bench")
    assert "s3cr3t" not in t.redacted() and ":***@" in t.redacted()
    assert "s3cr3t" not in repr(t) and "s3cr3t" not in str(t.to_dict())


def test_default_label_is_engine_host_port():
    assert parse_target("postgres://u@10.0.0.5/x").label == "postgres@10.0.0.5:5432"
    assert parse_target("mariadb://root@127.0.0.1:3307/").label == "mysql@127.0.0.1:3307"


def test_mysql_defaults_and_socket():
    t = parse_target("mysql://root@localhost/app?unix_socket=/run/mysqld/mysqld.sock")
    assert t.engine == "mysql" and t.socket == "/run/mysqld/mysqld.sock" and t.database == "app"
    t2 = parse_target("mysql://127.0.0.1")
    assert t2.user == "root" and t2.port == 3306


def test_postgres_socket_in_query_and_encoded_host():
    assert parse_target("postgresql://postgres@/db?host=/var/run/postgresql").socket == "/var/run/postgresql"
    assert parse_target("postgresql://postgres@%2Ftmp/db").socket == "/tmp"


def test_embedded():
    t = parse_target("embedded:postgres")
    assert t.embedded and t.engine == "postgres" and t.label == "postgres@embedded"
    assert parse_target("my=embedded:mariadb").engine == "mysql"
    with pytest.raises(UsageError):
        parse_target("embedded:oracle")


@pytest.mark.parametrize("bad", ["oracle://x@y/z", "localhost:5432", "http://x"])
def test_bad_scheme_is_a_usage_error(bad):
    with pytest.raises(UsageError) as e:
        parse_target(bad)
    assert "\n" not in str(e.value)


def test_bad_port_message_hides_password():
    with pytest.raises(UsageError) as e:
        parse_target("postgresql://u:topsecret@h:notaport/db")
    assert "topsecret" not in str(e.value)


def test_redact_argv():
    out = redact_argv(["run", "mysql://root:hunter22@h/db", "--clients", "2"])
    assert out[1] == "mysql://root:***@h/db" and out[2:] == ["--clients", "2"]


@pytest.mark.parametrize("engine", ENGINES, ids=[e.name for e in ENGINES])
def test_throwaway_server_target_and_dsn_agree(engine):
    """A throwaway server's DSN parses back to the target it gives (its superuser, default database)."""
    srv = servers.ThrowawayServer(engine.name, 54321, Path("/nonexistent"))
    t, back = srv.target(), parse_target(srv.dsn())
    assert srv.dbms is engine and engine.name in servers.LAUNCHERS
    assert (t.engine, t.host, t.port, t.user, t.database) == (back.engine, back.host, back.port, back.user,
                                                               back.database) == (
        engine.name, "127.0.0.1", 54321, engine.default_user, engine.default_database)


def test_start_server_names_an_unknown_engine():
    with pytest.raises(UsageError, match="unknown engine 'oracle'"):
        servers.start_server("oracle")

