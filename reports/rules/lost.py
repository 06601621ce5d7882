"""server_lost: a target's server went away during a step; step_aborted: ``--on-error abort`` ended one;
statement_stuck: a statement that did not return ended one.

The workload driver writes ``server_lost`` into the cut step's result row (when,
seconds into the measured part, the client error, and why a new connection
failed); ``dbdiag run`` adds what it knows of the server itself to run.json's
target (``lost``: the throwaway server's exit status and last log lines) and a
``steps_skipped`` event for the steps it did not run. Nothing the run measured
after the loss is a measurement, so this finding is critical and ranks first;
the other rules leave such a step out (:func:`reports.model.steps.steps`).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from diag.core.bundle import Bundle
from diag.core.schema import ResultRow
from reports.model.steps import Finding, target_info

ADVICE = ("The step's figures cover only the {measured} s before the loss and this target's remaining steps did not "
          "run. The server's exit status and last log lines say why it went (an out-of-memory kill also shows in "
          "`dmesg`, a crash in the server log): fix that and run again.")


def _utc(t: Any) -> str | None:
    if not isinstance(t, (int, float)):
        return None
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _skipped(b: Bundle, label: str) -> list[str] | None:
    """The steps the run did not run on ``label`` after the loss (None: none recorded)."""
    for e in b.events:
        if e.get("kind") == "steps_skipped" and e.get("target") == label and isinstance(e.get("steps"), list):
            return [str(s) for s in e["steps"]]
    return None


def _cut_steps(b: Bundle, key: Callable[[ResultRow], Mapping[str, Any] | None]
               ) -> Iterator[tuple[ResultRow, Mapping[str, Any], str, str, int, str, str]]:
    """The result rows a ``key`` record (server_lost, aborted, stuck) cut short: (row, the record, target label,
    workload, clients, "workload, N clients", when in words: "1.2 s into" or "during the warmup of")."""
    for row in b.rows:
        cut = key(row)
        if cut is None:
            continue
        workload, clients = row.workload, row.clients or 1
        after = cut.get("after_s")
        when = f"{after:.1f} s into" if isinstance(after, (int, float)) and after >= 0 else "during the warmup of"
        yield (row, cut, row.target, workload, clients,
               f"{workload}, {clients} client{'s' if clients != 1 else ''}", when)


def server_lost(b: Bundle) -> list[Finding]:
    """One critical finding per step whose server went away: when, in which step, and the server's last words."""
    out: list[Finding] = []
    for row, cut, label, workload, clients, step, when in _cut_steps(b, lambda r: r.server_lost):
        after = cut.get("after_s")
        facts = target_info(b, label).get("lost") or {}
        code, message = cut.get("code") or "", cut.get("message") or ""
        ev: dict[str, Any] = {
            "step": step, "lost_at": _utc(cut.get("t")), "seconds_into_step": after,
            "measured_s": row.measured_s, "planned_s": b.info.planned_s,
            "client_error": f"{code}: {message}" if code else message or None,
            "new_connection": cut.get("probe") or None,
            "exit_status": facts.get("exit_status"), "server_log": facts.get("log_tail") or None,
            "steps_not_run": _skipped(b, label),
        }
        measured = row.measured_s
        out.append(Finding(
            category="server_lost", severity="critical", target=label,
            title=f"The server went away {when} {step}",
            evidence={k: v for k, v in ev.items() if v is not None},
            advice=ADVICE.format(measured=f"{measured:g}" if isinstance(measured, (int, float)) else "few"),
            impact=1.0, workload=workload, clients=clients))
    return out


ABORT_ADVICE = ("`--on-error abort` ended the step at this error, so its figures cover only the {measured} s before "
                "it and are not a measurement of the workload. Fix the cause (the statement, the schema, the "
                "server's limits), or run with `--on-error continue` to count such errors and go on.")


def step_aborted(b: Bundle) -> list[Finding]:
    """One critical finding per step ``--on-error abort`` ended: which client, when, the first error. Such a
    step is left out of every other rule (:func:`reports.model.steps.steps`), so this is what speaks for it."""
    out: list[Finding] = []
    for row, cut, label, workload, clients, step, when in _cut_steps(b, lambda r: r.aborted):
        after = cut.get("after_s")
        code, message = cut.get("code") or "", cut.get("message") or ""
        ev: dict[str, Any] = {"step": step, "aborted_at": _utc(cut.get("t")), "seconds_into_step": after,
                              "client": cut.get("client"), "first_error": f"{code}: {message}" if code else message,
                              "measured_s": row.measured_s, "planned_s": b.info.planned_s}
        measured = row.measured_s
        out.append(Finding(
            category="step_aborted", severity="critical", target=label,
            title=f"--on-error abort ended {step} {when} it: {code + ': ' if code else ''}{message}"[:300],
            evidence={k: v for k, v in ev.items() if v is not None},
            advice=ABORT_ADVICE.format(measured=f"{measured:g}" if isinstance(measured, (int, float)) else "few"),
            impact=1.0, workload=workload, clients=clients))
    return out


STUCK_ADVICE = ("A statement of this step did not return, and the server showed what it waited for: until that "
                "wait ends (a synchronous standby that answers, a lock released, ...) every transaction that "
                "needs it waits as long. The step was ended and its session closed; its figures are not a "
                "measurement of the workload. Fix what the wait names, or give --statement-timeout a bound "
                "that suits statements that are slow on purpose.")


def statement_stuck(b: Bundle) -> list[Finding]:
    """One critical finding per step a stuck statement ended: the wait the server showed, the statement."""
    out: list[Finding] = []
    for row, cut, label, workload, clients, step, _when in _cut_steps(b, lambda r: r.stuck):
        wait = "/".join(x for x in (cut.get("wait_type"), cut.get("wait")) if x) or None
        ev: dict[str, Any] = {"step": step, "found_at": _utc(cut.get("t")), "stuck_clients": cut.get("stuck_clients"),
                              "wait": wait, "state": cut.get("state") or None, "statement": cut.get("query") or None,
                              "statement_running_s": cut.get("seconds"), "measured_s": row.measured_s,
                              "steps_not_run": _skipped(b, label)}
        out.append(Finding(
            category="statement_stuck", severity="critical", target=label,
            title=f"A statement did not return in {step}: "
                  f"{'waiting for ' + wait if wait else cut.get('message') or 'no wait shown'}"[:300],
            evidence={k: v for k, v in ev.items() if v is not None}, advice=STUCK_ADVICE,
            impact=1.0, workload=workload, clients=clients))
    return out
