"""``perf script`` text -> samples -> folded stacks, and the folded files in the run bundle.

Pure text work: no /proc, no perf. A folded profile maps
``"kind;comm;root_frame;...;leaf_frame"`` to a sample count; frame names are
untrusted text from binaries on the host, made safe by :func:`clean`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from diag.core.errors import ParseError

KindOf = Callable[[int, str], str]
"""``kind_of(tid, comm) -> kind``. For single-threaded servers (PostgreSQL) the
tid is the pid; for threaded ones (mariadbd) it names the thread."""

PERF_SCRIPT_FIELDS = "comm,pid,tid,ip,sym,dso"
UNKNOWN = "[unknown]"
KERNEL_SUFFIX = "_[k]"  # the FlameGraph convention: marks kernel frames (kernel.kallsyms)
NO_STACK = "[no callchain]"
MAX_DEPTH = 64  # frames kept per stack (root side and the leaf): deeper stacks only make the graph tall
CUT = "[frames cut]"
_UNRESOLVED = re.compile(r"^(\[unknown\]|0x[0-9a-f]+)( \(.*\))?$")


@dataclass(frozen=True)
class Sample:
    """One perf sample: ``frames`` run root first, leaf (where the CPU was) last."""

    comm: str
    pid: int
    tid: int
    frames: tuple[str, ...]


_HEADER = re.compile(r"^\s*(?P<comm>.*?)\s+(?P<pid>-?\d+)/(?P<tid>-?\d+)\s*(?P<rest>.*)$")
_FRAME = re.compile(r"^\s+(?P<ip>[0-9a-fA-F]+)\s+(?P<rest>.*)$")
_SYMOFF = re.compile(r"\+0x[0-9a-fA-F]+$")


def first_line(text: str) -> str:
    """The first non-blank line of a tool's output, stripped ("" when there is none)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def parse_perf_script(text: str, *, addrs: bool = False) -> list[Sample]:
    """Parse ``perf script -F comm,pid,tid,ip,sym,dso`` output (with ``-g`` callchains).

    A sample is a header line ``comm pid/tid`` followed by one indented line per
    frame, ``ip sym (dso)``, leaf first, and a blank line. Frames perf could not
    name become ``[unknown] (dso)``, or ``0xIP (dso)`` with ``addrs`` (for later
    symbolisation with addr2line); kernel frames get the ``_[k]`` suffix.
    Raises :class:`ParseError` naming the line for text that is not perf script
    output.
    """
    samples: list[Sample] = []
    head: tuple[str, int, int] | None = None
    frames: list[str] = []

    def flush() -> None:
        if head is not None:
            comm, pid, tid = head
            samples.append(Sample(comm, pid, tid, tuple(reversed(frames)) or (NO_STACK,)))

    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            flush()
            head, frames = None, []
            continue
        if line.startswith("#"):
            continue
        # A frame line ends with "(dso)", never with "pid/tid": try it first.
        fm = _FRAME.match(line) if line.rstrip().endswith(")") else None
        if fm is not None:
            if head is None:
                raise ParseError(f"perf script line {lineno}: stack frame outside a sample: {line.strip()[:80]!r}")
            frames.append(_frame_name(fm["ip"], fm["rest"], addrs))
            continue
        hm = _HEADER.match(line)
        if hm is None:
            raise ParseError(f"perf script line {lineno}: not a sample header or frame: {line.strip()[:80]!r}")
        flush()
        frames = []
        head = (clean(hm["comm"]) or "?", int(hm["pid"]), int(hm["tid"]))
        rest = hm["rest"].strip()
        if rest:  # recorded without -g: the one ip sits on the header line
            fm = _FRAME.match(" " + rest)
            if fm is None:
                raise ParseError(f"perf script line {lineno}: unexpected fields after pid/tid: {rest[:80]!r}")
            frames.append(_frame_name(fm["ip"], fm["rest"], addrs))
    flush()
    return samples


def clean(name: str) -> str:
    """Make untrusted text safe inside a folded line (';' splits frames, newlines split stacks)."""
    return name.replace(";", ":").replace("\n", " ").replace("\r", " ").strip()


