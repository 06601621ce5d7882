"""``--ssh LABEL=user@host``: perf on the database's host over ssh, its profile and flush counts back into the bundle.

The test starts its own sshd (openssh-server) on a free loopback port with a throwaway host key and client
key (nothing of the machine's ssh setup is used or changed; ``DBDIAG_SSH_CONFIG`` points dbdiag's ssh at a
config file for it) and one module-wide ``dbdiag run`` against the session's throwaway PostgreSQL whose
profile is recorded through it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors.base import CollectorContext
from collectors.fsync_test import _specs
from collectors.hostinfo import storage_facts
from collectors.profile.parse import load_folded
from collectors.ssh_fsync import SshFsyncTest
from collectors.ssh_host import SshProfileSource
from diag.core import servers
from diag.core.bundle import Bundle, load_bundle
from diag.core.targets import parse_target
from reports.model.durability_view import durability_rows, flush_capability
from reports.model.evidence import evidence_rows
from tests.remote_hosts import node_exporter_running

REPO = Path(__file__).resolve().parents[2]
SSHD = "/usr/sbin/sshd"


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=30)


@pytest.fixture(scope="module")
def ssh_config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An sshd on 127.0.0.1:<free port> taking only a throwaway key; the ssh_config that reaches it as dbdiag-test."""
    if not os.path.exists(SSHD) or not shutil.which("ssh"):
        pytest.fail("sshd / ssh are not installed (Debian: apt-get install openssh-server openssh-client)")
    d = tmp_path_factory.mktemp("sshd")
    _keygen(d / "host_key")
    _keygen(d / "client_key")
    _keygen(d / "nopython_key")
    # A second key whose sessions run with a PATH that has hostname and no python3: a host without python3.
    (d / "nopython_bin").mkdir()
    (d / "nopython_bin" / "hostname").symlink_to(shutil.which("hostname") or "/bin/hostname")
    forced = f'command="PATH={d}/nopython_bin exec /bin/sh -c \\"$SSH_ORIGINAL_COMMAND\\"" '
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text() + forced + (d / "nopython_key.pub").read_text())
    port = servers.free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n"
        f"PidFile {d}/sshd.pid\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 15
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"sshd did not start: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.1)
    cfg = d / "ssh_config"
    cfg.write_text(f"Host dbdiag-test\n  HostName 127.0.0.1\n  Port {port}\n  User root\n  IdentityFile {d}/client_key\n"
                   "  IdentitiesOnly yes\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
                   f"Host dbdiag-nopython\n  HostName 127.0.0.1\n  Port {port}\n  User root\n"
                   f"  IdentityFile {d}/nopython_key\n  IdentitiesOnly yes\n  StrictHostKeyChecking no\n"
                   "  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n")
    yield cfg
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def node_exporter() -> Iterator[str]:
    """That host's node_exporter too (--host-metrics beside --ssh): its /metrics URL."""
    with node_exporter_running() as url:
        yield url


