"""``--workers``: a local ``dask scheduler`` and two ``dask worker`` processes run a point-select step's clients.

Real processes on loopback (dask.distributed, the session's throwaway PostgreSQL): the merged row's counts
are the sum of the workers' counts, its histogram is the HDR sum of theirs, and a worker killed mid-step is
reported as lost clients with the step incomplete. Both workers share this machine's CPUs with the server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diag import servers
from diag.bundle import BundleWriter, read_jsonl, safe_name
from diag.schema import ResultRow
from workloads import hist
from workloads.dask_steps import connect, split_clients
from workloads.driver import DriverOptions, run_sweep


def _dask() -> str:
    exe = shutil.which("dask")
    if not exe:
        pytest.fail("dask is not installed: pip install 'dbdiag[dask]'")
    return exe


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A scheduler on a free loopback port and two workers without a nanny (a killed one stays gone)."""
    port = servers.free_port()
    addr = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([_dask(), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    workers = [subprocess.Popen([_dask(), "worker", addr, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                                 "--host", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for _ in range(2)]
    c = connect(addr)
    deadline = time.monotonic() + 60
    while len(c.scheduler_info()["workers"]) < 2:
        if time.monotonic() > deadline:
            pytest.fail("the two dask workers did not join the scheduler within 60 s")
        time.sleep(0.2)
    c.close()
    yield addr, workers
    for p in [*workers, *procs]:
        p.kill()
        p.wait(timeout=10)


def _sweep(pg_server: servers.ThrowawayServer, addr: str, out: Path, clients: int, seconds: float,
           during: Any = None) -> tuple[dict[str, Any], Path]:
    bundle = BundleWriter(out)
    opts = DriverOptions(clients=(clients,), duration_s=seconds, warmup_s=0.5, workers=addr)
    if during is not None:
        threading.Thread(target=during, daemon=True).start()
    (row,) = run_sweep(pg_server.target(), ["point-select"], opts, bundle, progress=None)
    return row, out


@pytest.fixture(scope="module")
def step(pg_server: servers.ThrowawayServer, cluster: tuple[str, list[Any]],
         tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    return _sweep(pg_server, cluster[0], tmp_path_factory.mktemp("dask") / "b", 4, 2.0)


def test_clients_are_split_over_the_workers() -> None:
    assert split_clients(4, 2) == [2, 2] and split_clients(5, 2) == [3, 2] and split_clients(1, 2) == [1]


def test_merged_totals_are_the_sum_of_the_workers(step: tuple[dict[str, Any], Path]) -> None:
    row, _ = step
    ws = row["workers"]
    assert len(ws) == 2 and {w["clients"] for w in ws} == {2} and row["clients"] == 4
    assert row["complete"] and row["lost_clients"] == 0 and row["workers_lost"] == []
    assert all(w["transactions"] > 100 for w in ws)
    assert row["transactions"] == sum(w["transactions"] for w in ws)
    assert row["tps"] == pytest.approx(sum(w["tps"] for w in ws), abs=0.01)
    assert all(0 <= w["host_cpu_busy_pct"] <= 100 for w in ws)
    typed = ResultRow.from_dict(row).step_workers  # the bundle schema's record of the same fields
    assert typed is not None and sum(s.transactions for s in typed.shares) == row["transactions"]


def test_the_histogram_is_the_hdr_merge_of_the_workers(step: tuple[dict[str, Any], Path]) -> None:
    row, out = step
    merged = hist.decode((out / row["histogram"]).read_text().strip())
    parts = [hist.decode((out / w["histogram"]).read_text().strip()) for w in row["workers"]]
    want = hist.new()
    for p in parts:
        want.add(p)
    assert merged.get_total_count() == sum(p.get_total_count() for p in parts) == row["transactions"]
    for q in (50, 90, 95, 99, 99.9, 100):
        assert merged.get_value_at_percentile(q) == want.get_value_at_percentile(q)
    assert row["latency_ms"] == hist.summary_ms(want)
    # Per-interval series: each record sums the workers' same interval.
    recs = list(read_jsonl(out / "series" / f"{safe_name('workload--' + row['target'])}.jsonl"))
    assert 2 <= len(recs) <= 3 and all(r["workers"] == 2 for r in recs)
    assert sum(r["transactions"] for r in recs) == row["transactions"]


def test_a_worker_killed_mid_step_is_lost_clients_and_an_incomplete_step(
        step: tuple[dict[str, Any], Path], pg_server: servers.ThrowawayServer,
        cluster: tuple[str, list[subprocess.Popen[bytes]]], tmp_path: Path) -> None:
    addr, workers = cluster
    victim = workers[1]

    series = tmp_path / "b" / "series" / f"{safe_name('workload--' + pg_server.target().label)}.jsonl"

    def kill_later() -> None:
        # Mid-step: once the first interval of both workers is in the series (each streamed it), kill one.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (series.exists() and series.read_text().strip()):
            time.sleep(0.05)
        os.kill(victim.pid, signal.SIGKILL)

    row, out = _sweep(pg_server, addr, tmp_path / "b", 4, 3.0, during=kill_later)
    assert victim.wait(timeout=10) == -signal.SIGKILL
    assert row["complete"] is False
    assert row["lost_clients"] == 2 and len(row["workers_lost"]) == 1 and len(row["workers"]) == 1
    assert row["transactions"] == row["workers"][0]["transactions"] > 0
    assert row["lost_transactions"] > 0  # the killed worker's intervals streamed before it died
    events = [e for e in read_jsonl(out / "events.jsonl") if e["kind"] == "workload_worker_lost"]
    assert len(events) == 1 and events[0]["lost_clients"] == 2 and "lost" in events[0]["message"]
    assert json.dumps(row)  # the row is plain JSON for results.json
