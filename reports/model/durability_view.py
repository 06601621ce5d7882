"""Per result step: the durability numbers (C, c, S, D, F) and both verdicts, from a run bundle alone.

Pure functions of :class:`diag.core.bundle.Bundle` (no I/O), so a re-rendered report
gives the same verdicts. Used by the report, the findings rules and
``dbdiag durability``.

Where each number comes from:

* C, committed write transactions/s: the result row's ``write_tps`` when the
  driver gives it, else its ``tps`` times the workload's share of write
  transactions (:data:`WRITE_SHARE`). Read-only transactions need no flush, so
  steps of read-only workloads get no verdict.
* c: the row's ``clients``.
* S, flush calls/s by the server: series ``flush--<label>``
  (:mod:`collectors.flush`) over the step's window: the larger of the
  filesystem's file-sync count (fsync, fdatasync and O_SYNC/O_DSYNC writes) and
  fsync + fdatasync system calls (each may miss calls the other sees; the
  larger is a lower bound of both together). sync_file_range is left out: it
  starts writeback and never flushes a device cache. Without that series, the
  engine's own counter stands in (pg_stats ``wal.wal_sync``; my_status
  ``Innodb_os_log_fsyncs`` or, on MariaDB 10.8+, ``Innodb_data_fsyncs``), said
  so in ``S_source``.
* D, device flushes/s: ``device.<name>.flushes`` of the same series, summed over
  the disks under the data directory. Device-wide: other processes' flushes
  add to it.
* F, flush capability: run.json ``options.flush_capability`` when the user gave
  it, used as is. Else the fsync test stored in run.json ``flush_capability``
  for the target's device (record: :class:`diag.core.schema.FlushCapabilityInfo`), raised to S
  of the target's 1-client step when that is higher: one client flushes one
  commit at a time, so the server itself showed the disk completing S flushes/s
  through the same stack the fsync test measures. A short fsync test on a busy
  machine can land in a slow moment (seen here: 325/s from the test, 930
  flushes/s by the server a minute later), which alone would call an honest
  server implausible. Flushes that never reach the disk are the device check's
  business, not F's.

Window arithmetic: counters are turned into reset-safe cumulative sums
(:func:`collectors.rates.counter_delta`) and read at the step's ``t_start`` and
``t_end`` by linear interpolation between the records around them. Under a
steady load the error is a fraction of one collector interval at each end
(1 s in a run, 0.25 s in the durability probe), i.e. at most interval /
duration of the rate.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collectors.fsync_test import FsyncTestResult
from collectors.rates import counter_delta
from diag.core.bundle import Bundle
from diag.core.schema import FlushCapabilityInfo, ResultRow, safe_name
from reports.model.series import MIN_COVERAGE
from diag.core.engines import POSTGRES, Engine, engine_for
from diag.core.errors import UsageError
from reports.model.durability import PlausibilityVerdict, SettingsVerdict, plausibility_verdict, settings_verdict
from reports.model.durability_tail import FS_KEY, SYSCALL_KEYS, tail_flush_rates, window_tps
from reports.model.series import source_stopped

# Share of a workload's transactions that write (and so must be flushed at commit).
# insert: single-row autocommit inserts; read-write: every transaction updates.
# tpcc: the mix is 45% New-Order, 43% Payment, 4% Delivery (writes) and 4%
# Order-Status, 4% Stock-Level (read-only), so 92% write, less the 1% of New-Orders
# that roll back by design: 0.9 keeps C from ever being overstated. Unknown or
# read-only workloads get no C: guessing would make the flush checks meaningless.
WRITE_SHARE: dict[str, float] = {"insert": 1.0, "read-write": 1.0, "tpcc": 0.9}


# --------------------------------------------------------------------------- counters over a window


def cumulative(records: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[tuple[float, float]]:
    """``(t, running total)`` of the sum of ``keys``, reset-safe; records missing any key are skipped."""
    pts: list[tuple[float, float]] = []
    prev: list[float] | None = None
    total = 0.0
    for r in sorted((r for r in records if isinstance(r.get("t"), (int, float))), key=lambda r: r["t"]):
        vals = [r.get(k) for k in keys]
        if any(not isinstance(v, (int, float)) for v in vals):
            continue
        cur = [float(v) for v in vals]  # type: ignore[arg-type]
        if prev is not None:
            total += sum(counter_delta(p, c) or 0.0 for p, c in zip(prev, cur))
        prev = cur
        pts.append((float(r["t"]), total))
    return pts


def _at(pts: Sequence[tuple[float, float]], t: float) -> float:
    """Value at ``t`` by linear interpolation (``t`` within the points' span)."""
    for (t0, v0), (t1, v1) in zip(pts, pts[1:]):
        if t0 <= t <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t - t0) / (t1 - t0)
    return pts[-1][1] if t >= pts[-1][0] else pts[0][1]


