"""``--host-metrics LABEL=URL``: a real node_exporter on 127.0.0.1 feeds a target's host sections and durability checks.

One module-wide ``dbdiag run`` (insert, 1 client, 2 s) against the session's throwaway PostgreSQL, with
node_exporter (Debian: prometheus-node-exporter) started here on a free loopback port as that target's host.
The server is on this machine too, so the same run's local sources (/proc host series, /proc/diskstats in
flush tracing) measure the same CPUs and the same disk: the node_exporter figures are checked against them,
with margins for the two sources sampling at different moments of each second (and other processes on the
machine, which both see alike).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors.base import CollectorContext
from collectors.hostinfo import storage_facts
from collectors.node_exporter import NodeExporterHost
from diag.core import servers
from diag.core.bundle import Bundle, Memo, load_bundle
from diag.core.targets import parse_target
from reports.model.durability_view import durability_rows, window_rate
from reports.model.evidence import evidence_rows
from reports.model.cpu import cpu_use
from reports.model.steps import steps
from tests.remote_hosts import node_exporter_running, serve_node_exporter

REPO = Path(__file__).resolve().parents[2]
@pytest.fixture(scope="module")
def node_exporter() -> Iterator[str]:
    """The module's node_exporter: its /metrics URL."""
    with node_exporter_running() as url:
        yield url


