"""Flush calls counted in each step's tail, not in its measured part (issue 25: counting them with perf cost
~10% of MariaDB read-write's throughput).

The plant: one client of single-row autocommit inserts on each session server (fsync on, as the throwaways
start): every commit is flushed by itself, so the tail must count about one flush call per commit, and the
engine's own flush counter over the measured part (pg_stat_wal.wal_sync, Innodb_os_log_fsyncs /
Innodb_data_fsyncs), read without perf, must agree with the S carried over from the tail. While the run goes,
this test watches for a ``perf stat`` counting the flush tracepoints: none may run inside a measured part.
"""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import psutil

from diag.core.bundle import load_bundle
from diag.core.servers import ThrowawayServer
from diag.run import Run, RunOptions
from reports.model.durability_view import durability_rows
from workloads.steps.options import DriverOptions


# flushes/s, given: above any commit rate of one client here (~6,000/s on either engine), so the verdict's
# flush-capacity check cannot be what decides it
FLUSH_CAPABILITY = 100000.0


class _PerfWatch:
    """Times at which a ``perf stat`` counting sys_enter_fdatasync was running (polled every 20 ms)."""

    def __init__(self) -> None:
        self.seen: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            for p in psutil.process_iter(["name", "cmdline"]):
                cmd = p.info.get("cmdline") or []
                if p.info.get("name") == "perf" and "stat" in cmd and any("sys_enter_fdatasync" in c for c in cmd):
                    self.seen.append(time.time())
                    break
            time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def test_flush_calls_are_counted_after_the_measured_part(pg_server: ThrowawayServer, my_server: ThrowawayServer,
                                                         tmp_path: Path) -> None:
    drv = DriverOptions(clients=(1,), duration_s=2.0, warmup_s=0.5)
    # F given (--flush-capability), not measured: the fsync test before the steps (about 2 s) is not what this
    # test checks; the plausibility verdict's checks of S (flush calls present, covering the commits) still run
    opts = RunOptions(targets=[f"pg={pg_server.dsn()}", f"my={my_server.dsn()}"], workloads=["insert"], driver=drv,
                      out=tmp_path / "b", argv=["dbdiag", "run"], profile=False, flush_capability=FLUSH_CAPABILITY)
    watch = _PerfWatch()
    log = io.StringIO()
    try:
        path = Run(opts, out=log).execute()
    finally:
        watch.stop()
    b = load_bundle(path)
    assert len(b.rows) == 2, log.getvalue()[-3000:]
    assert b.run["collectors"]["flush_tail"]["ok"], b.run["collectors"]["flush_tail"]
    assert watch.seen, "no perf stat of the flush tracepoints was seen at all"
    for row in b.rows:
        assert row.t_start is not None and row.t_end is not None
        inside = [t for t in watch.seen if row.t_start + 0.05 < t < row.t_end - 0.05]
        assert not inside, f"{row.target}: perf counted flushes inside the measured part ({len(inside)} polls)"
        ft, tail = row.flush_tail or {}, row.profile_tail or {}
        assert ft.get("t_start", 0.0) >= row.t_end - 0.05 and ft.get("seconds", 0) > 0.5, (ft, row.t_end)
        assert tail.get("tps"), tail  # the load ran on through the tail
        # The measured part's flush series has the device's flushes and no perf counts.
        recs = b.series.get(f"flush--{row.target}", [])
        assert recs and not [k for r in recs for k in r if k.startswith(("syscalls.", "fs."))], recs[:2]
        assert any(k.startswith("device.") for k in recs[-1]), recs[-1]
    for s in durability_rows(b):
        # One client: each commit flushed by itself, in the tail as in the measured part.
        assert s.S is not None and "step's tail" in s.S_source, s.S_source
        assert 0.7 <= s.S / s.C <= 1.5, (s.target, s.S, s.C)
        # The engine's own flush counter over the measured part, read without perf, agrees.
        assert s.engine_flushes is not None, (s.target, s.engine_source)
        assert 0.6 <= s.engine_flushes / s.S <= 1.6, (s.target, s.engine_flushes, s.engine_source, s.S)
        assert s.plausibility is not None and s.plausibility.status == "plausible", s.plausibility