def _window_records(records: Sequence[dict[str, Any]], keys: Sequence[str], t_start: float, t_end: float,
                    times: Sequence[float] | None = None) -> list[dict[str, Any]]:
    """What a rate over the window reads: the records inside it and the nearest one each side with every key.

    The rate is the difference of the running total at the window's ends, so the records further out add
    nothing to it; reading only these keeps a step's rate from walking an hour's series (32 rates a report,
    0.9 s of a one-hour bundle's render before). With ``times`` (each record's ``t`` in order:
    :func:`reports.series.series_times`) the window is found by bisection, the same records."""
    if times is not None:
        lo = bisect.bisect_right(times, t_start)
        hi = max(lo, bisect.bisect_left(times, t_end))  # an empty window (t_end <= t_start) has no inside
        first = next((records[i] for i in range(lo - 1, -1, -1) if _has_all(records[i], keys)), None)
        last = next((records[i] for i in range(hi, len(records)) if _has_all(records[i], keys)), None)
        return ([first] if first else []) + list(records[lo:hi]) + ([last] if last else [])
    inside: list[dict[str, Any]] = []
    before: dict[str, Any] | None = None
    after = None
    for r in records:
        t = r.get("t")
        if not isinstance(t, (int, float)):
            continue
        if t_start < t < t_end:
            inside.append(r)
        elif t <= t_start:
            if (before is None or t >= before["t"]) and _has_all(r, keys):
                before = r
        elif (after is None or t < after["t"]) and _has_all(r, keys):
            after = r
    return ([before] if before else []) + inside + ([after] if after else [])


def _has_all(r: dict[str, Any], keys: Sequence[str]) -> bool:
    return all(isinstance(r.get(k), (int, float)) for k in keys)


def window_rate(records: Sequence[dict[str, Any]], keys: Sequence[str], t_start: float, t_end: float,
                times: Sequence[float] | None = None) -> float | None:
    """Per-second rate of the sum of counters ``keys`` between ``t_start`` and ``t_end`` (Unix s).

    The window is clipped to the records' span; None when fewer than two records
    have all keys or the clipped window covers less than :data:`MIN_COVERAGE` of
    the step.
    """
    if not t_end > t_start:
        return None
    pts = cumulative(_window_records(records, keys, t_start, t_end, times), keys)
    if len(pts) < 2:
        return None
    a, b = max(t_start, pts[0][0]), min(t_end, pts[-1][0])
    if b <= a or (b - a) < MIN_COVERAGE * (t_end - t_start):
        return None
    return (_at(pts, b) - _at(pts, a)) / (b - a)


# --------------------------------------------------------------------------- run.json parts


@dataclass(frozen=True)
class FlushCapability:
    """F for one target: ops/s (None when unknown), where it came from, the fsync test when measured."""

    ops_per_s: float | None
    source: str
    fsync_test: FsyncTestResult | None = None


def flush_capability(run: dict[str, Any], label: str) -> FlushCapability:
    """F of target ``label``: the user's ``--flush-capability`` first, else its device's fsync test."""
    user = (run.get("options") or {}).get("flush_capability")
    if isinstance(user, (int, float)) and user > 0:
        return FlushCapability(float(user), f"given by the user (--flush-capability {user:g})")
    tgt, entry = FlushCapabilityInfo.from_dict(run.get("flush_capability") or {}).of(label)
    dev = tgt.device
    if not dev:
        # The fsync test of the target's own host (--ssh) could not start: its probe says why, not the
        # run-wide test's "not on this machine".
        probe = (run.get("collectors") or {}).get(f"flush_capability--{label}") or {}
        if isinstance(probe, dict) and probe.get("ok") is False and probe.get("reason"):
            return FlushCapability(None, f"not measured: fsync test over ssh: {probe['reason']}")
        return FlushCapability(None, f"not measured: {tgt.error or 'no fsync test stored for this target'}")
    try:
        res = FsyncTestResult.from_dict(dict(entry.fsync_test)) if entry and entry.fsync_test else None
    except (KeyError, TypeError, ValueError):
        res = None
    if entry is None or entry.ops_per_s is None or entry.ops_per_s <= 0:
        return FlushCapability(None, f"the fsync test on {dev} gave no fdatasync rate", res)
    where = f" in {res.directory}" if res is not None else ""
    return FlushCapability(float(entry.ops_per_s), f"fsync test on {dev}{where}: {entry.method}", res)


