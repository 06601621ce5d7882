"""``--workers``: a local ``dask scheduler`` and two ``dask worker`` processes run a point-select step's clients.

Real processes on loopback (dask.distributed, the session's throwaway PostgreSQL): the merged row's counts
are the sum of the workers' counts, its histogram is the HDR sum of theirs and so is each interval's, and a
worker killed mid-step is reported as lost clients with the step incomplete. ``--rate`` is the step's total
over both workers. Both workers share this
machine's CPUs with the server: one ``dbdiag run --repeat 2`` (a busy-loop process started for its second
repeat only) shows their process trees counted as clients in the host evidence, not as other processes,
while the busy loop still is one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from diag.core import servers
from diag.core.bundle import Bundle, BundleWriter, load_bundle, read_jsonl, safe_name
from diag.core.schema import ResultRow
from reports.model.cpu import cpu_use
from reports.model.steps import num, steps
from workloads import hist
from workloads.remote.dask_steps import connect, share_starts, split_clients
from workloads.driver import DriverOptions
from tests.sweep import KillServerAfter, sweep_rows

REPO = Path(__file__).resolve().parents[2]
# The workers import this checkout's code (not an installed dbdiag), as the orchestrator does.
RATE = 300.0  # --rate of the shared step: transactions/s of the whole step
WORKER_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


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
                                 "--host", "127.0.0.1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=WORKER_ENV, cwd=str(REPO))
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
           during: Any = None, rate: float | None = None) -> tuple[dict[str, Any], Path]:
    bundle = BundleWriter(out)
    opts = DriverOptions(clients=(clients,), duration_s=seconds, warmup_s=0.5, workers=addr, rate=rate)
    if during is not None:
        threading.Thread(target=during, daemon=True).start()
    (row,) = sweep_rows(pg_server.target(), ["point-select"], opts, bundle, progress=None)
    return row, out


@pytest.fixture(scope="module")
def step(pg_server: servers.ThrowawayServer, cluster: tuple[str, list[Any]],
         tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """4 clients over the two workers, paced at RATE in all (the merging below holds paced or not)."""
    return _sweep(pg_server, cluster[0], tmp_path_factory.mktemp("dask") / "b", 4, 2.0, rate=RATE)


def test_clients_are_split_over_the_workers() -> None:
    assert split_clients(4, 2) == [2, 2] and split_clients(5, 2) == [3, 2] and split_clients(1, 2) == [1]
    assert share_starts([3, 2]) == [0, 3] and share_starts([2, 2]) == [0, 2] and share_starts([1]) == [0]


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


def test_each_interval_histogram_is_the_hdr_merge_of_the_workers_interval(step: tuple[dict[str, Any], Path]) -> None:
    """Interval k's histogram (streamed by each worker as it measured it) is the HDR sum of the workers'
    interval k, its percentiles are read from it as a local step's are, and the intervals add up to the step."""
    row, out = step
    recs = list(read_jsonl(out / "series" / f"{safe_name('workload--' + row['target'])}.jsonl"))
    parts = list(read_jsonl(out / "series" / f"{safe_name('workers--' + row['target'])}.jsonl"))
    assert len(parts) == 2 * len(recs) and {p["worker"] for p in parts} == {w["worker"] for w in row["workers"]}
    by_share: dict[int, list[dict[str, Any]]] = {}
    for p in parts:
        by_share.setdefault(p["share"], []).append(p)
    step_sum = hist.new()
    for k, rec in enumerate(recs):
        merged, want = hist.decode(rec["hdr"]), hist.new()
        for share in by_share.values():
            want.add(hist.decode(share[k]["hdr"]))
        assert merged.get_total_count() == want.get_total_count() == rec["transactions"]
        assert merged.get_max_value() == want.get_max_value()
        assert all(merged.get_value_at_percentile(q) == want.get_value_at_percentile(q) for q in (50, 95, 99, 99.9))
        assert rec["latency_ms"] == hist.summary_ms(want, with_p999=False)
        step_sum.add(merged)
    whole = hist.decode((out / row["histogram"]).read_text().strip())
    assert step_sum.get_total_count() == whole.get_total_count() == row["transactions"]
    assert all(step_sum.get_value_at_percentile(q) == whole.get_value_at_percentile(q) for q in (50, 90, 99, 100))
    assert len(row["interval_tps"]) >= 1  # full intervals: the row's samples for its interval


