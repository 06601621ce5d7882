"""Profiles as in-process sources: perf of the server in the middle of each step, py-spy of the clients.

Both work from the step hooks (see :mod:`collectors.base`): ``step_started``
starts a thread that sleeps until ``profile_seconds`` centred on the step's
midpoint and records then (perf / py-spy run as child processes);
``step_finished`` joins it and returns what goes into that step's results.json
row (``profile`` / ``client_profile``). Options: ``profile_seconds`` (s).
"""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from collectors.base import Collector, CollectorContext, Probe
from collectors.host import process_tree
from collectors.profile.analyse import symbol_hint, unresolved_share
from collectors.profile.parse import save_folded
from collectors.profile.pyspy import py_spy_available, record_client_profile
from collectors.profile.record import probe_perf, record_profile
from diag.bundle import BundleWriter, safe_name
from diag.errors import DiagError

JOIN_SLACK_S = 30.0  # perf script on a few seconds of samples takes well under this here
MIN_WINDOW_S = 0.5
WINDOW_SHARE = 0.8  # of the step, at most: the window stays inside the measured part

StepKey = tuple[str, str, int]


def _key(info: Any) -> StepKey:
    return (info.target, info.workload, info.clients)


def _window(info: Any, seconds: float) -> tuple[float, float]:
    """(length, delay from now) of a recording window of at most ``seconds`` centred on the step."""
    window = min(seconds, max(MIN_WINDOW_S, info.duration_s * WINDOW_SHARE))
    return window, max(0.0, info.t_start + info.duration_s / 2 - window / 2 - time.time())


class _StepThreads(Collector):
    """One recording thread per step; subclasses implement :meth:`_record` and name the result key."""

    per_target = False
    sampled = False
    result_key = ""

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.seconds = float(ctx.options.get("profile_seconds", 3.0))
        self._threads: dict[StepKey, threading.Thread] = {}
        self._out: dict[StepKey, dict[str, Any]] = {}

    @property
    def bundle(self) -> BundleWriter:
        if self.ctx.bundle is None:
            raise DiagError(f"{self.name}: no run bundle to write into")
        return self.ctx.bundle

    def _spawn(self, info: Any, *args: Any) -> None:
        th = threading.Thread(target=self._guarded, args=(_key(info), info, *args), daemon=True)
        self._threads[_key(info)] = th
        th.start()

    def _guarded(self, key: StepKey, info: Any, *args: Any) -> None:
        # A full or failing disk under the bundle: the run's own writes fail and stop it with one line;
        # this thread only ends (an uncaught error here would print a traceback).
        with contextlib.suppress(OSError, DiagError):
            self._record(key, info, *args)

    def _record(self, key: StepKey, info: Any, *args: Any) -> None:
        raise NotImplementedError

    def sample(self) -> None:
        return None

    def step_finished(self, info: Any, result: dict[str, Any]) -> dict[str, Any] | None:
        th = self._threads.pop(_key(info), None)
        if th is None:
            return None
        th.join(self.seconds + JOIN_SLACK_S)
        out = self._out.pop(_key(info), None)
        return {self.result_key: out} if out else None


class ServerProfileSource(_StepThreads):
    """perf record of a local server's processes in the middle of each step; folded stacks to artifacts/."""

    name = "profile"
    title = "server profiles"
    result_key = "profile"

    def probe(self) -> Probe:
        ok, reason, hint = probe_perf()
        return Probe(ok, reason, hint)

    def step_started(self, info: Any) -> None:
        srv = self.ctx.server(info.target)
        if srv is None or not srv.pid or not srv.local:
            return
        self._spawn(info, srv.pid, srv.binary or "")

    def _record(self, key: StepKey, info: Any, *args: Any) -> None:
        pid, binary = args
        window, start_in = _window(info, self.seconds)
        time.sleep(start_in)
        pids = [p.pid for p in process_tree(pid)]
        t0 = time.time()
        label, workload, clients = key
        try:
            # perf.data is scratch: only the folded stacks go into the bundle.
            with tempfile.TemporaryDirectory(prefix="dbdiag-perf-") as tmp:
                rec = record_profile(pids, window, Path(tmp), scope="system")
        except DiagError as e:
            self._out[key] = {"error": str(e)}
            self.bundle.event("profile_failed", f"{label} {workload} c={clients}: {e}", target=label)
            return
        rel = f"artifacts/profile--{safe_name(label)}--{safe_name(workload)}--c{clients}.folded"
        save_folded(rec.folded, self.bundle.path / rel)
        share = unresolved_share(rec.folded) if rec.samples else 0.0
        hint = ""
        with contextlib.suppress(Exception):  # a hint is a nicety: never lose the profile over it
            hint = symbol_hint(share, binary, package="") if share else ""
        self._out[key] = {"folded": rel, "samples": rec.samples, "freq_hz": rec.freq_hz, "window": [t0, t0 + window],
                          "scope": rec.scope, "unresolved_share": share, "symbol_hint": hint,
                          "warnings": list(rec.warnings)}


class ClientProfileSource(_StepThreads):
    """py-spy of the driver's client processes during each step (``--profile-client``)."""

    name = "client_profile"
    title = "client profiles"
    result_key = "client_profile"

    def probe(self) -> Probe:
        if py_spy_available():
            return Probe(True)
        return Probe(False, "py-spy is not installed", "pip install py-spy")

    def step_started(self, info: Any) -> None:
        if info.client_pids:
            self._spawn(info)

    def _record(self, key: StepKey, info: Any, *args: Any) -> None:
        seconds, start_in = _window(info, self.seconds)
        rel = f"artifacts/client-profile--{safe_name(info.target)}--{safe_name(info.workload)}--c{info.clients}.folded"
        time.sleep(start_in)
        try:
            record_client_profile(list(info.client_pids), seconds, self.bundle.path / rel)
            self._out[key] = {"folded": rel}
        except DiagError as e:
            self._out[key] = {"error": str(e)}