def target_info(run: dict[str, Any], label: str) -> dict[str, Any]:
    """The run.json ``targets`` entry of ``label`` (empty dict when absent)."""
    for t in run.get("targets") or []:
        if isinstance(t, dict) and t.get("label") == label:
            return t
    return {}


def target_settings_verdict(info: dict[str, Any]) -> SettingsVerdict:
    """The settings verdict of a run.json target entry (its key settings and version)."""
    settings = {k: str(v) for k, v in (info.get("settings") or {}).items()}
    if info.get("version") and "version" not in settings:
        settings["version"] = str(info["version"])  # MariaDB rules depend on it
    return settings_verdict(_engine(str(info.get("engine") or "")), settings)


# --------------------------------------------------------------------------- per step


@dataclass(frozen=True)
class StepDurability:
    """Durability numbers and verdicts of one result step.

    Rates are per second over the step's measured window; ``*_per_commit`` divide
    by C. ``engine_flushes`` is the engine's own flush counter over the same
    window (``engine_source`` names it), shown beside S, never mixed into it.
    """

    target: str
    engine: str
    workload: str
    clients: int
    t_start: float
    t_end: float
    C: float | None
    C_source: str
    S: float | None
    S_source: str
    D: float | None
    D_source: str
    F: float | None
    F_source: str
    F_test: float | None
    engine_flushes: float | None
    engine_source: str
    syscalls: dict[str, float | None]
    local_block_device: bool
    write_cache: str | None
    settings: SettingsVerdict
    plausibility: PlausibilityVerdict | None
    notes: tuple[str, ...] = field(default=())

    @property
    def key(self) -> tuple[str, str, int]:
        """(target, workload, clients), as :attr:`reports.model.steps.Step.key`."""
        return (self.target, self.workload, self.clients)

    @property
    def S_per_commit(self) -> float | None:
        return self.S / self.C if self.S is not None and self.C else None

    @property
    def D_per_commit(self) -> float | None:
        return self.D / self.C if self.D is not None and self.C else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target, "engine": self.engine, "workload": self.workload, "clients": self.clients,
            "t_start": self.t_start, "t_end": self.t_end, "C": self.C, "C_source": self.C_source,
            "S": self.S, "S_source": self.S_source, "D": self.D, "D_source": self.D_source,
            "F": self.F, "F_source": self.F_source, "F_test": self.F_test, "engine_flushes": self.engine_flushes,
            "engine_source": self.engine_source, "syscalls": dict(self.syscalls),
            "S_per_commit": self.S_per_commit, "D_per_commit": self.D_per_commit,
            "local_block_device": self.local_block_device, "write_cache": self.write_cache,
            "settings": self.settings.to_dict(),
            "plausibility": self.plausibility.to_dict() if self.plausibility else None,
            "notes": list(self.notes),
        }


def commit_rate(row: ResultRow) -> tuple[float | None, str]:
    """C of a result row and how it was derived; None for read-only or unknown workloads."""
    w = row.workload
    # No workload of this dbdiag writes ``write_tps`` (kept in ``extra``); a row that has it says C itself.
    write_tps = row.extra.get("write_tps")
    if isinstance(write_tps, (int, float)):
        return float(write_tps), "write transactions/s measured by the driver"
    tps = row.tps
    if tps is None:
        return None, "the step has no transaction rate"
    share = WRITE_SHARE.get(w)
    if share is None:
        return None, f"workload {w!r} is not known to write at every commit"
    if share == 1.0:
        return float(tps), f"transactions/s ({w}: every transaction writes)"
    return float(tps) * share, f"transactions/s x {share:g} ({w}: share of write transactions)"


def _engine(name: str) -> Engine:
    """The engine of an engine or product name (result rows carry the product).

    PostgreSQL when the name is missing or unknown, as bundles have always been read.
    """
    try:
        return engine_for(name)
    except UsageError:
        return POSTGRES


def _series(b: Bundle, name: str, label: str) -> list[dict[str, Any]]:
    return b.series.get(safe_name(f"{name}--{label}"), [])