def test_rate_is_the_total_over_all_workers(step: tuple[dict[str, Any], Path]) -> None:
    """``--rate R`` with two workers sends about R transactions/s in all, not R per worker (each of the 4
    clients is paced at R/4 whichever worker runs it). About 2 x 300 Poisson arrivals a worker: the bounds are
    over 8 standard deviations wide; the defect (each worker at R, 2 R in all) is far outside them."""
    row, _ = step
    assert 0.7 * RATE <= row["tps"] <= 1.3 * RATE, (row["tps"], [w["tps"] for w in row["workers"]])
    assert all(0.7 * RATE / 2 <= w["tps"] <= 1.3 * RATE / 2 for w in row["workers"]), row["workers"]


class _CpuOf:
    """CPU of processes and all their descendants, sampled by this test every 0.1 s (psutil), to set beside
    what the run's host series says of the same processes."""

    def __init__(self) -> None:
        self.roots: list[int] = []
        self.seen: dict[tuple[int, float], list[tuple[float, float]]] = {}  # (pid, born) -> [(t, cpu s)]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            for root in list(self.roots):
                try:
                    procs = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
                except psutil.Error:
                    continue
                for q in procs:
                    try:
                        ct, born = q.cpu_times(), q.create_time()
                    except psutil.Error:
                        continue
                    self.seen.setdefault((q.pid, born), []).append((time.time(), ct.user + ct.system))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def pids(self, t0: float, t1: float) -> set[int]:
        """The processes seen alive between ``t0`` and ``t1`` (Unix s)."""
        return {pid for (pid, _), xs in self.seen.items() if any(t0 <= t <= t1 for t, _ in xs)}

    def cores(self, t0: float, t1: float) -> float:
        """CPU-seconds per second they used between ``t0`` and ``t1``."""
        total = 0.0
        for (_, born), xs in self.seen.items():
            inside = [c for t, c in xs if t0 <= t <= t1]
            if not inside:
                continue
            before = [c for t, c in xs if t < t0]
            total += inside[-1] - (before[-1] if before else 0.0 if born >= t0 - 0.2 else inside[0])
        return total / (t1 - t0)


@pytest.fixture(scope="module")
def repeated(pg_server: servers.ThrowawayServer, cluster: tuple[str, list[subprocess.Popen[bytes]]],
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Bundle, _CpuOf, _CpuOf]]:
    """``dbdiag run --repeat 2 --workers``: 2 clients (one per worker), 1.5 s steps; a busy loop runs
    through repeat 2 only. Yields the bundle and this test's own CPU readings of the workers and the loop."""
    out = tmp_path_factory.mktemp("dask-run") / "b"
    workers, hog = _CpuOf(), _CpuOf()
    workers.roots = [w.pid for w in cluster[1]]
    loop: list[subprocess.Popen[bytes]] = []

    def hog_for_repeat_2() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(
                e.get("kind") == "step_finished" for e in read_jsonl(out / "events.jsonl")):
            time.sleep(0.05)
        loop.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        hog.roots = [loop[0].pid]

    threading.Thread(target=hog_for_repeat_2, daemon=True).start()
    try:
        p = subprocess.run([sys.executable, "-m", "diag", "run", f"db={pg_server.dsn()}", "-w", "point-select",
                            "-c", "2", "-T", "1.5", "--warmup", "0.5", "--repeat", "2", "--no-profile",
                            "--workers", cluster[0], "--out", str(out)],
                           capture_output=True, text=True, timeout=300, cwd=str(REPO))
    finally:
        workers.stop()
        hog.stop()
        for x in loop:
            x.kill()
            x.wait(10)
    assert p.returncode == 0, p.stderr[-3000:]
    assert loop, "the busy loop never started: no step_finished event"
    yield load_bundle(out), workers, hog


def _repeat_windows(b: Bundle) -> list[Any]:
    (step,) = list(steps(b))
    return [dataclasses.replace(step, t0=r.t_start, t1=r.t_end) for r in step.row.repeat_summaries]


