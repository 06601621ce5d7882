"""Step plugins: things that happen inside each measured step (perf profile window, client py-spy).

Each plugin has ``step_started(info, rt)`` and ``step_finished(info, result, rt) -> dict | None``;
what ``step_finished`` returns is merged into that step's results.json row.
Profiles are recorded in a thread (perf runs as a child process) during the
middle of the step: ``--profile-seconds`` centred on the step's midpoint.
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from collectors.host import process_tree
from collectors.profile.analyse import symbol_hint, unresolved_share
from collectors.profile.parse import save_folded
from collectors.profile.pyspy import py_spy_available, record_client_profile
from collectors.profile.record import probe_perf, record_profile
from diag.bundle import safe_name
from diag.errors import DiagError

JOIN_SLACK_S = 30.0  # perf script on a few seconds of samples takes well under this here


class ProfilePlugin:
    """perf record of the server's processes in the middle of each step; folded stacks to artifacts/."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.seconds = float(run.opts.profile_seconds)
        self._threads: dict[tuple[str, str, int], threading.Thread] = {}
        self._out: dict[tuple[str, str, int], dict[str, Any]] = {}
        ok, reason, hint = probe_perf()
        self.ok = ok
        self.reason = reason
        run._record_probes({"profile": _ProbeLike(ok, reason, hint)})
        if not ok:
            run.say(f"dbdiag: note: profiles not recorded: {reason}" + (f" ({hint})" if hint else ""))

    def step_started(self, info: Any, rt: Any) -> None:
        if not self.ok or not rt.pid or not rt.target.is_local():
            return
        key = (info.target, info.workload, info.clients)
        window = min(self.seconds, max(0.5, info.duration_s * 0.8))
        start_in = max(0.0, info.t_start + info.duration_s / 2 - window / 2 - time.time())
        th = threading.Thread(target=self._record, args=(key, rt, window, start_in), daemon=True)
        self._threads[key] = th
        th.start()

    def _record(self, key: tuple[str, str, int], rt: Any, window: float, start_in: float) -> None:
        time.sleep(start_in)
        pids = [p.pid for p in process_tree(rt.pid)]
        t0 = time.time()
        label, workload, clients = key
        try:
            # perf.data is scratch: only the folded stacks go into the bundle.
            with tempfile.TemporaryDirectory(prefix="dbdiag-perf-") as tmp:
                rec = record_profile(pids, window, Path(tmp), scope="system")
        except DiagError as e:
            self._out[key] = {"error": str(e)}
            self.run.bundle.event("profile_failed", f"{label} {workload} c={clients}: {e}", target=label)
            return
        rel = f"artifacts/profile--{safe_name(label)}--{safe_name(workload)}--c{clients}.folded"
        save_folded(rec.folded, self.run.bundle.path / rel)
        share = unresolved_share(rec.folded) if rec.samples else 0.0
        hint = ""
        with contextlib.suppress(Exception):
            hint = symbol_hint(share, rt.info.get("server_binary") or "", package="") if share else ""
        self._out[key] = {"folded": rel, "samples": rec.samples, "freq_hz": rec.freq_hz, "window": [t0, t0 + window],
                          "scope": rec.scope, "unresolved_share": share, "symbol_hint": hint,
                          "warnings": list(rec.warnings)}

    def step_finished(self, info: Any, result: dict[str, Any], rt: Any) -> dict[str, Any] | None:
        key = (info.target, info.workload, info.clients)
        th = self._threads.pop(key, None)
        if th is None:
            return None
        th.join(self.seconds + JOIN_SLACK_S)
        out = self._out.pop(key, None)
        return {"profile": out} if out else None


class ClientProfilePlugin:
    """py-spy of the driver's client processes during each step (``--profile-client``)."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.ok = py_spy_available()
        self._threads: dict[tuple[str, str, int], threading.Thread] = {}
        self._out: dict[tuple[str, str, int], dict[str, Any]] = {}
        if not self.ok:
            run.say("dbdiag: note: client profiles not recorded: py-spy is not installed (pip install py-spy)")

    def step_started(self, info: Any, rt: Any) -> None:
        if not self.ok or not info.client_pids:
            return
        key = (info.target, info.workload, info.clients)
        seconds = min(self.run.opts.profile_seconds, max(0.5, info.duration_s * 0.8))
        rel = f"artifacts/client-profile--{safe_name(info.target)}--{safe_name(info.workload)}--c{info.clients}.folded"

        def work() -> None:
            time.sleep(max(0.0, info.t_start + info.duration_s / 2 - seconds / 2 - time.time()))
            try:
                record_client_profile(list(info.client_pids), seconds, self.run.bundle.path / rel)
                self._out[key] = {"folded": rel}
            except DiagError as e:
                self._out[key] = {"error": str(e)}

        th = threading.Thread(target=work, daemon=True)
        self._threads[key] = th
        th.start()

    def step_finished(self, info: Any, result: dict[str, Any], rt: Any) -> dict[str, Any] | None:
        key = (info.target, info.workload, info.clients)
        th = self._threads.pop(key, None)
        if th is None:
            return None
        th.join(self.run.opts.profile_seconds + JOIN_SLACK_S)
        out = self._out.pop(key, None)
        return {"client_profile": out} if out else None


class _ProbeLike:
    def __init__(self, ok: bool, reason: str, hint: str) -> None:
        self.ok, self.reason, self.hint = ok, reason, hint

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "reason": self.reason, "hint": self.hint, "missing": []}


def make_step_plugins(run: Any) -> list[Any]:
    """The plugins this run asked for."""
    plugins: list[Any] = []
    if run.opts.profile:
        plugins.append(ProfilePlugin(run))
    if run.opts.profile_client:
        plugins.append(ClientProfilePlugin(run))
    return plugins


def folded_path(bundle_path: Path, rel: str) -> Path:
    """Absolute path of a folded-stacks artifact named in a result row."""
    return Path(bundle_path) / rel
