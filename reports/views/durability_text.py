"""``dbdiag durability`` as text: settings, F, a table per step, each check with its formula.

Reads what :mod:`reports.model.durability_view` made of the probe's bundle (run.json
and the per-step rows); prints nothing itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _n(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def format_durability(run: dict[str, Any], steps: Sequence[Any], code: int, line: str) -> str:
    """The durability verdicts as text: settings, F, a table per step, each check with its formula."""
    info = (run.get("targets") or [{}])[0]
    storage = info.get("storage") or {}
    lines: list[str] = []
    where = ""
    if info.get("data_directory"):
        dev = (f"{storage.get('fs_type') or '?'} on {storage['name']}" if storage.get("name")
               else f"{storage.get('fs_type') or '?'}, no block device")
        where = f", data directory {info['data_directory']} ({dev}; write cache: {storage.get('write_cache') or '?'})"
    version = str(info.get("version", "")).split(" on ")[0].split(",")[0]
    product = version if str(info.get("product", "")).lower() in version.lower() else \
        f"{info.get('product', '')} {version}".strip()
    lines.append(f"{info.get('label', '?')}: {product}{where}")
    lines.append("")
    if not steps:
        lines.append(f"Verdict: {line} (exit {code})")
        return "\n".join(lines) + "\n"
    sv = steps[0].settings
    lines.append(f"Settings: {sv.status.upper()}. {sv.reason}")
    shown = ", ".join(f"{k}={v}" for k, v in sorted((info.get("settings") or {}).items()))
    if shown:
        lines.append(f"  read: {shown}")
    for r in sv.relaxed:
        lines.append(f"  - {r.setting}={r.value}: {r.risk}")
    for r in sv.notes:
        lines.append(f"  note {r.setting}={r.value}: {r.risk}")
    s0 = steps[0]
    lines.append("")
    lines.append(f"F (flush capability): {_n(s0.F)} flushes/s - {s0.F_source}")
    lines.append(f"C: {s0.C_source}")
    lines.append(f"S: {s0.S_source}")
    lines.append(f"D: {s0.D_source}")
    lines.append("")
    lines.append(f"{'clients':>7} {'C/s':>10} {'S/s':>10} {'S/commit':>9} {'D/s':>10} {'D/commit':>9} "
                 f"{'engine/s':>10}  plausibility")
    for s in steps:
        pv = s.plausibility
        lines.append(f"{s.clients:>7} {_n(s.C):>10} {_n(s.S):>10} {_n(s.S_per_commit, 2):>9} {_n(s.D):>10} "
                     f"{_n(s.D_per_commit, 2):>9} {_n(s.engine_flushes):>10}  {pv.status if pv else '-'}")
    if s0.engine_source:
        lines.append(f"  engine/s: {s0.engine_source} (the server's own count, shown for comparison)")
    for s in steps:
        if any(v is not None for v in s.syscalls.values()):
            lines.append(f"  system calls/s at {s.clients} client{'s' if s.clients > 1 else ''}: "
                         + ", ".join(f"{k} {_n(v)}" for k, v in s.syscalls.items()))
    for s in steps:
        pv = s.plausibility
        if pv is None:
            continue
        lines.append("")
        lines.append(f"{s.clients} client{'s' if s.clients > 1 else ''}: {pv.status}: {pv.reason}")
        for ch in pv.checks:
            mark = {"passed": "ok  ", "failed": "FAIL", "not_checked": "skip"}.get(ch.status, ch.status)
            lines.append(f"  [{mark}] {ch.name}: {ch.formula}" + (f" ({ch.reason})" if ch.status != "passed"
                                                                    else ""))
    notes = sorted({n for s in steps for n in s.notes})
    if notes:
        lines.append("")
        lines.extend(f"* {n}" for n in notes)
    lines.append("")
    lines.append(f"Verdict: {line} (exit {code})")
    return "\n".join(lines) + "\n"