def _client_pids(b: Bundle, t0: float, t1: float) -> set[int]:
    return {int(pid) for r in b.series["host"] if t0 <= r["t"] <= t1 + 1.0 for pid in r.get("procs.client") or {}}


def test_local_workers_are_clients_in_the_host_evidence(repeated: tuple[Bundle, _CpuOf, _CpuOf]) -> None:
    """Workers on this host (same boot_id, same process) are marked so, every process of their trees is in
    the host series' client group, the client share covers what they used (as this test measured it),
    and "other processes" (what host_contention reads) is what is left beside them: not their CPU."""
    b, workers, _ = repeated
    (row,) = b.results
    assert all(w["this_host"] for w in row["workers"]) and len(row["workers"]) == 2
    for win in _repeat_windows(b):
        u = cpu_use(b, win)
        assert u is not None and u.client_cores is not None, "no client CPU in the host evidence"
        seen = workers.pids(win.t0 + 0.3, win.t1 - 0.3)
        assert len(seen) >= 6, seen  # two workers, each with its share's child and a client
        assert seen <= _client_pids(b, win.t0, win.t1), seen - _client_pids(b, win.t0, win.t1)
        # Of their size: the host series counts a process that exited between two samples in the parent that
        # reaped it (reports.model.series.group_deltas), so the clients' last intervals are not lost (before that:
        # 0.07 of 0.84 cores once in CI). Not exact either way, with 1 s host samples and 1.5 s windows: a
        # process first seen after it was born counts from zero, so a share child started less than a second
        # before the window brings its start-up CPU into the interval that straddles the window's start
        # (measured, 6 runs, 2 of them beside two busy loops: 0.95-2.0 of this test's own 0.1 s readings).
        w = workers.cores(win.t0, win.t1)
        assert w > 0.05 and 0.5 * w <= u.client_cores <= 2.5 * w + 0.1, (u.client_cores, w)
        assert u.others_cores + 0.1 * w <= u.busy_cores - (u.server_cores or 0) - (u.collector_cores or 0) + 0.02
    # host_contention reads that "other processes" figure: if it fired (this machine is shared with other
    # sessions), it is on the representative repeat's CPU that is neither the server nor the workers.
    (step,) = list(steps(b))
    u = cpu_use(b, step)
    assert u is not None
    for f in json.loads((b.path / "findings.json").read_text())["findings"]:
        if f["category"] == "host_contention":
            assert f["evidence"]["other_processes_cpu_cores"] == num(u.others_cores, 2), (f["evidence"], u)
            assert f["evidence"]["client_cpu_cores"] == num(u.client_cores or 0, 2)


def test_an_unrelated_busy_loop_is_still_other_processes(repeated: tuple[Bundle, _CpuOf, _CpuOf]) -> None:
    b, workers, hog = repeated
    first, second = _repeat_windows(b)
    h = hog.cores(second.t0, second.t1)
    # On this shared 2-vCPU machine at load 8-10 the loop got 0.13 of a core: enough to be measured.
    assert h > 0.05, f"the busy loop used only {h:.2f} cores"
    u = cpu_use(b, second)
    assert u is not None and u.client_cores is not None
    # "Other processes" is what is left of the host's busy CPU beside the server, the clients and the
    # collectors. On a saturated host (CI: 0.997 busy) the clients' share carries the start-up CPU of share
    # children born less than a second before the window (see the test above: up to 2x of this test's own
    # reading), and what it counts too much comes out of "other processes": 0.16 of the loop's 0.43 cores
    # once, with the clients at 1.05 cores. The loop is there, less that excess.
    excess = max(0.0, u.client_cores - workers.cores(second.t0, second.t1))
    assert u.others_cores + excess >= 0.7 * h, (u.others_cores, excess, h)
    assert not hog.pids(second.t0, second.t1) & _client_pids(b, second.t0, second.t1)
    assert not hog.pids(first.t0, first.t1)  # it started after repeat 1


