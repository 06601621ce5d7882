"""Settings verdict: what a server's settings promise about committed data surviving a crash.

Pure functions, no I/O. A setting that was not collected is "unknown", never
assumed to be at its default. Which settings decide whether a commit waits for
its flush, and the sync-method values each engine documents, come from the
engine objects (:mod:`diag.core.engines`); the rules that judge each engine's
settings are its module's in :mod:`reports.model.engines`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from diag.core.engines import Engine, engine_for
from diag.core.errors import DiagError, UsageError
from reports.model.engines import model_parts
from reports.model.engines.parts import RelaxedSetting, SettingsReader


@dataclass(frozen=True)
class SettingsVerdict:
    """What the settings promise about committed data surviving a crash.

    ``engine``: the engine's name as bundles store it ("postgres" or "mysql").
    ``status``: "durable" (every checked setting known and safe), "relaxed" (at least
    one setting trades durability for speed; see ``relaxed``) or "unknown" (nothing
    relaxed, but some settings were not collected; see ``unknown``). ``durable`` is
    ``status == "durable"``. ``notes`` are caveats that do not by themselves make the
    server non-durable (setting, value, sentence). ``commit_waits_for_flush`` is True
    when each commit waits for its WAL/redo to be flushed (the condition under which
    :func:`reports.model.durability_plausibility.plausibility_verdict`'s flush bounds hold:
    pass it as ``settings_durable``), False when a setting lets commits return first,
    None when that is not known.
    """

    engine: str
    status: str
    durable: bool
    reason: str
    relaxed: list[RelaxedSetting] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    notes: list[RelaxedSetting] = field(default_factory=list)
    commit_waits_for_flush: bool | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "engine": self.engine, "status": self.status, "durable": self.durable, "reason": self.reason,
            "relaxed": [r._asdict() for r in self.relaxed], "unknown": list(self.unknown),
            "notes": [n._asdict() for n in self.notes], "commit_waits_for_flush": self.commit_waits_for_flush,
        }


def _dbms(engine: Engine | str) -> Engine:
    if isinstance(engine, Engine):
        return engine
    try:
        return engine_for(engine)
    except UsageError as e:
        raise DiagError(f"durability verdict: {e}") from None


def settings_verdict(engine: Engine | str, settings: dict[str, str]) -> SettingsVerdict:
    """Judge durability settings of a PostgreSQL or MySQL/MariaDB server.

    ``engine``: an engine object, or a name :func:`diag.core.engines.engine_for` knows
    ("postgres", "postgresql", "pg", "mysql", "mariadb"); MariaDB is told apart by a
    ``version`` setting containing "MariaDB". ``settings``: name -> value as SHOW /
    pg_settings / SHOW GLOBAL VARIABLES print them (case of names and values does
    not matter). An unknown engine name is a DiagError.
    """
    dbms = _dbms(engine)
    acc = SettingsReader(settings)
    model_parts(dbms).durability_rules(acc)
    if acc.relaxed:
        status = "relaxed"
        reason = "Not durable: " + "; ".join(f"{r.setting}={r.value}" for r in acc.relaxed) + "."
    elif acc.unknown:
        status = "unknown"
        reason = "Cannot tell: not collected: " + ", ".join(acc.unknown) + "."
    else:
        status = "durable"
        reason = "Every checked setting makes committed transactions survive a crash."
    waits = acc.waits
    if waits is True and any(u in dbms.commit_path_settings for u in acc.unknown):
        waits = None
    return SettingsVerdict(engine=dbms.name, status=status, durable=status == "durable", reason=reason,
                           relaxed=acc.relaxed, unknown=acc.unknown, notes=acc.notes,
                           commit_waits_for_flush=waits)


__all__ = ["RelaxedSetting", "SettingsVerdict", "settings_verdict"]
