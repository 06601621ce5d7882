"""How a step can end before its time: the server gone, or ``--on-error abort``.

A client that loses its connection tries to reconnect (:mod:`workloads.steps.loop`);
when it cannot, it says so and the step asks :func:`server_gone` whether the
server still answers a new connection at all. Only then is the server taken as
lost: a client's own trouble (a terminated backend, a connection limit) is not.
The records here become the result row's ``server_lost`` / ``aborted`` fields.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from diag.core.db import connect, own_app_name
from diag.core.errors import DbError
from diag.core.targets import Target

PROBE_TIMEOUT_S = 3   # bounds the one connect that decides whether the server is gone
# DbError kinds of a server that is not there (refused, reset, timed out, starting up or shutting down).
GONE_KINDS = frozenset({"connect", "lost", "timeout"})


def server_gone(target: Target, timeout_s: int = PROBE_TIMEOUT_S) -> str | None:
    """Why ``target`` does not take a new connection (the error, one line), or None when it does.

    Errors of another kind (a wrong password, too many connections) mean a server is there."""
    try:
        conn = connect(target, timeout_s=timeout_s, application_name=own_app_name("probe"))
    except DbError as e:
        return str(e) if e.kind in GONE_KINDS else None
    with contextlib.suppress(Exception):
        conn.close()
    return None


@dataclass(frozen=True)
class StepCut:
    """What cut a step short: the first client's error and when (``t_ns``: ``perf_counter_ns``).

    ``probe``: why the server did not take a new connection (a lost server only)."""

    client: int
    code: str
    message: str
    t_ns: int
    probe: str = ""

    def earlier(self, t_ns: int) -> StepCut:
        """The same cut dated ``t_ns`` if that is earlier (another client lost its connection first)."""
        if 0 < t_ns < self.t_ns:
            return StepCut(self.client, self.code, self.message, t_ns, self.probe)
        return self

    def to_row(self, unix_s: float, measure_ns: int) -> dict[str, Any]:
        """The result row's record: ``t`` Unix s, ``after_s`` seconds into the measured part (negative:
        during the warmup), the client, its error code and message, and the probe's answer."""
        d: dict[str, Any] = {"t": unix_s, "after_s": round((self.t_ns - measure_ns) / 1e9, 3), "client": self.client,
                             "code": self.code, "message": self.message}
        if self.probe:
            d["probe"] = self.probe
        return d