def test_repeat_runs_each_repeat_on_the_workers(repeated: tuple[Bundle, _CpuOf, _CpuOf]) -> None:
    """``--repeat 2 --workers``: two steps on the workers, combined as a local run's repeats are."""
    b, _, _ = repeated
    (row,) = b.results
    assert row["repeat_count"] == 2 and [r["repeat"] for r in row["repeats"]] == [1, 2]
    assert all(r["complete"] and r["transactions"] > 0 for r in row["repeats"])
    assert row["tps"] == min(r["tps"] for r in row["repeats"])  # the lower median of two
    assert row["tps_ci"]["basis"] == "intervals"
    assert row["tps_ci"]["n"] == len(row["interval_tps"]) == sum(len(r["interval_tps"]) for r in row["repeats"]) >= 2
    started = [e for e in read_jsonl(b.path / "events.jsonl") if e["kind"] == "step_started"]
    assert [e.get("repeat") for e in started] == [1, 2]
    recs = b.series[safe_name("workload--db")]
    assert {r["repeat"] for r in recs} == {1, 2} and all(r["workers"] == 2 and "latency_ms" in r for r in recs)
    for r in (1, 2):
        assert (b.path / "artifacts" / f"workload--db--point-select--c2--r{r}.hdr").is_file()
    assert ResultRow.from_dict(row).step_workers is not None


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


def test_a_server_lost_on_the_workers_skips_the_targets_other_steps(
        cluster: tuple[str, list[subprocess.Popen[bytes]]], tmp_path: Path) -> None:
    """The server killed during the first of two steps on the workers: that step's row says the server was
    lost (from the workers' shares), and the second step is not run against the dead server (one
    ``steps_skipped`` event), as on local clients."""
    srv = servers.start_postgres()
    try:
        opts = DriverOptions(clients=(2, 4), duration_s=3.0, warmup_s=0.2, scale=0.02, workers=cluster[0])
        rows = sweep_rows(srv.target(), ["point-select"], opts, BundleWriter(tmp_path / "run"),
                          hooks=KillServerAfter(srv, 1.0), progress=None)
    finally:
        srv.stop()
    (row,) = rows
    assert row["complete"] is False and row["server_lost"], row
    events = read_jsonl(tmp_path / "run" / "events.jsonl")
    assert [e["steps"] for e in events if e["kind"] == "steps_skipped"] == [["point-select c=4"]], events


def test_a_dead_scheduler_is_our_one_line_on_the_terminal(
        pg_server: servers.ThrowawayServer, cluster: tuple[str, list[subprocess.Popen[bytes]]], tmp_path: Path) -> None:
    """Last in the module (it kills the shared scheduler): the run's terminal has dbdiag's one error line and
    none of distributed's; distributed's own ERROR lines are kept in the bundle's artifacts/dask-client.log."""
    addr, _ = cluster
    out = tmp_path / "b"
    scheduler = next(p for p in psutil.Process().children() if "scheduler" in " ".join(p.cmdline()))

    def kill_later() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(
                e.get("kind") == "step_started" for e in read_jsonl(out / "events.jsonl")):
            time.sleep(0.05)
        scheduler.kill()

    threading.Thread(target=kill_later, daemon=True).start()
    # -T 1: the scheduler dies as the measured part starts, so no share can come back however long the step;
    # the client cancels the shares when it loses the scheduler, and the run says so then (it used to ask the
    # scheduler which workers were present first, which blocked for the client's 10 s reconnect timeout)
    p = subprocess.run([sys.executable, "-m", "diag", "run", f"db={pg_server.dsn()}", "-w", "point-select", "-c", "1",
                        "-T", "1", "--warmup", "0.5", "--no-profile", "--workers", addr, "--out", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert p.returncode == 2, p.stderr[-3000:]
    lines = [x for x in (p.stdout + p.stderr).splitlines() if x.strip()]
    assert [x for x in lines if x.startswith("dbdiag: error:")] == [lines[-1]], lines
    assert "no Dask worker returned its share" in lines[-1]
    assert not [x for x in lines if "distributed" in x or "ERROR" in x or "Traceback" in x], lines
    log = (out / "artifacts" / "dask-client.log").read_text()
    assert "distributed" in log and "ERROR" in log, log

