"""Every step names its limit, on real throwaway servers with planted causes (both engines each run).

Each test runs ``dbdiag run`` in-process with 2 s steps and no perf profile (the plants that commit nothing, the
chatty and the \\set ones, also without flush tracing and the fsync test), then reads the ``limit`` findings as the
run wrote them (findings.json), one per step, and the accounting's shares:

* a chatty transaction (BEGIN, 6 trivial statements, COMMIT) at one client paced at CHATTY_TPS: nothing is
  saturated, the backend waits for the next statement -> ``round_trips``, and no ``client_bound`` (its client
  is far from a full CPU; the rule needs client CPU evidence);
* the other direction: a script whose client does heavy ``\\set`` work before its one statement -> the
  client is the limit (``client_cpu``) and ``client_bound`` fires;
* single-row durable inserts at one client on a slow log device (loop-mounted ext4, data=journal, two levels)
  -> ``commit_flush`` on both engines; on this VM's own disk (flush about a round trip) -> a part of the
  serial chain, unsaturated unless the log device is, with the flush a measured part;
* one module-wide sweep (point-select at 1 and 4 x CPUs clients, insert at 1 and 32): every step names one limit
  that ranks first for its step and its parts explain its wall time; point selects saturating the host ->
  host CPU with the server's and the clients' shares; 32 durable committers: commit waits are never a
  second limit.

Each test asserts its planted outcome whatever the machine's load; where the machine cannot host the plant
(checked with the tests' own reading of /proc/stat and /proc/loadavg, tests/hostload.py) it fails and says
so. Expected answers come from the plant, never from the accounting under test. Margins rather than
thresholds tuned to this machine: the chatty client is paced (an open-loop rate far below what one client
gets even on a machine busy with other work), so the run's own processes cannot hold half of a busy host
(the host CPU rule's condition) wherever it runs; the \\set script spends ~3,000 expression evaluations per
statement, so its client is busy nearly all the time whatever else runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diag.core import servers
from diag.core.bundle import load_bundle
from diag.run import Run, RunOptions, run_plan
from reports.model.accounting import accounts
from tests.hostload import HostSampler, describe, host_busy
from tests.retry import twice
from workloads.driver import DriverOptions

FSYNC_S = 0.1  # per fsync test method (the run's default 0.3): 100+ flushes each even on the slow log device
CHATTY = "BEGIN;\n" + "SELECT 1;\n" * 6 + "COMMIT;\n"
# The chatty client's pace, transactions/s: one unpaced client got 470 (PostgreSQL) and 800 (MariaDB) on this
# machine with both CPUs 100% busy with other helpers' tests, its server and client then using ~0.2 cores. Unpaced on a machine that others keep half busy, the run's own processes held half of a
# 90%-busy host and the host CPU rule named the host, correctly (CI once saw it): that is not this plant.
CHATTY_TPS = 150.0
# /proc/stat's busy share (the tests' own reading) at which other work leaves a planted saturation no room: a
# plant that needs a CPU for the run's own processes fails with "could not host the plant" from there on.
BUSY_BY_OTHERS = 0.9
# The pace counts as kept at this share of it (the paced runs measured 184-206 of 200 at 100% busy).
PACE_KEPT = 0.75
HEAVY_SET = "".join(f"\\set v{i % 50} ({i} * 7 + 3) % 1000\n" for i in range(3000)) + "SELECT :v1;\n"


def run(out: Path, targets: list[str], workload: str, script: str | None = None,
        rate: float | None = None, before: bool = False, flush: bool = True) -> dict[str, Any]:
    """Run one step per target (at ``rate`` transactions/s in all, else as fast as it goes); the run's findings,
    its results by label, and how busy /proc/stat says the machine was over the run and, with ``before``, in
    the second before it (other processes only; a second of sampling: only for a test that reads it).
    ``flush=False``: no flush tracing in the steps' tails and no fsync test before them (about 4 s of a
    two-target run), for a plant that commits no writes and whose limit is not the commit flush."""
    path_script = None
    if script is not None:
        path_script = out.parent / f"{out.name}.sql"
        path_script.write_text(script)
    drv = DriverOptions(clients=(1,), duration_s=2.0, warmup_s=0.5, script=str(path_script) if path_script else None,
                        scale=1, rate=rate)
    log = io.StringIO()
    opts = RunOptions(targets=targets, workloads=[workload], driver=drv, out=out, argv=["dbdiag", "run"],
                      profile=False, fsync_seconds=FSYNC_S)
    if not flush:
        opts = dataclasses.replace(opts, sources=dataclasses.replace(
            run_plan(opts), flush=False, flush_off="not what this test plants", fsync_test_s=None))
    idle = host_busy(1.0) if before else (None, None)
    with HostSampler() as host:
        t0 = time.time()
        path = Run(opts, out=log).execute()
        t1 = time.time()
    found = json.loads((path / "findings.json").read_text())["findings"]
    results = json.loads((path / "results.json").read_text())["results"]
    assert len(results) == len(targets), log.getvalue()[-3000:]
    return {"found": found, "path": path, "host": describe(host.busy(t0, t1)), "before": idle,
            "results": {r["target"]: r for r in results}}


def limit_of(found: list[dict[str, Any]], label: str) -> dict[str, Any]:
    (f,) = [f for f in found if f["category"] == "limit" and f["target"] == label]
    return f


def categories(found: list[dict[str, Any]], label: str) -> list[tuple[str, float]]:
    return [(f["category"], f["impact"]) for f in found if f["target"] == label]


@pytest.fixture()
def both(pg_server, my_server) -> list[str]:
    return [f"pg={pg_server.dsn()}", f"my={my_server.dsn()}"]


def test_chatty_transaction_is_a_round_trip_limit_not_client_bound(both: list[str], tmp_path: Path) -> None:
    """Nothing is saturated by one paced chatty client, whatever else the machine runs: the backend waits for
    its next statement (round trips, the client's pauses between transactions among them)."""
    r = run(tmp_path / "bundle", both, "custom", CHATTY, rate=CHATTY_TPS, flush=False)
    for label in ("pg", "my"):
        row = r["results"][label]
        tps = row["transactions"] / row["measured_s"]
        if tps < PACE_KEPT * CHATTY_TPS:
            pytest.fail(f"{label}: the machine could not host the plant: one chatty client made {tps:.0f} of the "
                        f"{CHATTY_TPS:g} transactions/s it was paced at ({r['host']} over the run); behind its "
                        "pace it runs flat out, and the run's processes may then saturate a busy host")
        lim = limit_of(r["found"], label)
        assert "client_bound" not in [c for c, _ in categories(r["found"], label)]
        assert lim["extra"]["kind"] == "round_trips", (label, lim["title"], lim["evidence"], r["host"])
        assert not lim["extra"]["saturated"], (label, lim["title"])
        # the round trips (and client CPU) explain most of the transaction's time
        assert lim["impact"] >= 0.5, (label, lim["evidence"])


def test_clients_saturated_by_set_work_are_client_bound(both: list[str], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python loop evaluates the \\set lines, as a slow application would: the native executor would run
    them in C (and refuses a program this long anyway), so the planted client work is asked for by name."""
    monkeypatch.setenv("DBDIAG_PY_LOOP", "1")

    def attempt(i: int) -> None:
        r = run(tmp_path / f"bundle{i}", both, "custom", HEAVY_SET, before=True, flush=False)
        for label in ("pg", "my"):
            lim = limit_of(r["found"], label)
            if lim["extra"]["kind"] != "client_cpu" and r["before"][0] >= BUSY_BY_OTHERS:
                pytest.fail(f"{label}: the machine could not host the plant: its client must get most of a CPU "
                            f"for its \\set work, and before the run other processes alone kept the machine "
                            f"{describe(r['before'])}; over the run {r['host']} (the limit named: {lim['title']!r})")
            assert lim["extra"]["kind"] == "client_cpu", (label, lim["title"], lim["evidence"], r["host"])
            assert "client_bound" in [c for c, _ in categories(r["found"], label)]

    twice(attempt)


@contextlib.contextmanager
def _journalled_loop_fs(backing: Path, size: int) -> Iterator[Path]:
    """An ext4 file system mounted with data=journal on a loop device over a sparse file in ``backing``:
    every flush there is a journal commit that the loop device flushes to the file system below."""
    if os.geteuid() != 0 or not shutil.which("losetup"):
        pytest.fail("a loop-mounted file system needs root and losetup (this machine kind has both)")
    mnt = Path(tempfile.mkdtemp(prefix="dbdiag-slowlog-", dir=backing))
    img = mnt.with_suffix(".img")
    img.touch()
    os.truncate(img, size)
    loop = ""
    try:
        lo = subprocess.run(["losetup", "-f", "--show", str(img)], capture_output=True, text=True, timeout=30)
        if lo.returncode != 0:
            pytest.fail(f"losetup not permitted here: {lo.stderr.strip()}")
        loop = lo.stdout.strip()
        subprocess.run(["mkfs.ext4", "-q", loop], check=True, capture_output=True, timeout=60)
        mounted = subprocess.run(["mount", "-o", "data=journal", loop, str(mnt)], capture_output=True, text=True,
                                 timeout=30)
        if mounted.returncode != 0:
            pytest.fail(f"mounting a loop device is not permitted here: {mounted.stderr.strip()}")
        os.chmod(mnt, 0o1777)  # the servers may run as another user
        yield mnt
    finally:
        if loop:
            if subprocess.run(["umount", str(mnt)], capture_output=True, timeout=60).returncode != 0:
                subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=60)
            subprocess.run(["losetup", "-d", loop], capture_output=True, timeout=30)
        img.unlink(missing_ok=True)
        shutil.rmtree(mnt, ignore_errors=True)


@pytest.fixture(scope="module")
def slow_log_servers() -> Iterator[list[str]]:
    """Both throwaway servers with their data directories (WAL, redo log) on a slow log device: a
    data=journal ext4 on a loop device whose file lies on another such file system (one level gave
    550-630 µs per fdatasync of an 8 kB write against ~120 µs on /tmp, two levels 1.8 ms in dbdiag's own
    fsync test). A lone committer then keeps that device about 90% busy flushing, even when the machine's
    other load stretches its round trips to ~0.8 ms (one level did not: its device fell to under 80% busy).
    Needs root and free loop devices (this machine kind has both); fails with the reason otherwise."""
    up: list[servers.ThrowawayServer] = []
    with contextlib.ExitStack() as stack:
        outer = stack.enter_context(_journalled_loop_fs(Path("/tmp"), 1200 << 20))
        mnt = stack.enter_context(_journalled_loop_fs(outer, 1 << 30))  # sparse: the servers use ~200 MB
        old = os.environ.get("DBDIAG_TMPDIR")
        os.environ["DBDIAG_TMPDIR"] = str(mnt)  # where servers.start_* make their directories
        try:
            up.append(servers.start_postgres())
            up.append(servers.start_mysql())
        finally:
            if old is None:
                os.environ.pop("DBDIAG_TMPDIR", None)
            else:
                os.environ["DBDIAG_TMPDIR"] = old
        try:
            yield [f"pg={up[0].dsn()}", f"my={up[1].dsn()}"]
        finally:
            for srv in up:
                srv.stop()


def test_single_client_durable_insert_on_a_slow_log_device_is_a_commit_flush_limit(
        slow_log_servers: list[str], tmp_path: Path) -> None:
    """One durable committer on a log device whose flush takes ~2 ms: the commit flush is the limit on both
    engines (the device busy flushing commits: flush calls/s x the fsync test's flush latency), and the
    accounting shows the flush wait. On this machine's own disk a flush costs about what a round trip does;
    that case is checked in the sweep below (the limit is then the largest serial part)."""
    def attempt(i: int) -> None:
        r = run(tmp_path / f"bundle{i}", slow_log_servers, "insert")
        acc = {s.target: a for s, a in accounts(load_bundle(r["path"]))}
        for label in ("pg", "my"):
            lim = limit_of(r["found"], label)
            assert lim["extra"]["kind"] == "commit_flush", (label, lim["title"], lim["evidence"])
            assert acc[label].share("wait:commit_flush") > 0, acc[label].components
            # one flush per commit, as a durable single-row commit must do
            assert 0.8 <= lim["evidence"].get("flush_calls_per_commit", 0) <= 1.5, (label, lim["evidence"],
                                                                                      r["host"])

    twice(attempt)


# --------------------------------------------------------------------------- a saturated host (one run, module-wide)

SATURATING = 4  # clients per CPU: point selects at 2 x cores already kept 2 CPUs 98-99.8% busy here
PARTS_OVER = 1.3  # the accounted parts' sum, at most this times the wall time (see the first sweep test)


@pytest.fixture(scope="module")
def sweep(pg_server, my_server, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two runs on both session servers, 2 s steps: point-select at 1 client and at SATURATING x CPUs, durable
    insert at 1 and 32 clients (single-row durable commits park backends in the flush, so they need more
    clients to keep the CPUs busy). Two runs rather than one with the three client counts for both workloads:
    point selects at 32 and inserts at SATURATING x CPUs were never asserted beyond what every step is (each
    step of the four per target still is), and a read-only run starts no flush tracing. The findings, the
    accounting recomputed from the bundles, and the machine's load read by the test itself: before the first
    run (other processes only) and over each step's window."""
    n = SATURATING * (os.cpu_count() or 2)
    base = tmp_path_factory.mktemp("limits")
    log = io.StringIO()
    before = host_busy(1.0)
    paths = []
    with HostSampler() as host:
        for workload, clients in (("point-select", (1, n)), ("insert", (1, 32))):
            drv = DriverOptions(clients=clients, duration_s=2.0, warmup_s=0.5, scale=1)
            paths.append(Run(RunOptions(targets=[f"pg={pg_server.dsn()}", f"my={my_server.dsn()}"],
                                        workloads=[workload], driver=drv, out=base / workload, argv=["dbdiag", "run"],
                                        profile=False, fsync_seconds=FSYNC_S), out=log).execute())
    found = [f for path in paths for f in json.loads((path / "findings.json").read_text())["findings"]]
    bundles = [load_bundle(path) for path in paths]
    during = {(r["target"], r["workload"], r["clients"]): describe(host.busy(r["t_start"], r["t_end"]))
              for b in bundles for r in b.results}
    return {"found": found, "n": n, "bundles": bundles, "log": log.getvalue(), "before": before, "during": during,
            "accounts": {(s.target, s.workload, s.clients): (s, a) for b in bundles for s, a in accounts(b)}}


def step_findings(found: list[dict[str, Any]], label: str, workload: str, clients: int) -> list[dict[str, Any]]:
    return [f for f in found if (f["target"], f["workload"], f["clients"]) == (label, workload, clients)]


def test_every_step_names_a_limit_and_its_parts_explain_its_time(sweep: dict[str, Any]) -> None:
    """Shares add to 1 by construction (reports.model.accounting._assemble): not asserted. What can fail is how far
    the measured parts overshoot the step's wall time (sampling error, the server's background CPU): at most
    PARTS_OVER of it (the saved bundles' largest is 17%; a loaded machine stretches sampling), once the part two
    parts share is counted once: a commit flush is timed from the flush call's entry to its return, and the kernel
    CPU the server spends inside that call (the file system's journal, the block layer) is its system CPU too, so
    up to the smaller of the two is in both (MariaDB durable inserts at 1 client, 4 runs on a quiet machine:
    parts 1.13-1.35x the wall time, flush 103-128 µs and server system CPU 37-49 µs of 155-179 µs)."""
    steps_run = {(r["target"], r["workload"], r["clients"])
                 for b in sweep["bundles"] for r in load_bundle(b.path).results}
    assert len(steps_run) == 8, sweep["log"][-2000:]
    assert set(sweep["accounts"]) == steps_run
    for key, (_step, acc) in sweep["accounts"].items():
        parts = {c.key: c.us_per_txn for c in acc.components}
        measured = sum(v for k, v in parts.items() if k != "unaccounted")
        both = min(parts.get("wait:commit_flush", 0.0), parts.get("server_cpu_system", 0.0))
        assert measured - both <= PARTS_OVER * acc.wall_us_per_txn, (key, acc.wall_us_per_txn, acc.components)
        assert acc.get("unaccounted") is not None
        lims = [f for f in step_findings(sweep["found"], *key) if f["category"] == "limit"]
        assert len(lims) == 1, key
        # the limit ranks first for its step (after critical findings only)
        step_f = [f for f in step_findings(sweep["found"], *key) if f["severity"] != "critical"]
        assert step_f[0]["category"] == "limit", [(f["category"], f["impact"]) for f in step_f]


def test_point_select_saturating_the_host_is_host_cpu_shared(sweep: dict[str, Any]) -> None:
    """At SATURATING clients per CPU the host's CPUs are the limit, split into the server's and the clients'
    shares. The plant needs the run's own processes to hold at least half of a 90%-busy machine: on a machine
    that other work already keeps busy they may not, and the failure then shows the load the test measured
    before the run and during the step."""
    for label in ("pg", "my"):
        key = (label, "point-select", sweep["n"])
        (lim,) = [f for f in step_findings(sweep["found"], *key) if f["category"] == "limit"]
        ev = lim["evidence"]
        if lim["extra"]["kind"] != "host_cpu" and sweep["before"][0] >= BUSY_BY_OTHERS:
            pytest.fail(f"{label}: the machine could not host the plant: it needs the run's own processes to hold "
                        f"half of a 90%-busy machine, and before the run other processes alone kept it "
                        f"{describe(sweep['before'])}; during the step {sweep['during'][key]} (the limit named: "
                        f"{lim['title']!r})")
        assert lim["extra"]["kind"] == "host_cpu", (label, lim["title"], ev, sweep["during"][key])
        assert ev["server_share_of_busy_cpu_pct"] > 0 and ev["client_share_of_busy_cpu_pct"] > 0, ev
        assert "shared by the server" in lim["title"] and f"{ev['server_cpu_cores']:g} cores" in lim["title"]
        assert ev["server_cores_with_clients_elsewhere"] > ev["server_cpu_cores"]
        assert not [f for f in step_findings(sweep["found"], label, "point-select", sweep["n"])
                    if f["category"] in ("cpu_bound", "client_bound")]  # the limit says it, nothing competes


def test_single_durable_committer_on_this_disk_is_a_part_of_its_serial_chain(sweep: dict[str, Any]) -> None:
    """One client of durable inserts on this VM's own disk: the flush (about 60-120 µs here) costs about what
    the round trip and the server's CPU do, and which is largest changes from run to run (flush 63 µs vs round
    trips 55 µs; server CPU 34% vs flush 33%), so the plant fixes no one of them. It fixes this much: one
    client cannot saturate the CPUs (its backend and client take turns, under one core of two; on a machine
    busy with other work they hold less than half of it), so the limit is a part of the serial chain, or the
    log device itself when its flushes keep it busy; and the flush is a measured part of the transaction on
    both engines. (That the named part is the largest is reports.model.limits' unit test, on records built there.)"""
    for label in ("pg", "my"):
        (lim,) = [f for f in step_findings(sweep["found"], label, "insert", 1) if f["category"] == "limit"]
        _step, acc = sweep["accounts"][(label, "insert", 1)]
        assert acc.share("wait:commit_flush") > 0, (label, acc.components)
        kind = lim["extra"]["kind"]
        if lim["extra"]["saturated"]:  # the one resource a lone committer can keep busy: its log device
            assert kind == "commit_flush", (label, lim["title"], sweep["during"][(label, "insert", 1)])
        else:
            assert kind in ("commit_flush", "server_cpu", "round_trips"), (label, lim["title"])


def test_many_durable_committers_never_make_commit_waits_a_second_limit(sweep: dict[str, Any]) -> None:
    """32 clients of single-row durable inserts: commit waits, where they take a share, are a symptom (info,
    queueing behind a saturated limit, or a part beside an unsaturated one) that ranks under the limit, never
    a second limit.

    Which limit is not asserted: the plant does not fix it. PostgreSQL kept the 2 CPUs 94-95% busy in the
    sweeps measured alone but under 90% in a CI run (its limit was then the commit flush); MariaDB's 32
    committers left them 86-98% busy (its threads sleep in group commit). The saturated host is planted by
    the point-select step above, which does hold it."""
    for label in ("pg", "my"):
        fs = step_findings(sweep["found"], label, "insert", 32)
        (lim,) = [f for f in fs if f["category"] == "limit"]
        for f in fs:
            if f["category"] != "commit_flush_bound":
                continue
            assert f["impact"] <= lim["impact"]
            if lim["extra"]["kind"] == "commit_flush":  # the flush itself is the limit: said so, once
                assert "the step's limit" in f["title"], f["title"]
            elif lim["extra"]["saturated"]:  # queueing behind a saturated resource: a symptom
                assert f["severity"] == "info" and "queueing behind the limit" in f["title"], f["title"]
            else:  # a part of the transaction beside an unsaturated limit
                assert f["severity"] == "info" and "not the limit" in f["title"], f["title"]
    # PostgreSQL's 32 committers queue on WALWrite behind group commit: shown under a saturated limit
    _s, acc = sweep["accounts"][("pg", "insert", 32)]
    (pg,) = [f for f in step_findings(sweep["found"], "pg", "insert", 32) if f["category"] == "limit"]
    if acc.share("wait:commit_flush") >= 0.10 and pg["extra"]["saturated"] and pg["extra"]["kind"] != "commit_flush":
        assert "commit flush" in pg["evidence"]["symptoms"] and "queueing" in pg["evidence"]["symptoms"]
