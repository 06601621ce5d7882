"""client_server_disagree: a watched load command's own figure and the server's count differ beyond the
counting error (``dbdiag watch -- CMD``).

The tool says how many transactions/s it ran; the server counted its commits and rollbacks
(:mod:`workloads.watch.watch_counters`). They measure the same thing from the two ends, so a
gap beyond the counting error (:func:`reports.model.watch_view.client_vs_server`) means one of
them counts something else: the tool counts only some transaction types (HammerDB's NOPM),
its transactions span several database transactions (or none: read-only statements
outside a transaction block on a driver that batches them), or another load ran on the
watched database at the same time. Impact: a stated proxy (the gap's share, at most 0.5):
it says the figures cannot be read as one, not where the time goes.
"""

from __future__ import annotations

from diag.core.bundle import Bundle
from reports.model.steps import Finding, num
from reports.model.watch_view import client_vs_server

ADVICE = ("Read the server's figure as the database's view and the tool's as the client's. If another load shares "
          "the watched database, watch a database of its own; if the tool counts several statements or only some "
          "transaction types as its transaction, compare its per-statement counts with the Statements section.")


def client_server_disagree(b: Bundle) -> list[Finding]:
    out = []
    for c in client_vs_server(b):
        if not c.disagrees:
            continue
        out.append(Finding(
            category="client_server_disagree", severity="warning", target=c.target,
            title=f"{c.tool or 'The load command'} says {c.client_tps:.1f} transactions/s, the server counted "
                  f"{c.server_tps:.1f} ({100 * c.gap:+.0f}%, beyond the {100 * c.allowed:.0f}% counting error)",
            evidence={"client_tps": num(c.client_tps), "server_tps": num(c.server_tps),
                      "gap_pct": num(100 * c.gap), "allowed_pct": num(100 * c.allowed), "detail": c.detail},
            advice=ADVICE, impact=min(0.5, abs(c.gap))))
    return out
