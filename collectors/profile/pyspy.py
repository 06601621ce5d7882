"""Python client processes sampled with the optional py-spy, folded like the server profiles.

The stacks are ``client;comm;frame;...`` so the flame graph and the self-time
table of :mod:`collectors.profile.analyse` read them as they read perf's.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from collectors.profile.parse import clean, first_line, save_folded
from collectors.profile.proctree import PROC, read_comm
from diag.core.errors import ParseError, ToolUnavailable, UsageError
from diag.core.procs import pdeathsig_preexec

PY_SPY_GRACE_S = 30.0  # py-spy start-up and writing its file after the window


def py_spy_available(py_spy: str = "py-spy") -> bool:
    """True when the optional ``py-spy`` (pip install py-spy) is on PATH."""
    return shutil.which(py_spy) is not None


@dataclass(frozen=True)
class ClientProfile:
    """Folded Python stacks of client processes: ``client;comm;frame...``; failures per pid."""

    folded: Mapping[str, int]
    samples: int
    path: Path
    failed: Mapping[int, str]


def parse_py_spy_raw(text: str, comm: str = "python", kind: str = "client") -> dict[str, int]:
    """py-spy ``--format raw`` lines (``f (file:line);g (file:line) N``) -> ``kind;comm;...`` folded."""
    out: Counter[str] = Counter()
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            raise ParseError(f"py-spy raw line {lineno}: not 'stack count': {line[:80]!r}")
        frames = [clean(f) for f in stack.split(";")]
        out[";".join([clean(kind), clean(comm) or "python", *frames])] += int(count)
    return dict(sorted(out.items()))


def record_client_profile(pids: list[int], seconds: float, out_path: Path, *,
                          rate_hz: int = 100, py_spy: str = "py-spy",
                          proc_root: Path = PROC) -> ClientProfile:
    """Sample Python client processes with py-spy for ``seconds``; write folded stacks to ``out_path``.

    Runs one ``py-spy record --format raw --nonblocking`` per pid in parallel
    (``--nonblocking``: never pause the client, so the load is not disturbed).
    Needs the optional py-spy and ptrace rights (root or the same user with
    ``kernel.yama.ptrace_scope`` 0). A client that exits or refuses is listed
    in ``failed``; py-spy missing raises :class:`ToolUnavailable`.
    """
    exe = shutil.which(py_spy)
    if exe is None:
        raise ToolUnavailable("profile: py-spy not found; pip install py-spy (optional, for client profiles)")
    if not pids or seconds <= 0:
        raise UsageError("profile: record_client_profile needs pids and seconds > 0")
    duration = max(1, round(seconds))  # py-spy takes whole seconds
    folded: Counter[str] = Counter()
    failed: dict[int, str] = {}
    with tempfile.TemporaryDirectory(prefix="dbdiag-pyspy-") as tmp:
        procs: list[tuple[int, Path, subprocess.Popen[bytes], Path]] = []
        for pid in sorted(set(pids)):
            raw, log = Path(tmp) / f"{pid}.txt", Path(tmp) / f"{pid}.log"
            with open(log, "wb") as logf:
                argv = [exe, "record", "--format", "raw", "--pid", str(pid), "--duration",
                        str(duration), "--rate", str(rate_hz), "--nonblocking", "-o", str(raw)]
                # Dies with this thread, which waits for it below.
                procs.append((pid, raw, subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf,
                                                         stderr=logf, preexec_fn=pdeathsig_preexec()), log))
        for pid, raw, proc, log in procs:
            try:
                rc = proc.wait(timeout=duration + PY_SPY_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
                failed[pid] = "py-spy did not finish"
                continue
            if rc != 0 or not raw.exists():
                failed[pid] = first_line(log.read_text(encoding="utf-8", errors="replace")) or f"exit {rc}"
                continue
            comm = read_comm(pid, proc_root) or "python"
            folded.update(parse_py_spy_raw(raw.read_text(encoding="utf-8", errors="replace"), comm))
    result = dict(sorted(folded.items()))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    save_folded(result, out_path)
    return ClientProfile(result, sum(result.values()), out_path, failed)