@pytest.fixture(scope="module")
def bundle(pg_server: servers.ThrowawayServer, node_exporter: str, tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    out = tmp_path_factory.mktemp("hostmetrics") / "bundle"
    p = subprocess.run([sys.executable, "-m", "diag", "run", f"db={pg_server.dsn()}", "-w", "insert", "-c", "1",
                        "-T", "2", "--warmup", "0.5", "--no-profile", "--flush-capability", "100000",
                        "--host-metrics", f"db={node_exporter}", "--out", str(out)],
                       capture_output=True, text=True, timeout=240, cwd=str(REPO))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    return load_bundle(out)


def test_target_says_where_its_host_evidence_came_from(bundle: Bundle, node_exporter: str,
                                                       pg_server: servers.ThrowawayServer) -> None:
    t = next(t for t in bundle.run["targets"] if t["label"] == "db")
    assert t["host_metrics"] == node_exporter
    st = t["storage"]
    assert st["source"] == f"node_exporter {node_exporter}"
    # The same disk this machine's /proc and /sys say holds the data directory.
    assert st["name"] == storage_facts(t["data_directory"])["name"], st
    assert bundle.run["collectors"]["host--db"]["ok"], bundle.run["collectors"]["host--db"]
    recs = bundle.series["host--db"]
    assert len(recs) >= 3
    assert all(r["source"] == f"node_exporter {node_exporter}" for r in recs)
    assert not any(k.startswith("procs.") for r in recs for k in r)


def test_host_cpu_of_the_step_is_read_from_node_exporter(bundle: Bundle, node_exporter: str) -> None:
    (step,) = [s for s in steps(bundle) if s.target == "db"]
    u = cpu_use(bundle, step)
    assert u is not None and u.host_source == f"node_exporter {node_exporter}"
    assert u.ncpu == bundle.run["host"]["cpus_logical"]
    assert u.span_s >= 0.8 * (step.t1 - step.t0)
    # The same machine through /proc: the local host series' busy share over the same window.
    local = dataclasses.replace(bundle, series={k: v for k, v in bundle.series.items() if k != "host--db"},
                                derived=Memo())
    lu = cpu_use(local, step)
    assert lu is not None and lu.host_source == ""
    assert abs(u.host_busy - lu.host_busy) < 0.25, (u.host_busy, lu.host_busy)
    assert u.server_cores is not None  # the server's own processes still come from this machine's /proc rows
    html = (bundle.path / "report.html").read_text()
    assert "db host CPU busy % (node_exporter)" in html and "db host (node_exporter)" in html


def test_device_flushes_and_the_plausibility_verdict_use_node_exporter(bundle: Bundle, node_exporter: str) -> None:
    (s,) = [s for s in durability_rows(bundle) if s.target == "db"]
    assert s.D_source.startswith(f"node_exporter {node_exporter}: node_disk_flush_requests_total"), s.D_source
    assert s.local_block_device
    # Each commit flushes the WAL once and the flush reaches the device (see test_durability_probe's facts).
    assert s.C > 50 and s.D is not None and s.D >= 0.7 * s.C, (s.C, s.D)
    # /proc/diskstats of the same disk in the same window (flush tracing's device counter, same run).
    flush = bundle.series.get("flush--db", [])
    dev = next(t for t in bundle.run["targets"] if t["label"] == "db")["storage"]["name"]
    d_proc = window_rate(flush, [f"device.{dev}.flushes"], s.t_start, s.t_end)
    assert d_proc is not None
    assert abs(s.D - d_proc) <= 0.35 * max(s.D, d_proc) + 20, (s.D, d_proc)
    pv = s.plausibility
    assert pv is not None and pv.status == "plausible", pv
    check = next(c for c in pv.checks if c.name == "device_sees_flushes")
    assert check.status == "passed", check


def test_a_node_exporter_that_is_not_there_is_a_reason_not_a_failure(pg_server: servers.ThrowawayServer,
                                                                      tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{servers.free_port()}/metrics"
    ctx = CollectorContext(target=parse_target(f"db={pg_server.dsn()}"), artifacts=tmp_path,
                           options={"host_metrics": url})
    p = NodeExporterHost(ctx).probe()
    assert not p.ok and p.reason.startswith(f"cannot read {url}") and "prometheus-node-exporter" in p.hint
    q = subprocess.run([sys.executable, "-m", "diag", "run", f"db={pg_server.dsn()}", "--host-metrics",
                        f"other={url}", "--out", str(tmp_path / "b")], capture_output=True, text=True, timeout=60,
                       cwd=str(REPO))
    assert q.returncode == 2 and "no target is labelled 'other'" in q.stderr and "Traceback" not in q.stderr
    q = subprocess.run([sys.executable, "-m", "diag", "run", f"db={pg_server.dsn()}", "--host-metrics",
                        "db=127.0.0.1:9100", "--out", str(tmp_path / "c")], capture_output=True, text=True,
                       timeout=60, cwd=str(REPO))  # a mistyped address (no scheme): refused before anything runs
    assert q.returncode == 2 and q.stderr.strip().splitlines() == [
        "dbdiag: error: --host-metrics db=127.0.0.1:9100: node_exporter's address is http://HOST:PORT/metrics"], q.stderr
    assert not (tmp_path / "c").exists()


def test_the_report_says_where_each_evidence_came_from(bundle: Bundle, node_exporter: str) -> None:
    rows = {r["evidence"]: r for r in evidence_rows(bundle)["db"]}
    assert rows["host CPU, context switches, disk I/O"]["source"] == f"node_exporter {node_exporter}"
    assert rows["device flushes (D)"]["source"].startswith(f"node_exporter {node_exporter}: ")
    assert rows["flush capability (F)"]["source"].startswith("given by the user")
    html = (bundle.path / "report.html").read_text()
    assert f"node_exporter {node_exporter}" in html and "missing, and why" in html


def test_a_node_exporter_killed_mid_step_is_where_the_host_evidence_stops(pg_server: servers.ThrowawayServer,
                                                                          tmp_path: Path) -> None:
    proc, url = serve_node_exporter()
    out = tmp_path / "bundle"
    run = subprocess.Popen([sys.executable, "-m", "diag", "run", f"db={pg_server.dsn()}", "-w", "insert", "-c", "1,2",
                            "-T", "2", "--warmup", "0", "--no-profile", "--flush-capability", "100000",
                            "--host-metrics", f"db={url}", "--out", str(out)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO))
    try:
        # The first interval of the first step's measured part (about 1 s into its 2 s): kill node_exporter there.
        deadline = time.monotonic() + 120
        while not (out / "series" / "workload--db.jsonl").exists() or \
                not (out / "series" / "workload--db.jsonl").read_text().strip():
            assert run.poll() is None and time.monotonic() < deadline, run.communicate()[1][-3000:]
            time.sleep(0.05)
        killed_at = time.time()
        proc.kill()
        proc.wait(timeout=10)
        _, err = run.communicate(timeout=180)
    finally:
        proc.kill()
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0 and "Traceback" not in err, err[-3000:]
    b = load_bundle(out)
    first, second = sorted((s for s in steps(b) if s.target == "db"), key=lambda s: s.t0)
    assert first.t0 < killed_at < first.t1  # the kill fell inside the first step
    # The bundle says when the series ends and why; the terminal said it in one line.
    (ev,) = [e for e in b.events if e.get("collector") == "host--db" and e.get("kind") == "collector_off"]
    last_t = max(r["t"] for r in b.series["host--db"])
    assert ev["stopped_at"] == pytest.approx(last_t) and last_t <= killed_at, (ev, killed_at)
    assert ev["reason"] == "connection refused", ev
    notes = [ln for ln in err.splitlines() if "stopped answering" in ln]
    assert len(notes) == 1 and notes[0].startswith("dbdiag: note: host metrics (node_exporter) (db): "), err
    rows = {r["evidence"]: r for r in evidence_rows(b)["db"]}
    for what in ("host CPU, context switches, disk I/O", "device flushes (D)"):
        assert rows[what]["source"].startswith(f"node_exporter {url}"), rows[what]
        assert rows[what]["missing"].startswith("none after ") and "connection refused" in rows[what]["missing"]
    # The second step has no host figures at all: D and host CPU are not measured, never taken from before
    # the stop or from this machine's /proc.
    by_clients = {s.clients: s for s in durability_rows(b) if s.target == "db"}
    d2 = by_clients[2]
    assert d2.D is None and d2.D_source.startswith(f"not measured: node_exporter {url} stopped answering at "), d2
    assert "connection refused" in d2.D_source and "cover 0.0 s" in d2.D_source
    assert next(c for c in d2.plausibility.checks if c.name == "device_sees_flushes").status == "not_checked"
    assert cpu_use(b, second) is None
    # The first step: D over the part node_exporter covered, said so, when that is at least half the step
    # (the window rule of every series); else not measured, as the second.
    d1, covered = by_clients[1], last_t - first.t0
    if covered >= 0.5 * (first.t1 - first.t0):
        assert d1.D is not None and f"first {covered:.1f} s of {first.t1 - first.t0:.1f} s only" in d1.D_source, d1
        u = cpu_use(b, first)
        assert u is not None and u.span_s == pytest.approx(covered, abs=0.05)
    else:
        assert d1.D is None and "stopped answering" in d1.D_source, d1
        assert cpu_use(b, first) is None
