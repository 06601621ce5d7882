"""What a profile cannot name: the ``[unknown]`` share of samples, why it has no name and what would name it.

The reason comes from the recording's own symbol hint (collectors.profile.analyse.symbol_hint: whether the
server binary had a symbol table) and its unwinder; the remedies are general (a debug-symbol package, a
build-id lookup through debuginfod, DWARF unwinding) plus the engine's own ``symbols_hint``. Pure functions.
"""

from __future__ import annotations

from typing import Any

from diag.core.engines import ENGINES

# Below this share an unnamed slice changes no reading of the profile (it matches symbol_hint's threshold).
SHOWN_FROM = 0.05

STRIPPED = ("the server binary is stripped: only its exported symbols have names (Debian's mariadbd keeps "
            "about 30,000 of them), so its static functions show as [unknown]")
HAS_SYMTAB = ("the server binary keeps its symbol table, so the unnamed frames are elsewhere: in libraries "
              "without symbols, in JIT-compiled code (PostgreSQL's jit), or in stacks perf could not walk")
NOT_RECORDED = "the recording did not say why (no symbol hint was saved with it)"

DEBUG_PACKAGE = ("install the binary's debug-symbol package (Debian: <package>-dbgsym from the debug archive, "
                 "e.g. mariadb-server-core-dbgsym for mariadbd)")
BUILD_ID = ("or let perf fetch the symbols by build id: DEBUGINFOD_URLS=https://debuginfod.debian.net "
            "(perf buildid-list shows the id)")
DWARF = "for frames perf could not walk: record with --call-graph dwarf (the server built without frame pointers)"


def _engine_hint(target: dict[str, Any] | None) -> str:
    """The engine's own advice on getting a binary with symbols, if its target's engine has one."""
    engine = str((target or {}).get("engine") or "")
    for e in ENGINES:
        if e.knows(engine) and e.symbols_hint:
            return e.symbols_hint
    return ""


def unnamed_note(profile: dict[str, Any], target: dict[str, Any] | None) -> dict[str, Any] | None:
    """``{"share", "reason", "remedies"}`` for a profile whose unnamed share is at least :data:`SHOWN_FROM`."""
    share = float(profile.get("unresolved_share") or 0.0)
    if share < SHOWN_FROM:
        return None
    hint = str(profile.get("hint") or "")
    if "stripped" in hint:
        reason, remedies = STRIPPED, [DEBUG_PACKAGE, BUILD_ID]
    elif "symbol table" in hint:
        reason, remedies = HAS_SYMTAB, [DWARF, BUILD_ID]
    else:
        reason, remedies = NOT_RECORDED, [DEBUG_PACKAGE, BUILD_ID, DWARF]
    if profile.get("unwinder") != "dwarf" and DWARF not in remedies:
        remedies.append(DWARF)
    extra = _engine_hint(target)
    if extra:
        remedies.append(extra)
    return {"share": share, "reason": reason, "remedies": remedies}
