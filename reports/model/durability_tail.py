"""S of a step whose flush calls were counted in its tail (``dbdiag run``: :mod:`collectors.flush_tail`).

Counting flush calls with perf slows the load it counts (BENCHMARKS.md: ~10% of MariaDB read-write), so a run
counts them after each step's measured part, the load running on, and the durability view
(:mod:`reports.model.durability_view`) carries the calls per commit counted there over to the measured part.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from diag.core.bundle import Bundle
from diag.core.schema import ResultRow, safe_name

SYSCALL_KEYS = ("syscalls.fsync", "syscalls.fdatasync")
FS_KEY = "fs.sync_file"

Rates = tuple[float | None, float | None, dict[str, float | None]]
# Of the flush window the tail's workload intervals must cover for their rate to be the window's.
MIN_COVER = 0.5
# A window that ran past the tail's end is cut to its perf intervals inside the tail; so much must be left (s).
MIN_CUT_S = 0.2
EDGE_S = 0.05  # clock slack between the step's and perf's times


@dataclass(frozen=True)
class Counted:
    """The flush calls counted in a step's tail: from ``t0`` to ``t1`` (Unix s), ``seconds`` by perf's clock,
    ``counts`` {record key: calls}; ``cut``: perf ran past the tail's end and only its intervals inside count."""

    t0: float
    t1: float
    seconds: float
    counts: Mapping[str, float]
    cut: bool = False


def counted(row: ResultRow) -> Counted | None:
    """The row's ``flush_tail`` as counted inside the tail (``profile_tail``'s end): on a busy machine perf can
    start late and count on into the clients' stop, whose commits are not the load's; its 100 ms intervals
    (``intervals``, written since the tail's counts were) let the part inside stand. None: nothing usable."""
    ft: Mapping[str, Any] = row.flush_tail or {}
    end = (row.profile_tail or {}).get("t_end")
    t0, t1, secs, counts = ft.get("t_start"), ft.get("t_end"), ft.get("seconds"), ft.get("counts")
    if not (isinstance(secs, (int, float)) and secs > 0 and isinstance(counts, dict)):
        return None
    if not (isinstance(t0, (int, float)) and isinstance(t1, (int, float)) and t1 > t0):
        return Counted(0.0, 0.0, float(secs), counts)  # times unknown: the count as it is
    if not isinstance(end, (int, float)) or t1 <= end + EDGE_S:
        return Counted(float(t0), float(t1), float(secs), counts)
    inside = [(t, c) for t, c in ft.get("intervals") or () if isinstance(t, (int, float)) and isinstance(c, dict)
              and t0 + t <= end]
    if not inside or inside[-1][0] < MIN_CUT_S:
        return None
    cut = {k: sum(float(c.get(k) or 0) for _, c in inside) for k in counts}
    return Counted(float(t0), float(t0) + inside[-1][0], inside[-1][0], cut, cut=True)


def window_tps(b: Bundle, row: ResultRow) -> float | None:
    """Transactions/s of the load while the tail's flushes were counted (:func:`counted`'s window), from the
    step's tail intervals in the workload series, each weighted by its overlap: the tail's other seconds run at
    another rate (perf record's start-up, DWARF recording: 0.65-0.86x). None when the count ran past the tail
    (into the clients' stop) without intervals inside it, and the whole tail's rate when the workload's
    intervals do not cover the window."""
    got = counted(row)
    tail: Mapping[str, Any] = row.profile_tail or {}
    if got is None or got.t1 <= got.t0:
        return None
    t0, t1 = got.t0, got.t1
    txn = covered = 0.0
    for r in b.series.get(safe_name(f"workload--{row.target}"), []):
        if not r.get("tail") or r.get("workload") != row.workload or r.get("clients") != row.clients:
            continue
        t, secs, n = r.get("t"), r.get("interval_s"), r.get("transactions")
        if not (isinstance(t, (int, float)) and isinstance(secs, (int, float)) and secs > 0
                and isinstance(n, (int, float))):
            continue
        overlap = min(t, t1) - max(t - secs, t0)
        if overlap > 0:
            txn += n * overlap / secs
            covered += overlap
    if covered >= MIN_COVER * (t1 - t0):
        return txn / covered
    tps = tail.get("tps")
    return float(tps) if isinstance(tps, (int, float)) else None


def tail_flush_rates(row: ResultRow, C: float, tail_tps: float | None) -> tuple[Rates, float, str] | None:
    """S over the measured window from the flush calls counted in the step's tail (the row's ``flush_tail``,
    :mod:`collectors.flush_tail`): calls per transaction there (``tail_tps``: the load's rate while they were
    counted, :func:`window_tps`), times the measured transaction rate. The rate itself is not carried over: the
    tail runs slower (perf, profiles). Exact for a load that flushes each commit by itself (one client); with
    group commit the flushes per commit fall as the commit rate rises, so S from a slower tail is an upper
    bound of the measured part's (said in the source). Returns ((file syncs/s, fsync + fdatasync/s, per-call
    rates), S, its source), each scaled alike; None without a usable tail count. ``C``: commits/s measured."""
    got = counted(row)
    if got is None or not (isinstance(tail_tps, (int, float)) and tail_tps > 0 and row.tps):
        return None
    counts, secs = got.counts, got.seconds
    scale = row.tps / tail_tps  # from the tail's transaction rate to the measured part's

    def rate(keys: tuple[str, ...]) -> float | None:
        vals = [counts.get(k) for k in keys]
        if any(not isinstance(v, (int, float)) for v in vals):
            return None
        return sum(vals) / secs * scale  # type: ignore[arg-type]

    fs, sc = rate((FS_KEY,)), rate(SYSCALL_KEYS)
    calls = {k.split(".", 1)[1]: rate((k,)) for k in ("syscalls.fsync", "syscalls.fdatasync",
                                                      "syscalls.sync_file_range")}
    if fs is None and sc is None:
        return None
    use_fs = fs is not None and (sc is None or fs >= sc)
    S = fs if use_fs else sc
    what = "filesystem file syncs" if use_fs else "fsync + fdatasync system calls"
    per = (S or 0.0) / C if C > 0 else 0.0
    slower = tail_tps < 0.95 * row.tps
    src = (f"perf: {what} counted for {secs:.1f} s in the step's tail, after the measured part, where counting "
           f"does not slow the figures{' (its part before the clients stopped)' if got.cut else ''}: {per:.2f} per "
           f"commit there (at {tail_tps:,.0f} tps), times the measured "
           "commit rate" + ("; with group commit an upper bound, the tail ran slower" if slower and row.clients
                            and row.clients > 1 else ""))
    return (fs, sc, calls), float(S or 0.0), src