def remote_device_flushes(b: Bundle, label: str, info: dict[str, Any], t0: float, t1: float
                          ) -> tuple[float | None, str]:
    """D of a target whose host is read through node_exporter (``--host-metrics``), and where it came from.

    The same counter as /proc/diskstats locally (node_exporter's node_disk_flush_requests_total, in the
    target's ``host--<label>`` series as ``disk.<dev>.flushes``) of the disk the run found under the
    data directory from that host's filesystems (run.json ``storage.stat_devices``)."""
    storage = info.get("storage") or {}
    devs = [str(d) for d in storage.get("stat_devices") or []]
    where = f"node_exporter {info['host_metrics']}"
    if not devs:
        return None, f"not measured: {storage.get('reason') or storage.get('error') or 'data directory device unknown'}"
    recs = _series(b, "host", label)
    keys = [f"disk.{d}.flushes" for d in devs]
    if not any(isinstance(r.get(k), (int, float)) for r in recs for k in keys):
        return None, f"not measured: {where} gave no node_disk_flush_requests_total for {', '.join(devs)}"
    D = window_rate(recs, keys, t0, t1)
    # node_exporter stopped answering inside the step: D is the rate over the part its records cover (at
    # least MIN_COVERAGE of the step, else none), and says so; the part after the stop is not measured.
    st = source_stopped(b, safe_name(f"host--{label}"))
    cut = st is not None and (st.t is None or st.t < t1)
    stop = (f"{where} stopped answering at {st.text(b.run.get('started'))}" if st is not None and cut else "")
    if D is None:
        covered = max(0.0, min(t1, st.t) - t0) if st is not None and st.t is not None else 0.0
        return None, (f"not measured: {stop}; its records cover {covered:.1f} s of the step's {t1 - t0:.1f} s"
                      if stop else f"not measured: {where} records do not cover the step")
    src = f"{where}: node_disk_flush_requests_total of {', '.join(devs)} (all processes on that host)"
    if stop and st is not None and st.t is not None:
        src += f"; over the step's first {st.t - t0:.1f} s of {t1 - t0:.1f} s only: {stop}"
    return D, src


def _numeric_keys(records: Sequence[dict[str, Any]], prefix: str, suffix: str) -> list[str]:
    keys: set[str] = set()
    for r in records:
        keys.update(k for k, v in r.items() if k.startswith(prefix) and k.endswith(suffix)
                    and isinstance(v, (int, float)))
    return sorted(keys)


def engine_flush_rate(b: Bundle, label: str, engine: Engine, t0: float, t1: float) -> tuple[float | None, str]:
    """The engine's own WAL / redo flush counter over a window (flushes/s), and its name.

    The first of :attr:`Engine.log_flush_counters` that covers the window wins.
    """
    recs = _series(b, engine.stats_series, label)
    for key, name in engine.log_flush_counters:
        rate = window_rate(recs, [key], t0, t1)
        if rate is not None:
            return rate, name
    return None, ""


