"""Live perf profiles: the local PostgreSQL under pgbench -S, and targets that exit mid-window.

Needs perf with cpu-clock allowed (root here). A missing or forbidden perf
FAILS these tests with the probe's reason and hint: nothing is skipped.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors.profile import analyse, parse, pyspy, record
from diag.core.db import Session
from diag.core.targets import Target

# Functions a SELECT-by-primary-key round trip spends its time in (the 2010 oprofile
# list in shared/seeds/002 plus what Debian's stripped 15 resolves: AllocSetAlloc is
# static there, so it shows as [unknown] (postgres)).
PG_HOT = {
    "AllocSetAlloc", "base_yyparse", "core_yylex", "ExecInitNode", "_bt_compare", "_bt_checkpage",
    "_bt_first", "_bt_moveright", "hash_search_with_hash_value", "hash_bytes", "palloc", "palloc0",
    "MemoryContextAlloc", "MemoryContextAllocZero", "MemoryContextAllocZeroAligned", "SearchCatCache",
    "SearchCatCache1", "LockAcquireExtended", "ScanKeywordLookup", "get_relation_info",
    "expression_tree_walker", "heap_page_prune_opt", "query_tree_walker", "pull_var_clause",
}
SCRATCH_DB = "dbdiag_scratch_profile"


def require_perf(pid: int | None = None, scope: record.Scope = "pids") -> None:
    ok, reason, hint = record.probe_perf(pid, scope=scope)
    if not ok:
        pytest.fail(f"perf unavailable: {reason}; {hint}")


def _pg_cli_env(t: Target) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    if t.password:
        env["PGPASSWORD"] = t.password
    return ["-h", t.socket or t.host or "127.0.0.1", "-p", str(t.port or 5432), "-U", t.user], env


@pytest.fixture(scope="module")
def scratch_db(pg_service: Target) -> Iterator[Target]:
    """A pgbench scale-1 database on the local service, dropped after the module (both scopes' select-only
    pgbench runs read it; nothing writes to it, so one initialisation serves both)."""
    pgbench = shutil.which("pgbench")
    if pgbench is None:
        pytest.fail("pgbench not found (Debian: postgresql-client)")
    with Session(pg_service) as s:
        s.execute(f"DROP DATABASE IF EXISTS {SCRATCH_DB}")
        s.execute(f"CREATE DATABASE {SCRATCH_DB}")
    conn, env = _pg_cli_env(pg_service)
    try:
        init = subprocess.run([pgbench, *conn, "-i", "-s", "1", "-q", SCRATCH_DB],
                              capture_output=True, text=True, timeout=120, env=env)
        assert init.returncode == 0, init.stderr
        yield pg_service
    finally:
        with Session(pg_service) as s:
            s.execute(f"DROP DATABASE IF EXISTS {SCRATCH_DB} WITH (FORCE)")


@pytest.mark.parametrize("scope", ["pids", "system"])
def test_live_postgres_backend_profile(scratch_db: Target, tmp_path: Path, scope: record.Scope) -> None:
    conn, env = _pg_cli_env(scratch_db)
    # pgbench runs until the recording is done and is then interrupted: a fixed -T 8 outlasted the 2 s window
    # by 5 s on a quiet machine, and a busy one can need all of it for perf's start-up.
    bench = subprocess.Popen([shutil.which("pgbench") or "pgbench", *conn, "-S", "-n", "-c", "2", "-T", "120",
                              SCRATCH_DB], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        pids: list[int] = []
        with Session(scratch_db) as s:
            for _ in range(100):  # up to 5 s for both pgbench connections to appear
                pids = [r["pid"] for r in s.query(
                    "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = 'pgbench'",
                    (SCRATCH_DB,))]
                if len(pids) == 2:
                    break
                time.sleep(0.05)
        assert len(pids) == 2, f"pgbench backends not found: {pids}"
        require_perf(pids[0], scope)
        rec = record.record_profile(pids, 2.0, tmp_path, scope=scope)
    finally:
        running = bench.poll() is None
        bench.send_signal(signal.SIGINT)
        out, _ = bench.communicate(timeout=60)
    # pgbench ran through the whole window without an error (it has no SIGINT handler: it dies of it)
    assert running and bench.returncode == -signal.SIGINT, (bench.returncode, out)
    assert "error" not in out.lower(), out

    assert rec.samples > 0 and rec.segments == 1 and rec.exited_pids == () and rec.scope == scope
    assert set(rec.kinds) == set(pids)  # only the targets' samples, even system-wide
    assert set(rec.kinds.values()) == {"backend"}
    assert not (tmp_path / "perf.data").exists()  # removed after folding
    rows = analyse.top_symbols(rec.folded, by_kind=True, n=25)
    table = "\n".join(f"{r.kind:8} {r.samples:6} {r.percent:6.2f}% {r.symbol}" for r in rows)
    share = analyse.unresolved_share(rec.folded)
    print(f"\n{rec.samples} samples, unresolved {100 * share:.1f}%\n{table}")
    assert {r.kind for r in rows} == {"backend"}
    top = {r.symbol for r in rows}
    assert top & PG_HOT, f"no parser/planner/executor/index/allocator symbol in the top 25:\n{table}"
    # Stacks are walked back to the backend's main loop.
    assert sum(n for s, n in rec.folded.items() if ";PostgresMain;" in s) > 0.8 * rec.samples
    assert 0.0 <= share < 0.5


def _busy(seconds: float) -> subprocess.Popen[bytes]:
    code = f"import time\nt = time.monotonic()\nwhile time.monotonic() - t < {seconds}: pass\n"
    return subprocess.Popen([sys.executable, "-c", code])


def _children(pid: int) -> list[int]:
    """The child processes of every thread of ``pid`` (/proc's children lists; [] once it is gone)."""
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    return out


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _perf_recording_at(give_up: threading.Event) -> float | None:
    """Monotonic time at which a ``perf record`` started by this process began sampling (None: gave up).

    perf forks its workload (``sleep``) first and lets it exec once its events are set up and enabled, which
    took 1.2 s (per pid) and 2.1 s (system-wide: it reads every process's maps) here at load 8 beside two busy
    loops: a ``sleep`` child of our perf child means it is sampling. Read from /proc directly, every 10 ms: a
    scan of all processes (psutil) itself lagged by about a second on that machine."""
    while not give_up.is_set():
        for perf in _children(os.getpid()):
            if _comm(perf) == "perf" and any(_comm(c) == "sleep" for c in _children(perf)):
                return time.monotonic()
        time.sleep(0.01)
    return None


# pids: start-up, the short one's 0.6 s, stopping perf and reading its samples (2-3 s at load 8), then a
# second segment; system: start-up and the two spans only (its start-up reached 3.7 s at load 8).
@pytest.mark.parametrize(("scope", "segments", "window_s"), [("pids", 2, 8.0), ("system", 1, 6.0)])
def test_live_target_exiting_mid_window(tmp_path: Path, scope: record.Scope, segments: int, window_s: float) -> None:
    """pids: perf is stopped when a target exits (perf 6.1 would spin) and restarted
    for the rest; system: per-CPU events do not spin, one window runs through.

    The short target is ended ``short_s`` after perf began sampling, not at a fixed time from its own start:
    perf's start-up competes with the two busy loops for the CPUs (1.2-2.1 s here at load 8, see
    :func:`_perf_recording_at`), so the old 1.2 s head start could let the short one exit before the first
    sample (CI, [system-1]). The window leaves room for that start-up, and in pids scope for stopping perf,
    reading its samples and starting it again; the long target outlives the window."""
    short_s = 0.6
    long_ = _busy(120.0)
    short: subprocess.Popen[bytes] | None = None
    stop = threading.Event()
    ender: threading.Thread | None = None
    ended: dict[str, float] = {}

    def end_short() -> None:
        began = _perf_recording_at(stop)
        if began is not None and not stop.wait(short_s) and short is not None:
            short.kill()  # a zombie until waited: the watchdog counts it as exited, as an exit would be
            ended.update(began=began, killed=time.monotonic())

    try:
        require_perf(long_.pid, scope)
        short = _busy(120.0)
        ender = threading.Thread(target=end_short, daemon=True)
        ender.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        rec = record.record_profile([short.pid, long_.pid], window_s, tmp_path, keep=True, scope=scope,
                                    kind_of=lambda tid, comm: "short" if tid == short.pid else "long")
        took = time.monotonic() - t0
    finally:
        stop.set()
        if ender is not None:
            ender.join(timeout=10)
        for p in (short, long_):
            if p is not None:
                p.kill()
                p.wait(timeout=10)
    assert ended, "perf never began sampling within the window"
    # perf began early enough for the long target to be sampled over at least twice the short one's span
    short_span, long_span = ended["killed"] - ended["began"], t0 + window_s - ended["began"]
    assert long_span >= 2 * short_span, f"perf began sampling {ended['began'] - t0:.1f} s into the window"
    assert rec.exited_pids == (short.pid,)
    assert rec.segments == segments
    assert len(rec.perf_data) == segments and all(p.exists() for p in rec.perf_data)
    per_kind: dict[str, int] = {}
    for stack, n in rec.folded.items():
        per_kind[stack.split(";")[0]] = per_kind.get(stack.split(";")[0], 0) + n
    # Both were on CPU: the short one until it was ended (segment 1), the long one throughout.
    assert per_kind.get("short", 0) > 0 and per_kind["long"] > per_kind["short"], per_kind
    assert took < window_s + 10  # the window is bounded, not stretched by perf's restart


def test_live_client_profile_with_py_spy(tmp_path: Path) -> None:
    if not pyspy.py_spy_available():
        pytest.fail("py-spy is not installed: the test extra installs it (pip install -e .[test])")
    code = "import time\ndef spin():\n    t = time.monotonic()\n    while time.monotonic() - t < 4: pass\nspin()\n"
    client = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.3)
        prof = pyspy.record_client_profile([client.pid, 424242], 1.0, tmp_path / "clients.folded")
    finally:
        client.kill()
        client.wait(timeout=10)
    assert prof.samples > 0 and list(prof.failed) == [424242]
    assert all(s.startswith("client;") and ";spin (" in s for s in prof.folded)
    assert parse.load_folded(tmp_path / "clients.folded") == dict(prof.folded)
