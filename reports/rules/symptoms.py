"""The wait and CPU findings, stated against the step's limit (reports.model.limits), never as a competing limit.

The detectors in :mod:`reports.rules.waits` and :mod:`reports.rules.cpu` find a class of wait that takes a
good share of the samples inside transactions, or a busy server CPU. Said alone, such a share reads as the
cause ("commits wait for the WAL flush: 82.8% of backend time") even where the host's CPUs were the
saturated resource and the commit waits were queueing behind them (issue 12, seed 004). Here each of them
is re-stated from the step's time accounting and limit:

* its impact and headline number are its share of the transaction's time (reports.model.accounting), so it ranks
  with the limit on the same scale; the in-transaction share stays in the evidence under its old key;
* a wait for the limit's own resource is the limit's detail (its engine counters and advice): a warning,
  ranked just below the limit (the same impact, and findings.derive_findings puts the limit first);
* a wait for anything else is a symptom: info, "queueing behind the limit" when the limit is a saturated
  resource, "not the limit" when nothing is saturated (a part of a serial chain);
* cpu_bound is said by the limit itself where the limit is the CPU (the limit's evidence has the top
  symbols and the system CPU share): it stays only beside another limit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from diag.core.bundle import Bundle
from reports.model.accounting import Limit, StepAccounting
from reports.rules import blocking, cpu, waits
from reports.model.steps import Finding, Step, num, pct
from reports.rules.limit import key_of, step_limits

# The words for a limit in another finding's title.
_LIMIT_WORDS = {"host_cpu": "the host's CPUs", "neighbours": "other processes on the host", "server_cpu": "the server's CPU", "client_cpu": "the clients' CPU",
                "round_trips": "the round trips", "commit_flush": "the log flush", "lock": "a lock holder",
                "latch": "a latch", "io": "data reads", "unobserved": "not observed",
                "connect": "opening connections"}
_CPU_KINDS = frozenset({"host_cpu", "server_cpu", "neighbours"})

Phrase = Callable[[Step, StepAccounting], str]


def _top(acc: StepAccounting, key: str) -> str:
    c = acc.get(key)
    return next(iter(c.detail), "") if c is not None else ""


def _restate(b: Bundle, raw: list[Finding], key: str, kind: str, phrase: Phrase) -> list[Finding]:
    """Each raw wait finding re-stated from its step's accounting share of ``key`` and its limit."""
    limits = step_limits(b)
    out = []
    for f in raw:
        k = key_of(f)
        got = limits.get(k) if k is not None else None
        if got is None:  # a step that cannot be accounted keeps the detector's words
            out.append(f)
            continue
        step, acc, lim = got
        share = acc.share(key)
        ev: dict[str, Any] = {**f.evidence, "share_of_txn_pct": num(100 * share), "us_per_txn": num(acc.us(key)),
                              "shares_note": "the title's share is of the whole transaction time (the time "
                                             "between statements included); the *_pct of the waits are of "
                                             "the samples inside a transaction", "limit": lim.title}
        if lim.kind == kind:
            role, severity = "the step's limit", f.severity
        elif lim.saturated:
            role, severity = f"queueing behind the limit ({_LIMIT_WORDS[lim.kind]})", "info"
        elif lim.unobserved:  # no host evidence: that nothing is saturated was not observed
            role, severity = (f"not the limit named (that is {_LIMIT_WORDS[lim.kind]}; saturation not observed: "
                              f"no {' and no '.join(m.split(' (')[0] for m in lim.unobserved)} evidence)"), "info"
        else:
            role, severity = f"not the limit (that is {_LIMIT_WORDS[lim.kind]}; nothing is saturated)", "info"
        ev["role"] = role
        out.append(replace(f, severity=severity, title=f"{phrase(step, acc)}: {pct(share)} of transaction time, "
                           f"{role}", evidence=ev, impact=round(max(0.0, min(1.0, share)), 4),
                           extra={**f.extra, "share_of_txn": share, "limit_kind": lim.kind}))
    return out


def commit_flush_bound(b: Bundle) -> list[Finding]:
    """:func:`reports.rules.waits.commit_flush_bound` against the step's limit."""
    return _restate(b, waits.commit_flush_bound(b), "wait:commit_flush", "commit_flush",
                    lambda s, a: f"Commits wait for the {s.engine.log_name} flush")


def lock_contention(b: Bundle) -> list[Finding]:
    """:func:`reports.rules.waits.lock_contention` against the step's limit."""
    return _restate(b, waits.lock_contention(b), "wait:lock", "lock",
                    lambda s, a: f"Lock waits ({_top(a, 'wait:lock')}){blocking.title_part(b, s)}")


def latch_contention(b: Bundle) -> list[Finding]:
    """:func:`reports.rules.waits.latch_contention` against the step's limit."""
    return _restate(b, waits.latch_contention(b), "wait:latch", "latch",
                    lambda s, a: f"Latch waits ({_top(a, 'wait:latch')})")


def io_read_bound(b: Bundle) -> list[Finding]:
    """:func:`reports.rules.waits.io_read_bound` against the step's limit."""
    return _restate(b, waits.io_read_bound(b), "wait:data_io", "io", lambda s, a: "Reads from disk")


def cpu_bound(b: Bundle) -> list[Finding]:
    """:func:`reports.rules.cpu.cpu_bound` only where the step's limit is not the CPU (there the limit says it)."""
    limits = step_limits(b)
    out = []
    for f in cpu.cpu_bound(b):
        k = key_of(f)
        got = limits.get(k) if k is not None else None
        lim: Limit | None = got[2] if got is not None else None
        if lim is not None and lim.kind in _CPU_KINDS:
            continue
        if lim is not None:
            f = replace(f, title=f"{f.title} (not the step's limit: that is {_LIMIT_WORDS[lim.kind]})",
                        evidence={**f.evidence, "limit": lim.title})
        out.append(f)
    return out


def host_contention(b: Bundle) -> list[Finding]:
    """:func:`reports.rules.cpu.host_contention`, except on a step whose limit already names the neighbours (the
    same processes, said once: the limit carries their CPU and the advice)."""
    limits = step_limits(b)
    out = []
    for f in cpu.host_contention(b):
        k = key_of(f)
        got = limits.get(k) if k is not None else None
        if got is None or got[2].kind != "neighbours":
            out.append(f)
    return out
