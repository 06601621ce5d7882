"""The off-CPU part of a step's profile: where the server's threads blocked, per transaction, beside its waits.

Reads the step row's ``profile.offcpu`` summary and its folded file (µs off CPU per stack, see
:mod:`collectors.profile.offcpu`), and the step's sampled wait events (:func:`reports.views.sections.step_waits`
is passed in): the kernel path that blocked next to what the server said it waited for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collectors.profile.offcpu import per_transaction, top_paths
from collectors.profile.parse import load_folded
from diag.core.bundle import Bundle
from diag.core.schema import ResultRow
from reports.views.flamegraph import INLINE_MIN_FRACTION, flamegraph_svg
from reports.views.flamegraph_page import write_page
from reports.model.observer import profiled_tps

TOP_CALLS = 8
TOP_WAITS = 6
FLAME_W = 760  # px, beside the tables (as the on-CPU graph)


def _transactions(row: ResultRow, seconds: float) -> float:
    """Transactions the step committed during a profile window of ``seconds`` (the rate while it recorded,
    :func:`reports.model.observer.profiled_tps`, times the window)."""
    tps = profiled_tps(row)
    return tps * seconds if tps is not None else 0.0


def _call_rows(off: dict[str, Any], total: int, tx: float) -> list[dict[str, Any]]:
    """The largest (thread kind, blocking call) pairs, with µs per transaction of the step."""
    by_kind_call = off.get("by_kind_call") or {"all": off.get("by_syscall") or {}}
    pairs = sorted(((int(us), kind, call) for kind, calls in by_kind_call.items() for call, us in calls.items()),
                   key=lambda p: (-p[0], p[1], p[2]))[:TOP_CALLS]
    per_tx = per_transaction({f"{k}\0{c}": us for us, k, c in pairs}, tx)
    return [{"kind": k, "call": c, "us": us, "share": us / total if total else 0.0,
             "us_per_tx": per_tx.get(f"{k}\0{c}")} for us, k, c in pairs]


def joined(rows: list[dict[str, Any]], waits: list[dict[str, Any]]) -> str:
    """One sentence putting the server's sampled waits beside where its busiest thread kind blocked.

    Side by side, not mapped: the wait names are the engine's, the calls the kernel's; a reader sees
    e.g. WalSync next to fdatasync. "" when either side is missing.
    """
    shown = [w for w in waits if w.get("state") != "CPU"][:3]
    if not rows or not shown:
        return ""
    kind = rows[0]["kind"]
    calls = [r for r in rows if r["kind"] == kind and r["call"] != "preempted"][:3]
    sampled = ", ".join(f"{w['state']} {100 * w['share']:.0f}%" for w in shown)
    blocked = ", ".join(f"{r['call']} ({_amount(r)})" for r in calls)
    return f"The server's wait sampling saw {sampled}; its {kind} threads were off CPU in {blocked}."


def _amount(r: dict[str, Any]) -> str:
    return f"{r['us_per_tx']:.0f} µs/tx" if r.get("us_per_tx") is not None else f"{r['us'] / 1000:.1f} ms"


def step_offcpu(b: Bundle, row: ResultRow, waits: dict[str, Any] | None,
                with_flame: bool = True) -> dict[str, Any] | None:
    """Off-CPU summary, per-transaction table, flame graph and the step's top waits; None when not recorded."""
    off = (row.profile or {}).get("offcpu") or {}
    if not off:
        return None
    if off.get("error") or not off.get("folded"):
        return {"error": off.get("error") or "no off-CPU stacks"}
    path = Path(b.path) / off["folded"]
    if not path.exists():
        return {"error": f"{off['folded']} is missing from the bundle"}
    folded = load_folded(path)
    seconds = float(off.get("seconds") or 0.0) or 1.0
    tx = _transactions(row, seconds)
    total = int(off.get("total_us") or sum(folded.values()))
    rows = _call_rows(off, total, tx)
    flame = interactive = ""
    if with_flame and folded:
        title = f"off-CPU {row.target} {row.workload} {row.clients} clients"
        flame = flamegraph_svg(folded, title=title, width=FLAME_W, unit="µs off CPU",
                               min_fraction=INLINE_MIN_FRACTION)
        interactive = write_page(Path(b.path), off["folded"], folded, title, unit="µs off CPU")
    return {"file": off["folded"], "seconds": seconds, "total_us": total, "threads": off.get("threads"),
            "threads_seen": off.get("threads_seen") or off.get("threads"),
            "runqueue_us": int(off.get("runqueue_us") or 0), "open_us": int(off.get("open_us") or 0),
            "switches": off.get("switches"), "by_state": off.get("by_state") or {}, "calls": rows,
            "transactions": tx, "paths": top_paths(folded, 5), "flame": flame, "interactive": interactive,
            "waits": (waits or {}).get("rows", [])[:TOP_WAITS],
            "joined": joined(rows, (waits or {}).get("rows", []))}