def split_dso(rest: str) -> tuple[str, str]:
    """"sym (dso)" -> (sym, dso); the dso is the last balanced (...) group."""
    rest = rest.rstrip()
    if not rest.endswith(")"):
        return rest, ""
    depth = 0
    for i in range(len(rest) - 1, -1, -1):
        if rest[i] == ")":
            depth += 1
        elif rest[i] == "(":
            depth -= 1
            if depth == 0:
                return rest[:i].rstrip(), rest[i + 1:-1]
    return rest, ""


def _strip_args(sym: str) -> str:
    # Demangled C++ may carry "(int, char*) const": drop the argument list, as
    # stackcollapse-perf does, but keep names that start with "(" ("(anonymous namespace)::f").
    s = sym[:-6] if sym.endswith(") const") else sym
    if s.endswith(")") and not s.startswith("("):
        head, _ = split_dso(s)
        if head and not head.endswith("operator"):  # "operator()" is a name, not an argument list
            return head
    return sym


def frame_name(ip: str, rest: str, addrs: bool = False) -> str:
    """One perf script frame (``ip``, then ``sym (dso)``) as a folded-stack frame name."""
    return _frame_name(ip, rest, addrs)


def _frame_name(ip: str, rest: str, addrs: bool) -> str:
    sym, dso = split_dso(rest)
    sym = _SYMOFF.sub("", sym.strip())
    short = dso.rsplit("/", 1)[-1] if dso.startswith("/") else dso
    if not sym or sym == UNKNOWN:
        where = f" ({clean(short)})" if short and short != UNKNOWN else ""
        return (f"0x{ip.lower().lstrip('0') or '0'}" if addrs else UNKNOWN) + where
    name = clean(_strip_args(sym))
    if dso.startswith("[kernel") or dso.startswith("[guest.kernel"):
        name += KERNEL_SUFFIX
    return name or UNKNOWN


def tidy_frames(frames: tuple[str, ...], max_depth: int = MAX_DEPTH) -> tuple[str, ...]:
    """Runs of frames without a symbol as one frame, and at most ``max_depth`` frames.

    A binary without frame pointers walked with ``-g`` gives a chain of a hundred
    ``[unknown]`` frames: one says the same and keeps the flame graph readable.
    Over ``max_depth``, the root side and the leaf stay, joined by ``[frames cut]``.
    """
    out: list[str] = []
    for f in frames:
        if out and _UNRESOLVED.match(f) and _UNRESOLVED.match(out[-1]):
            continue
        out.append(f)
    if len(out) > max_depth:
        out = [*out[: max_depth - 2], CUT, out[-1]]
    return tuple(out)


def fold_samples(samples: Iterable[Sample], kind_of: KindOf, max_depth: int = MAX_DEPTH) -> dict[str, int]:
    """Folded stacks ``"kind;comm;root;...;leaf" -> samples`` (keys sorted, for stable output).

    Frames go through :func:`tidy_frames` (unknown runs collapsed, depth capped at ``max_depth``).
    """
    counts: Counter[str] = Counter()
    kind_cache: dict[tuple[int, str], str] = {}
    for s in samples:
        key = (s.tid, s.comm)
        if key not in kind_cache:
            kind_cache[key] = clean(kind_of(s.tid, s.comm)) or "unknown"
        counts[";".join((kind_cache[key], s.comm, *tidy_frames(s.frames, max_depth)))] += 1
    return dict(sorted(counts.items()))


def fold(perf_script_text: str, kind_of: KindOf, *, addrs: bool = False) -> dict[str, int]:
    """Fold ``perf script`` text into ``"kind;comm;frame;...;leaf" -> samples``.

    ``kind_of(tid, comm)`` names the process role (tid == pid for PostgreSQL).
    Pure: no /proc, no perf. See :func:`parse_perf_script` for the frame names.
    """
    return fold_samples(parse_perf_script(perf_script_text, addrs=addrs), kind_of)


def save_folded(folded: Mapping[str, int], path: Path) -> None:
    """Write the classic folded format, one ``a;b;c 12`` line per stack, sorted."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for stack in sorted(folded):
            f.write(f"{stack} {int(folded[stack])}\n")
    tmp.replace(path)  # a reader never sees half a file


def load_folded(path: Path) -> dict[str, int]:
    """Read a folded file; a cut-off last line (crashed writer) is dropped, other bad lines raise ParseError."""
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    out: dict[str, int] = {}
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            if i == last:
                break
            raise ParseError(f"{path.name} line {i + 1}: not 'stack count': {line[:80]!r}")
        out[stack] = out.get(stack, 0) + int(count)
    return out
