"""What a folded profile says: the self-time table, samples without a symbol, and how to get symbols.

Reads folded stacks only (see :mod:`collectors.profile.parse`); the symbol
hint also looks at the server binary on this host (its ELF section table, and
the Debian package owning it).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from collectors.profile.parse import CUT, KERNEL_SUFFIX, NO_STACK, UNKNOWN, first_line, split_dso
from diag.core.engines import ENGINES

DPKG_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class SymbolRow:
    """One line of the self-time table: ``samples`` with ``symbol`` as the leaf frame.

    ``percent`` is of ``kind``'s samples (``kind`` is "all" when not split by kind).
    """

    kind: str
    symbol: str
    samples: int
    percent: float


def _leaf_and_kind(stack: str) -> tuple[str, str]:
    parts = stack.split(";")
    return parts[0], parts[-1]


def top_symbols(folded: Mapping[str, int], by_kind: bool = True, n: int | None = 25) -> list[SymbolRow]:
    """Self samples per leaf frame, oprofile-style: the top ``n`` per kind (all with ``n=None``).

    Kinds come in order of their samples (most first), rows by samples then
    name. Within a kind, the untruncated percentages add up to 100.

    Reading it: ``cpu-clock`` samples are timer interrupts, held back while the
    kernel has interrupts off, so kernel leaves such as ``finish_task_switch``
    and ``_raw_spin_unlock_irqrestore`` stand for the context switch or
    network softirq work just before them (and per-task recording adds its own
    context-switch cost there, see :func:`collectors.profile.record.record_profile`).
    """
    per_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for stack, count in folded.items():
        kind, leaf = _leaf_and_kind(stack)
        per_kind[kind if by_kind else "all"][leaf] += count
    rows: list[SymbolRow] = []
    for kind, counts in sorted(per_kind.items(), key=lambda kv: (-sum(kv[1].values()), kv[0])):
        total = sum(counts.values())
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        for sym, count in ranked if n is None else ranked[:n]:
            rows.append(SymbolRow(kind, sym, count, 100.0 * count / total if total else 0.0))
    return rows


_ADDR = re.compile(r"^0x[0-9a-fA-F]+( \(.*\))?$")


def is_unresolved(frame: str) -> bool:
    """True for frames perf could not name: ``[unknown] (dso)`` or ``0x1234 (dso)``."""
    return frame.startswith(UNKNOWN) or bool(_ADDR.match(frame))


def unresolved_share(folded: Mapping[str, int]) -> float:
    """Share (0..1) of samples whose leaf frame has no symbol; 0.0 when there are no samples."""
    total = sum(folded.values())
    if not total:
        return 0.0
    bad = sum(c for s, c in folded.items() if is_unresolved(s.rsplit(";", 1)[-1]))
    return bad / total


MIN_USABLE_FRAMES = 5  # named user-space frames a stack needs to say which code path it is on


def usable_stack(stack: str, min_frames: int = MIN_USABLE_FRAMES) -> bool:
    """Whether a folded stack (``kind;comm;root;...;leaf``) has ``min_frames`` named user-space frames.

    Frame-pointer walks of a binary built without them stop after the leaf (one
    frame, or the leaf under ``[unknown]``): such a sample says where the CPU was,
    not on behalf of what. Kernel frames do not count: every system call has a few.
    """
    named = 0
    for f in stack.split(";")[2:]:
        if f.endswith(KERNEL_SUFFIX) or f in (CUT, NO_STACK) or is_unresolved(f):
            continue
        named += 1
        if named >= min_frames:
            return True
    return False


def usable_share(folded: Mapping[str, int], min_frames: int = MIN_USABLE_FRAMES) -> float:
    """Share (0..1) of samples whose stack is :func:`usable_stack`; 0.0 when there are no samples."""
    total = sum(folded.values())
    if not total:
        return 0.0
    return sum(c for s, c in folded.items() if usable_stack(s, min_frames)) / total


def unresolved_by_dso(folded: Mapping[str, int]) -> dict[str, int]:
    """Leaf samples without a symbol, per binary (the ``(dso)`` in the frame name)."""
    out: Counter[str] = Counter()
    for stack, count in folded.items():
        leaf = stack.rsplit(";", 1)[-1]
        if is_unresolved(leaf):
            _, dso = split_dso(leaf)
            out[dso or UNKNOWN] += count
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def elf_has_symtab(path: Path) -> bool | None:
    """Whether an ELF file keeps its full symbol table (``.symtab``): None if unreadable.

    Stripped binaries keep only ``.dynsym`` (exported functions), so static
    functions such as PostgreSQL's AllocSetAlloc show as [unknown].
    """
    try:
        with open(path, "rb") as f:
            ident = f.read(64)
            if len(ident) < 64 or ident[:4] != b"\x7fELF" or ident[4] != 2:
                return None  # only ELF64 here: the servers we profile are 64-bit
            order: Literal["little", "big"] = "little" if ident[5] == 1 else "big"
            shoff = int.from_bytes(ident[0x28:0x30], order)
            shentsize = int.from_bytes(ident[0x3A:0x3C], order)
            shnum = int.from_bytes(ident[0x3C:0x3E], order)
            shstrndx = int.from_bytes(ident[0x3E:0x40], order)
            if not shoff or not shnum or shstrndx >= shnum or shentsize < 64:
                return None
            f.seek(shoff)
            table = f.read(shentsize * shnum)
            hdrs = [table[i * shentsize:(i + 1) * shentsize] for i in range(shnum)]
            str_hdr = hdrs[shstrndx]
            f.seek(int.from_bytes(str_hdr[0x18:0x20], order))
            names = f.read(int.from_bytes(str_hdr[0x20:0x28], order))
    except OSError:
        return None
    for h in hdrs:
        off = int.from_bytes(h[0:4], order)
        end = names.find(b"\0", off)
        if names[off:end] == b".symtab":
            return True
    return False


def _dpkg_package(binary: Path) -> str | None:
    dpkg = shutil.which("dpkg")
    if dpkg is None:
        return None
    try:
        res = subprocess.run([dpkg, "-S", str(binary)], capture_output=True, text=True, timeout=DPKG_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = first_line(res.stdout)
    if res.returncode != 0 or ":" not in line:
        return None
    return line.split(":", 1)[0].split(",")[0].strip()


def _engine_symbols_hints(binary: Path) -> list[str]:
    # Substring match: Debian and the wheels name the file "postgres", others "postgres.bin"...
    return [e.symbols_hint for e in ENGINES
            if e.symbols_hint and any(p in binary.name for p in e.process_names)]


def symbol_hint(unresolved_share: float, binary_path: str | Path, *,
                package: str | None = None, threshold: float = 0.05) -> str:
    """One line on how to get symbols when over ``threshold`` of samples have none; "" otherwise.

    ``package``: the Debian package owning the binary; looked up with ``dpkg -S``
    when None (empty string: do not look up).
    """
    if unresolved_share < threshold:
        return ""
    binary = Path(binary_path)
    pct = f"{100 * unresolved_share:.0f}% of samples have no symbol"
    symtab = elf_has_symtab(binary)
    if symtab is True:
        return (f"{pct}, but {binary} has its symbol table: they are in other libraries, JIT code "
                "or frames perf could not walk (try perf record --call-graph dwarf)")
    pkg = _dpkg_package(binary) if package is None else package
    stripped = f"{binary} is stripped (no .symtab), so static functions do not resolve"
    if pkg:
        fix = (f"install {pkg}-dbgsym from the Debian debug archive (add the '<codename>-debug' "
               f"suite to apt sources, then apt-get install {pkg}-dbgsym)")
    else:
        fix = "install the debug-symbol package for it (Debian: <package>-dbgsym from the debug archive)"
    for extra in _engine_symbols_hints(binary):
        fix += f", or {extra}"
    return f"{pct}: {stripped}; {fix}"
