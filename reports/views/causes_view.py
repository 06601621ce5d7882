"""Per target: which of the causes dbdiag names (README "Causes it names") could be checked, and for each one
that could not, why and what would show it (the report's "Causes checked" section, causes.html.j2).

From the bundle alone: run.json's collectors (each source's probe: ok, reason, hint, missing parts), its
targets (engine, version, local) and which series exist. A cause is checked when every source it needs ran for
the target; a source it only uses to say more (the statement behind a spill) is a note. A cause is not checked
when a source it needs did not run (``--no-collect``, a probe that failed for want of a privilege or a
setting): the probe's reason is why, its hint (or the source's usual remedy) what would show it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diag.core.bundle import Bundle, safe_name
from diag.core.engines import Engine
from reports.model.steps import engine_of

__all__ = ["CauseCheck", "TargetCauses", "causes_checked"]


@dataclass(frozen=True)
class CauseCheck:
    """One cause for one target: ``checked``, the sources read, and when not checked why and what would show
    it; ``note``: what a missing optional source leaves unsaid ("" when nothing)."""

    cause: str
    findings: str
    checked: bool
    sources: str
    why: str = ""
    shows_it: str = ""
    note: str = ""


@dataclass(frozen=True)
class TargetCauses:
    label: str
    checks: tuple[CauseCheck, ...]

    @property
    def unchecked(self) -> int:
        return sum(not c.checked for c in self.checks)


# What each source reads, in words, by collector name.
_WORDS: dict[str, str] = {
    "host": "host CPU and process CPU (/proc or node_exporter)",
    "pg_waits": "wait sampling of pg_stat_activity",
    "my_waits": "processlist thread states or performance_schema waits",
    "pg_stats": "pg_stat_database, WAL and checkpointer counters",
    "my_status": "SHOW GLOBAL STATUS and InnoDB status",
    "pg_tables": "pg_stat_user_tables at each step's start and end",
    "pg_blocking": "pg_blocking_pids and pg_locks",
    "my_blocking": "metadata locks and InnoDB lock waits",
    "oldest_xact": "the oldest other transaction and the cleanup backlog",
    "statements": "statement digests",
    "pg_settings": "server settings",
    "my_settings": "server settings",
}
_ON = "collectors on (no --no-collect)"
_HOST_REMEDY = "run dbdiag on the database host, or give --host-metrics LABEL=http://HOST:9100/metrics"
_NOT_RUN = "not in this run (--no-collect, a bundle from an older dbdiag, or not for this target)"
_DIGESTS = "the statement is named only with statement digests"

# (cause, findings, kinds of evidence it needs, kinds that only say more with what they add). A kind is a role
# the engine maps to its collector (Engine.cause_sources: waits, stats, tables, blocking, settings) or a
# collector every engine has (host, oldest_xact, statements).
_CAUSES: tuple[tuple[str, str, tuple[str, ...], tuple[tuple[str, str], ...]], ...] = (
    ("the step's limit (CPU, round trips, waits)", "limit", ("host", "waits"), ()),
    ("neighbours: other processes or guests on the CPUs", "limit kind neighbours", ("host",), ()),
    ("working set larger than the buffer pool", "buffer_pool_misses, io_read_bound", ("stats",), ()),
    ("sorts and hashes spilling to disk", "temp_spill", ("stats",), (("statements", _DIGESTS),)),
    ("full and large scans", "table_scan, full_scan", ("tables",), (("statements", _DIGESTS),)),
    ("a transaction left open holding back cleanup", "old_transaction", ("oldest_xact",), ()),
    ("lock holders and queues", "lock_contention", ("waits", "blocking"), ()),
    ("commit flushes and durability", "commit_flush_bound, durability_unsafe", ("waits", "settings"), ()),
    ("checkpoints and redo / WAL space", "checkpoint_pressure", ("stats",), ()),
    ("connection churn", "connection_churn", ("stats",), ()),
    ("statement costs (Statements, A vs B)", "statement_hotspot, cpu_parse_plan", ("statements",), ()),
)


def causes_checked(b: Bundle) -> list[TargetCauses]:
    """For each target of the run, every cause in README's table: checked or not, and why."""
    out = []
    for t in b.run.get("targets") or []:
        if not isinstance(t, dict) or not t.get("label"):
            continue
        engine = engine_of(b, str(t["label"]))
        out.append(TargetCauses(str(t["label"]), tuple(_check(b, t, engine, c) for c in _CAUSES)))
    return out


def _check(b: Bundle, t: dict[str, Any], engine: Engine, cause: tuple[Any, ...]) -> CauseCheck:
    name, findings, needs, optional = cause
    read, why, shows = [], [], []
    for kind in needs:
        src = engine.cause_sources.get(kind, kind)
        ok, reason, hint = _source(b, t, src)
        if ok:
            read.append(_WORDS.get(src, src))
            continue
        why.append(f"{_WORDS.get(src, src)}: {reason}")
        remedy = _HOST_REMEDY if src == "host" else engine.source_remedies.get(src, "%s").replace("%s", _ON)
        shows.append(hint or remedy)
    if name == "connection churn" and not why and int(t.get("version_num") or 0) < engine.connection_counter_from:
        why.append(f"{engine.title} {t.get('version') or ''} does not count connections "
                   f"({engine.connection_counter_source})")
        shows.append(engine.connection_counter_older)
    notes = [f"{what} ({_source(b, t, src)[1]})" for src, what in optional if not _source(b, t, src)[0]]
    return CauseCheck(name, findings, not why, "; ".join(read), "; ".join(why), "; ".join(dict.fromkeys(shows)),
                      "; ".join(notes))


def _source(b: Bundle, t: dict[str, Any], src: str) -> tuple[bool, str, str]:
    """(ran and answered its probe, why not, what would make it run) of source ``src`` for target ``t``."""
    label = str(t["label"])
    probes = b.run.get("collectors") or {}
    if src == "host":
        if b.series.get(safe_name(f"host--{label}")):
            return True, "", ""
        p = probes.get(f"host--{label}") or (probes.get("host") if t.get("local") else None)
        if t.get("local") and b.series.get("host"):
            return True, "", ""
        if not t.get("local") and not t.get("host_metrics"):
            return False, "the server is on another host", ""
    else:
        p = probes.get(f"{src}--{label}")
    if not isinstance(p, dict):
        return False, _NOT_RUN, ""
    if p.get("ok"):
        return True, "", ""
    return False, str(p.get("reason") or "its probe failed"), str(p.get("hint") or "")