@pytest.fixture(scope="module")
def bundle(pg_server: servers.ThrowawayServer, ssh_config: Path, node_exporter: str,
           tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    """One run with both remote sources on the target: ssh (profiles, S, F) and node_exporter (host, D)."""
    out = tmp_path_factory.mktemp("sshrun") / "bundle"
    p = subprocess.run([sys.executable, "-m", "diag", "run", f"db={pg_server.dsn()}", "-w", "insert", "-c", "1",
                        "-T", "3", "--warmup", "0.5", "--profile-seconds", "1.5", "--fsync-seconds", "0.1",
                        "--ssh", "db=root@dbdiag-test", "--host-metrics", f"db={node_exporter}",
                        "--out", str(out)], capture_output=True, text=True, timeout=240, cwd=str(REPO),
                       env={**os.environ, "DBDIAG_SSH_CONFIG": str(ssh_config)})
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    return load_bundle(out)


def test_the_profile_came_over_ssh_into_the_bundle(bundle: Bundle) -> None:
    probe = bundle.run["collectors"]["ssh_profile--db"]
    assert probe["ok"] and "ssh root@dbdiag-test" in probe["reason"], probe
    assert next(t for t in bundle.run["targets"] if t["label"] == "db")["ssh"] == "root@dbdiag-test"
    (row,) = bundle.results
    prof = row["profile"]
    assert "error" not in prof, prof
    assert prof["source"] == "ssh root@dbdiag-test" and prof["freq_hz"] > 0, prof
    assert prof["samples"] > 0
    folded = load_folded(bundle.path / prof["folded"])
    assert sum(folded.values()) == prof["samples"]
    # Only the server's processes (pgrep -x postgres on that host), none of the clients or of dbdiag.
    assert all(stack.split(";")[:2] == ["server", "postgres"] for stack in folded), list(folded)[:5]
    t0, t1 = prof["window"]
    assert row["t_start"] - 0.5 <= t0 < t1 <= row["t_end"] + 1.0
    # This machine's profiler left the target to the ssh source (one profile per step, no local one beside it).
    # Its profile source did run (probe ok), and wrote nothing for this step: a local recording's row has the
    # unwinder and scope (collectors/step_profiles.py) and its off-CPU files sit beside the folded stacks.
    assert not {"unwinder", "scope", "offcpu"} & set(prof), prof
    assert [p.name for p in (bundle.path / "artifacts").glob("*.folded")] == [Path(prof["folded"]).name]


def test_the_report_shows_the_remote_profile(bundle: Bundle) -> None:
    html = (bundle.path / "report.html").read_text()
    assert "profile--db--insert--c1.folded" in html  # the profile section renders the remote profile


def test_an_unreachable_host_is_a_reason(ssh_config: Path, pg_server: servers.ThrowawayServer, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    closed = tmp_path / "ssh_config"  # the same key and options, a port nothing listens on
    closed.write_text(ssh_config.read_text().replace("Host dbdiag-test", "Host dbdiag-closed").replace(
        "Port ", f"Port {servers.free_port()}\n  #"))
    monkeypatch.setenv("DBDIAG_SSH_CONFIG", str(closed))
    ctx = CollectorContext(target=parse_target(f"db={pg_server.dsn()}"), artifacts=tmp_path,
                           options={"ssh": "root@dbdiag-closed"})
    p = SshProfileSource(ctx).probe()
    assert not p.ok and p.reason.startswith("ssh root@dbdiag-closed: ") and "refused" in p.reason, p.reason
    assert "BatchMode" in p.hint


def test_a_host_without_python3_is_the_reason_f_is_missing(ssh_config: Path, pg_server: servers.ThrowawayServer,
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBDIAG_SSH_CONFIG", str(ssh_config))
    ctx = CollectorContext(target=parse_target(f"db={pg_server.dsn()}"), artifacts=tmp_path,
                           data_dir=str(pg_server.data_dir), options={"ssh": "root@dbdiag-nopython"})
    p = SshFsyncTest(ctx).probe()
    assert not p.ok and p.reason == f"ssh root@dbdiag-nopython: python3 is not installed on {socket.gethostname()}", p
    assert "with python3 there" in p.hint


def test_the_report_says_which_evidence_came_over_ssh_and_which_from_node_exporter(bundle: Bundle,
                                                                                    node_exporter: str) -> None:
    rows = {r["evidence"]: r for r in evidence_rows(bundle)["db"]}
    assert rows["server CPU profiles"] == {"evidence": "server CPU profiles", "source": "ssh root@dbdiag-test",
                                           "missing": ""}
    assert rows["server flush calls (S)"] == {"evidence": "server flush calls (S)",
                                              "source": "perf over ssh root@dbdiag-test", "missing": ""}
    assert rows["host CPU, context switches, disk I/O"]["source"] == f"node_exporter {node_exporter}"
    assert rows["device flushes (D)"]["source"].startswith(f"node_exporter {node_exporter}: ") and \
        not rows["device flushes (D)"]["missing"], rows
    (s,) = durability_rows(bundle)
    assert s.D_source.startswith(f"node_exporter {node_exporter}: node_disk_flush_requests_total"), s.D_source
    # S over ssh and D from node_exporter in one verdict: the server's flushes reach the device.
    check = next(c for c in s.plausibility.checks if c.name == "device_sees_flushes")  # type: ignore[union-attr]
    assert check.status == "passed", check


def test_flush_calls_counted_over_ssh_give_s_of_the_durability_checks(bundle: Bundle) -> None:
    probe = bundle.run["collectors"]["flush--db"]
    assert probe["ok"] and "ssh root@dbdiag-test" in probe["reason"], probe
    recs = bundle.series["flush--db"]
    assert len(recs) >= 3 and all(r["sources"][0].startswith("ssh root@dbdiag-test perf:") for r in recs)
    (s,) = durability_rows(bundle)
    assert s.S_source.startswith("perf: fsync + fdatasync"), s.S_source
    # One client: each commit flushes the WAL once (the facts of test_durability_probe, same bounds).
    assert s.C > 50 and s.S is not None and 0.7 <= s.S / s.C <= 1.5, (s.C, s.S)


def test_the_fsync_test_ran_over_ssh_and_gives_f(bundle: Bundle) -> None:
    probe = bundle.run["collectors"]["flush_capability--db"]
    assert probe["ok"], probe
    fc = flush_capability(bundle.run, "db")
    assert fc.ops_per_s is not None and fc.ops_per_s > 50, fc
    assert fc.source.startswith("fsync test on ssh root@dbdiag-test:"), fc.source
    assert fc.fsync_test is not None and "over ssh" in fc.fsync_test.notes[0]
    (s,) = durability_rows(bundle)
    # F: the test's rate, or the 1-client S when that is higher (a short test on a busy machine can land in
    # a slow moment: reports.model.durability_view), as for a local fsync test.
    assert s.F is not None and s.F == pytest.approx(max(fc.ops_per_s, s.S or 0.0)), (s.F, fc.ops_per_s, s.S)
    check = next(c for c in s.plausibility.checks if c.name == "flush_capacity")  # type: ignore[union-attr]
    assert check.status == "passed", check
    rows = {r["evidence"]: r for r in evidence_rows(bundle)["db"]}
    assert rows["flush capability (F)"]["source"].startswith("fsync test on ssh root@dbdiag-test:")


def test_the_fsync_test_over_ssh_runs_every_method_of_the_local_one(bundle: Bundle) -> None:
    fc = flush_capability(bundle.run, "db")
    res = fc.fsync_test
    assert res is not None
    # The same tests as `dbdiag fsync-test` here, in the same order, each run (or refused for a stated reason).
    assert [(t.group, t.method) for t in res.tests] == [(s.group, s.method) for s in _specs()]
    timed = [t for t in res.tests if t.supported]
    assert len(timed) >= 10 and all(t.ops > 0 and t.seconds > 0 for t in timed), timed
    assert all(t.reason for t in res.tests if not t.supported)
    assert res.seconds_per_test == 0.1 and res.kernel == os.uname().release  # --fsync-seconds reached that host
    # That host's device facts (loopback: the same disk this machine's /sys names under the data directory).
    data_dir = next(t for t in bundle.run["targets"] if t["label"] == "db")["data_directory"]
    assert res.device.name == storage_facts(data_dir)["name"], res.device
    assert res.directory == data_dir
    # The test file was removed there, as a local test removes its own.
    assert not list(Path(data_dir).glob(".dbdiag-fsync-*"))


def test_an_unreachable_ssh_host_with_writes_degrades_and_the_run_goes_on(
        ssh_config: Path, pg_server: servers.ThrowawayServer, tmp_path: Path) -> None:
    closed = tmp_path / "ssh_config"  # the same key and options, a port nothing listens on
    closed.write_text(ssh_config.read_text().replace("Host dbdiag-test", "Host dbdiag-closed").replace(
        "Port ", f"Port {servers.free_port()}\n  #"))
    out = tmp_path / "bundle"
    p = subprocess.run([sys.executable, "-m", "diag", "run", f"db={pg_server.dsn()}", "-w", "insert", "-c", "1",
                        "-T", "1", "--warmup", "0", "--profile-seconds", "0.5", "--ssh", "db=root@dbdiag-closed",
                        "--out", str(out)], capture_output=True, text=True, timeout=120, cwd=str(REPO),
                       env={**os.environ, "DBDIAG_SSH_CONFIG": str(closed)})
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-3000:]
    notes = [ln for ln in p.stderr.splitlines() if "refused" in ln]
    # One line per remote source (the fsync test as the profiles and the flush calls), each saying why.
    assert len(notes) == 3 and all(ln.startswith("dbdiag: note: ") for ln in notes), notes
    assert any(ln.startswith("dbdiag: note: fsync test over ssh (db) not collected: ssh root@dbdiag-closed: ")
               for ln in notes), notes
    b = load_bundle(out)
    (row,) = b.results
    assert row["transactions"] > 0  # the run went on and measured the step
    probe = b.run["collectors"]["flush_capability--db"]
    assert probe["ok"] is False and "refused" in probe["reason"], probe
    rows = {r["evidence"]: r for r in evidence_rows(b)["db"]}
    assert rows["device flushes (D)"]["missing"].startswith("not read over ssh: give --host-metrics"), rows
    for ev in ("flush capability (F)", "server flush calls (S)", "server CPU profiles"):
        assert rows[ev]["source"] == "" and "refused" in rows[ev]["missing"], rows[ev]
    assert rows["flush capability (F)"]["missing"].startswith("not measured: fsync test over ssh: ssh root@"), rows
    assert rows["server flush calls (S)"]["missing"].startswith("ssh root@dbdiag-closed: ssh: connect to host"), rows
    (s,) = durability_rows(b)
    assert s.F is None and "refused" in s.F_source
    check = next(c for c in s.plausibility.checks if c.name == "flush_capacity")  # type: ignore[union-attr]
    assert check.status == "not_checked", check