def step_durability(b: Bundle, row: ResultRow, one_client_S: float | None = None) -> StepDurability | None:
    """Numbers and verdicts of one result row; None when the row is not a write step with a window.

    ``one_client_S``: S of the same target's 1-client step, which raises a measured
    (never a user-given) F when higher (see the module docstring).
    """
    label = row.target
    t0, t1 = row.t_start, row.t_end
    if not label or t0 is None or t1 is None or t1 <= t0:
        return None
    C, C_src = commit_rate(row)
    if C is None:
        return None
    info = target_info(b.run, label)
    engine = _engine(str(info.get("engine") or row.engine))
    sv = target_settings_verdict(info)
    storage = info.get("storage") or {}
    # The WAL/redo is on a block device of the server's host: this machine's (/proc), or the host
    # its node_exporter describes (--host-metrics), whose device facts came from there.
    local = bool(info.get("local") or info.get("host_metrics")) and storage.get("name") is not None
    write_cache = storage.get("write_cache")
    notes: list[str] = []
    c = row.clients or 1

    flush = _series(b, "flush", label)
    syscalls = {k.split(".", 1)[1]: window_rate(flush, [k], t0, t1)
                for k in ("syscalls.fsync", "syscalls.fdatasync", "syscalls.sync_file_range")}
    fs_rate = window_rate(flush, [FS_KEY], t0, t1)
    sc_rate = window_rate(flush, list(SYSCALL_KEYS), t0, t1)
    S: float | None = None
    S_src = ""
    if fs_rate is not None or sc_rate is not None:
        if fs_rate is not None and (sc_rate is None or fs_rate >= sc_rate):
            S, S_src = fs_rate, "perf: filesystem file syncs (fsync, fdatasync, O_SYNC/O_DSYNC writes)"
        else:
            S, S_src = sc_rate, "perf: fsync + fdatasync system calls"
    if S is None:  # dbdiag run counts flush calls in the step's tail, after its measured part
        tail = tail_flush_rates(row, C, window_tps(b, row))
        if tail is not None:
            (fs_rate, sc_rate, syscalls), S, S_src = tail
    eng_rate, eng_src = engine_flush_rate(b, label, engine, t0, t1)
    if S is None and eng_rate is not None:
        S, S_src = eng_rate, f"engine counter {eng_src} (no flush tracing; counts only what the server reports)"
    # Flushes by O_SYNC/O_DSYNC writes: no fsync/fdatasync call shows them.
    setting, methods = engine.sync_method_setting, engine.osync_methods
    method = str((info.get("settings") or {}).get(setting, "")).lower()
    if S is not None and fs_rate is None and method in methods:
        notes.append(f"{setting}={method}: commits are flushed by O_SYNC/O_DSYNC writes, which "
                     f"{'the engine counter' if S_src.startswith('engine') else 'system-call counts'} do not "
                     "show, so S is not used.")
        S, S_src = None, "not counted: O_SYNC/O_DSYNC writes are not counted here"
    if S is None and not S_src:
        S_src = "not measured (no flush tracing and no engine flush counter)"

    if info.get("host_metrics"):
        D, D_src = remote_device_flushes(b, label, info, t0, t1)
    else:
        dev_keys = _numeric_keys(flush, "device.", ".flushes")
        D = window_rate(flush, dev_keys, t0, t1) if dev_keys else None
        D_src = (f"/proc/diskstats flush requests of {', '.join(k.split('.')[1] for k in dev_keys)} "
                 "(all processes on the machine)") if D is not None else "not measured"
    if D is not None:
        notes.append("D counts the whole device: flushes by other processes on the machine add to it.")

    fc = flush_capability(b.run, label)
    F, F_src = fc.ops_per_s, fc.source
    if fc.fsync_test is not None and one_client_S is not None and (F is None or one_client_S > F):
        F = one_client_S
        F_src = (f"{one_client_S:,.0f} flush calls/s completed by the server itself at 1 client, above the "
                 f"{'fsync test' if fc.ops_per_s is None else f'fsync test result of {fc.ops_per_s:,.0f}/s'} "
                 f"({fc.source})")
    pv = plausibility_verdict(C, c, F, S, D, local, sv.commit_waits_for_flush, write_cache=write_cache)
    return StepDurability(
        target=label, engine=engine.name, workload=row.workload, clients=c, t_start=float(t0),
        t_end=float(t1), C=C, C_source=C_src, S=S, S_source=S_src, D=D, D_source=D_src, F=F,
        F_source=F_src, F_test=fc.ops_per_s if fc.fsync_test is not None else None, engine_flushes=eng_rate,
        engine_source=eng_src, syscalls=syscalls,
        local_block_device=local, write_cache=write_cache, settings=sv, plausibility=pv, notes=tuple(notes))


def durability_rows(b: Bundle) -> list[StepDurability]:
    """Every write step of the bundle, in result order."""
    rows = b.rows
    first = [step_durability(b, row) for row in rows]
    one_client: dict[str, float] = {}
    for s in first:
        if s is not None and s.clients == 1 and s.S is not None and s.S_source.startswith("perf"):
            one_client[s.target] = max(one_client.get(s.target, 0.0), s.S)
    out = []
    for row, s in zip(rows, first):
        if s is None:
            continue
        if s.target in one_client:
            s = step_durability(b, row, one_client[s.target])
        if s is not None:
            out.append(s)
    return out


def overall(steps: Sequence[StepDurability]) -> tuple[int, str]:
    """Exit code and one line for a set of steps: 0 durable and plausible, 1 relaxed or implausible, 2 cannot tell."""
    if not steps:
        return 2, "no write step to judge"
    relaxed = [s for s in steps if s.settings.status == "relaxed"]
    if relaxed:
        return 1, "relaxed: " + relaxed[0].settings.reason
    bad = [s for s in steps if s.plausibility and s.plausibility.status == "implausible"]
    if bad:
        s = bad[0]
        return 1, f"implausible at {s.clients} client(s): {s.plausibility.reason}"  # type: ignore[union-attr]
    if any(s.settings.status != "durable" for s in steps):
        return 2, "cannot tell: " + next(s.settings.reason for s in steps if s.settings.status != "durable")
    if not any(s.plausibility and s.plausibility.status == "plausible" for s in steps):
        return 2, "cannot tell: no plausibility check could run (" + (
            steps[0].plausibility.reason if steps[0].plausibility else "no numbers") + ")"
    return 0, "durable and plausible"
