"""More clients than the server takes: one line naming the setting and the count that fits, exit 2, nothing
left running, no result row for clients that never ran (throwaway servers with small limits, both engines)."""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from diag.core import servers
from diag.core.bundle import BundleWriter
from diag.core.db import Session
from diag.core.targets import Target, parse_target
from tests.integration.test_cli_errors import assert_one_error_line, dbdiag
from workloads.driver import DriverOptions, StepPlan, prepare
from workloads.steps.progress import SweepBar
from workloads.steps.room import TooManyClients
from workloads.steps.step import Step

PG_MAX = 20
MY_MAX, MY_USER_MAX = 30, 12


@pytest.fixture(scope="module")
def pg_small() -> Iterator[servers.ThrowawayServer]:
    srv = servers.start_postgres({"max_connections": str(PG_MAX)}, instrument=False)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def my_small() -> Iterator[Target]:
    """A user without SUPER (MariaDB does not hold SUPER to max_user_connections) on a server with both limits,
    the point-select data loaded by root."""
    srv = servers.start_mysql({"max_connections": str(MY_MAX), "max_user_connections": str(MY_USER_MAX)},
                              instrument=False)
    try:
        prepare(srv.target(), ["point-select"], DriverOptions(clients=(1,)), BundleWriter(srv.directory / "load"), None,
                SweepBar(None, 1, 1.0))
        with Session(srv.target()) as s:
            s.execute("CREATE USER 'lim'@'%'")
            s.execute("GRANT ALL ON dbdiag.* TO 'lim'@'%'")
        yield parse_target(f"mysql://lim@127.0.0.1:{srv.port}/dbdiag")
    finally:
        srv.stop()


def _rows(out: Path) -> list[dict]:
    p = out / "results.json"
    return json.loads(p.read_text())["results"] if p.exists() else []


def _client_sessions(t: Target) -> int:
    """Client connections on the server now, the asking one left out."""
    with Session(t) as s:
        return s.dbms.connection_room(s.query).in_use


def _settled(t: Target, want: int, timeout_s: float = 10.0) -> int:
    """Client connections once the server has seen the terminated clients go (it notices within ms)."""
    deadline = time.monotonic() + timeout_s
    n = _client_sessions(t)
    while n != want and time.monotonic() < deadline:
        time.sleep(0.1)
        n = _client_sessions(t)
    return n


@pytest.mark.parametrize("engine", ["pg", "my"])
def test_too_many_clients_is_one_line_before_the_step(engine, pg_small, my_small, tmp_path):
    dsn = pg_small.dsn() if engine == "pg" else f"mysql://lim@127.0.0.1:{my_small.port}/dbdiag"
    setting, limit = ("max_connections", PG_MAX) if engine == "pg" else ("max_user_connections", MY_USER_MAX)
    out = tmp_path / "b"
    p = dbdiag("run", dsn, "-c", f"2,{limit + 5}", "-T", "0.5", "--warmup", "0", "--no-collect",
               "--out", str(out))
    line = assert_one_error_line(p, setting, f"is {limit}", f"{limit + 5} clients do not fit", "fit; run -c")
    # The count that fits is the limit less what is in use (the step's own clients are gone by then).
    fits = int(line.split("so ")[1].split(" client")[0])
    assert 0 < fits <= limit, line
    assert "too many" not in p.stderr.lower(), p.stderr  # no client's own refusal reached the console
    assert all(r["clients"] != limit + 5 for r in _rows(out)), _rows(out)  # no row claims them


@pytest.mark.parametrize("engine", ["pg", "my"])
def test_refused_at_connect_time_is_one_line_and_no_step(engine, pg_small, my_small, tmp_path):
    """Sessions that take slots after the sweep's check: the clients' refusals end the step before it
    measures (no row), in one line naming the setting, and every client process and connection is gone."""
    t = pg_small.target() if engine == "pg" else my_small
    setting, limit = ("max_connections", PG_MAX) if engine == "pg" else ("max_user_connections", MY_USER_MAX)
    opts = DriverOptions(clients=(1,), duration_s=0.5, warmup_s=0)
    bundle = BundleWriter(tmp_path / "b")
    bar = SweepBar(None, 1, 1.0)
    ready = prepare(t, ["point-select"], opts, bundle, None, bar)
    before = _settled(t, 0)
    n = limit + 4
    series = bundle.series("workload--x")
    plan = StepPlan(t.label, ready.workloads[0].name, n, opts)
    step = Step(t, ready.product, ready.drv, ready.workloads[0], plan, bundle, series, None, bar, seed=1)
    with pytest.raises(TooManyClients) as ei:
        step.run()
    series.close()
    msg = str(ei.value)
    assert "refused" in msg and f"of {n} clients" in msg and f"{setting} is {limit}" in msg, msg
    refused = int(msg.split("refused ")[1].split(" of")[0])
    assert 4 <= refused <= n, msg
    assert step.row is None
    assert not multiprocessing.active_children()
    assert _settled(t, before) == before
    events = [json.loads(ln) for ln in (tmp_path / "b" / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events if e["kind"] in ("step_refused", "workload_client_error", "step_started")] \
        == ["step_refused"], events
