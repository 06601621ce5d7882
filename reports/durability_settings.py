"""Settings verdict: what a server's settings promise about committed data surviving a crash.

Pure functions, no I/O. A setting that was not collected is "unknown", never
assumed to be at its default. Which settings decide whether a commit waits for
its flush, and the sync-method values each engine documents, come from the
engine objects (:mod:`diag.engines`); the rules that judge each engine's
settings are registered here by :attr:`Engine.name <diag.engines.base.Engine.name>`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from diag.engines import MYSQL, POSTGRES, Engine, engine_for
from diag.errors import DiagError, UsageError

_TRUE = ("on", "true", "yes", "1")
_FALSE = ("off", "false", "no", "0")


class RelaxedSetting(NamedTuple):
    """A setting that weakens durability: its name, its value, and what it risks (one sentence)."""

    setting: str
    value: str
    risk: str


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
    :func:`reports.durability_plausibility.plausibility_verdict`'s flush bounds hold:
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


class _Acc:
    """Collects per-setting findings while the rules run."""

    def __init__(self, settings: dict[str, str]) -> None:
        self.s = {k.strip().lower(): str(v).strip() for k, v in settings.items() if v is not None}
        self.relaxed: list[RelaxedSetting] = []
        self.unknown: list[str] = []
        self.notes: list[RelaxedSetting] = []
        self.waits: bool | None = True  # flips to False/None as rules find out

    def get(self, name: str) -> str | None:
        v = self.s.get(name)
        if v is None or v == "":
            self.unknown.append(name)
            return None
        return v

    def relax(self, name: str, value: str, risk: str) -> None:
        self.relaxed.append(RelaxedSetting(name, value, risk))

    def note(self, name: str, value: str, risk: str) -> None:
        self.notes.append(RelaxedSetting(name, value, risk))

    def no_wait(self) -> None:
        self.waits = False

    def wait_unknown(self) -> None:
        if self.waits is True:
            self.waits = None


def _dbms(engine: Engine | str) -> Engine:
    if isinstance(engine, Engine):
        return engine
    try:
        return engine_for(engine)
    except UsageError as e:
        raise DiagError(f"durability verdict: {e}") from None


def settings_verdict(engine: Engine | str, settings: dict[str, str]) -> SettingsVerdict:
    """Judge durability settings of a PostgreSQL or MySQL/MariaDB server.

    ``engine``: an engine object, or a name :func:`diag.engines.engine_for` knows
    ("postgres", "postgresql", "pg", "mysql", "mariadb"); MariaDB is told apart by a
    ``version`` setting containing "MariaDB". ``settings``: name -> value as SHOW /
    pg_settings / SHOW GLOBAL VARIABLES print them (case of names and values does
    not matter). An unknown engine name is a DiagError.
    """
    dbms = _dbms(engine)
    acc = _Acc(settings)
    _RULES[dbms.name](acc)
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


# --------------------------------------------------------------------------- PostgreSQL


def _postgres(acc: _Acc) -> None:
    # Source: PostgreSQL documentation, "Write Ahead Log" server configuration,
    # https://www.postgresql.org/docs/current/runtime-config-wal.html
    fsync = acc.get("fsync")
    if fsync is not None:
        if fsync.lower() in _FALSE:
            acc.relax("fsync", fsync, (
                "PostgreSQL never forces WAL or data files to disk: an operating-system crash or power "
                "loss can leave the cluster corrupt beyond repair, not merely missing recent commits."))
            acc.no_wait()
        elif fsync.lower() not in _TRUE:
            acc.note("fsync", fsync, "Not a boolean PostgreSQL accepts; cannot judge it.")
            acc.wait_unknown()

    sc = acc.get("synchronous_commit")
    if sc is not None:
        v = sc.lower()
        if v in _FALSE:
            acc.relax("synchronous_commit", sc, (
                "A commit returns before its WAL is flushed: a server crash, OS crash or power loss can "
                "lose the last commits (up to 3 x wal_writer_delay, 600 ms by default) that clients were "
                "told succeeded, but the database stays consistent, with no corruption."))
            acc.no_wait()
        elif v == "local":
            acc.note("synchronous_commit", sc, (
                "Commits wait for the local WAL flush, so they are durable on this server; only "
                "synchronous standbys are not waited for (a failover could lose the last commits)."))
        elif v == "remote_write":
            acc.note("synchronous_commit", sc, (
                "Commits wait for the local WAL flush (durable on this server); synchronous standbys "
                "only need to have written it, so losing the primary and a standby's OS together could "
                "lose the last commits."))
        elif v not in _TRUE + ("remote_apply",):
            acc.note("synchronous_commit", sc, "Not a value PostgreSQL documents; "
                     "cannot tell whether commits wait for a flush.")
            acc.wait_unknown()

    fpw = acc.get("full_page_writes")
    if fpw is not None and fpw.lower() in _FALSE:
        acc.relax("full_page_writes", fpw, (
            "A data page half-written when the OS crashes or power fails (a torn page) cannot be "
            "repaired from WAL, so crash recovery can leave silent or unrecoverable corruption; safe "
            "only on storage that writes 8 kB pages atomically (e.g. ZFS)."))

    name = POSTGRES.sync_method_setting
    wsm = acc.get(name)
    if wsm is not None and wsm.lower() not in POSTGRES.sync_methods:
        # Every documented method is durable when the storage honours it; only an
        # unrecognised value is worth a word.
        acc.note(name, wsm, (
            f"Not a method PostgreSQL documents ({', '.join(POSTGRES.sync_methods)}); "
            "cannot tell how WAL is flushed."))


# --------------------------------------------------------------------------- MySQL / MariaDB
# Sources: MySQL Reference Manual, "InnoDB Startup Options and System Variables",
# https://dev.mysql.com/doc/refman/8.0/en/innodb-parameters.html
# (sysvar_innodb_flush_log_at_trx_commit, sysvar_innodb_flush_method,
# sysvar_innodb_doublewrite); "Binary Logging Options and Variables",
# https://dev.mysql.com/doc/refman/8.0/en/replication-options-binary-log.html#sysvar_sync_binlog;
# MariaDB: https://mariadb.com/kb/en/innodb-system-variables/ and
# https://mariadb.com/docs/server/server-usage/storage-engines/innodb/innodb-flush-method


def _is_mariadb(acc: _Acc) -> bool:
    return MYSQL.is_mariadb(acc.s.get("version", "") + " " + acc.s.get("version_comment", ""))


def _mariadb_major(acc: _Acc) -> int | None:
    try:
        return int(acc.s.get("version", "").split(".", 1)[0])
    except ValueError:
        return None


def _mysql(acc: _Acc) -> None:
    mariadb = _is_mariadb(acc)
    _flush_log_at_trx_commit(acc, mariadb)
    _sync_binlog(acc)
    _doublewrite(acc)
    _flush_method(acc, mariadb)


def _flush_log_at_trx_commit(acc: _Acc, mariadb: bool) -> None:
    timeout = acc.s.get("innodb_flush_log_at_timeout", "1")  # MySQL only; seconds between log flushes
    every = "about once a second" if timeout in ("", "1") else f"about every {timeout} s"
    flatc = acc.get("innodb_flush_log_at_trx_commit")
    if flatc is None:
        return
    if flatc == "0":
        acc.relax("innodb_flush_log_at_trx_commit", flatc, (
            f"The redo log is written and flushed {every}, not at commit: a mysqld crash, and also an "
            "OS crash or power loss, can lose the commits of that last interval (InnoDB still "
            "recovers to a consistent state)."))
        acc.no_wait()
    elif flatc == "2":
        acc.relax("innodb_flush_log_at_trx_commit", flatc, (
            f"The redo log is written to the OS at commit but flushed only {every}: a mysqld crash "
            "loses nothing, an OS crash or power loss can lose the commits of that last interval."))
        acc.no_wait()
    elif flatc == "3" and mariadb:
        pass  # MariaDB: flush at prepare and at commit; durable
    elif flatc != "1":
        acc.note("innodb_flush_log_at_trx_commit", flatc, "Not a value this server documents; cannot judge it.")
        acc.wait_unknown()


def _sync_binlog(acc: _Acc) -> None:
    log_bin = acc.get("log_bin")
    if log_bin is None or log_bin.lower() not in _TRUE:
        return
    sb = acc.get("sync_binlog")
    if sb is not None and sb != "1":
        how = ("left to the OS" if sb == "0" else f"synced only every {sb} commit groups")
        # With the binary log on, it is the commit coordinator: recovery rolls back
        # InnoDB transactions whose binlog events are missing. So a lost binlog tail
        # loses commits even with innodb_flush_log_at_trx_commit=1.
        acc.relax("sync_binlog", sb, (
            f"The binary log is on but {how}: after an OS crash or power loss, recovery rolls back "
            "committed transactions whose binlog events were lost, and replicas may already have "
            "applied transactions the source no longer has."))


def _doublewrite(acc: _Acc) -> None:
    dw = acc.get("innodb_doublewrite")
    if dw is None:
        return
    v = dw.upper()
    if v in ("OFF", "0", "FALSE", "NO"):
        acc.relax("innodb_doublewrite", dw, (
            "A 16 kB page half-written when the OS crashes or power fails (a torn page) has no intact "
            "copy to recover from, so crash recovery can fail or leave corruption; safe only on "
            "storage that writes pages atomically (e.g. ZFS, devices with atomic writes)."))
    elif v == "DETECT_ONLY":
        acc.relax("innodb_doublewrite", dw, (
            "Only metadata goes to the doublewrite buffer: torn pages after an OS crash or power loss "
            "are detected at recovery but cannot be repaired."))
    elif v not in ("ON", "1", "TRUE", "YES", "DETECT_AND_RECOVER"):
        acc.note("innodb_doublewrite", dw, "Not a value this server documents.")


def _flush_method(acc: _Acc, mariadb: bool) -> None:
    name = MYSQL.sync_method_setting
    fm = acc.get(name)
    if fm is None:
        return
    v = fm.lower()
    major = _mariadb_major(acc) if mariadb else None
    if v in ("nosync", "littlesync"):
        if mariadb and major is not None and major >= 11:
            acc.note(name, fm, (
                "Deprecated since MariaDB 11.0, where this value maps to fsync and no longer skips flushes."))
        else:
            what = "skips fsync()" if v == "nosync" else "flushes only rarely"
            acc.relax(name, fm, (
                f"Documented for internal performance testing only and unsupported: InnoDB {what} "
                "on its files, so an OS crash or power loss can lose commits and corrupt data files"
                + (" (MariaDB 11.0+ ignores it; the server version was not given)."
                   if mariadb and major is None else ".")))
            acc.wait_unknown()  # whether the redo log itself is still flushed differs by version
    elif v == "o_direct_no_fsync":
        acc.note(name, fm, (
            "InnoDB skips fsync() after O_DIRECT writes to data files (the redo log is still flushed): "
            "durable only if data files and redo log share a device, or the data files' device has no "
            "volatile write cache; the manual calls it unsuitable for some filesystems such as XFS."))
    elif v not in MYSQL.sync_methods:
        acc.note(name, fm, "Not a value this server documents; cannot tell how InnoDB flushes.")
        acc.wait_unknown()


# The rules of each engine, by engine name (the rules differ whole, not in a value).
_RULES: dict[str, Callable[[_Acc], None]] = {POSTGRES.name: _postgres, MYSQL.name: _mysql}
