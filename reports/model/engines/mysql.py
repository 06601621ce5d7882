"""MySQL / MariaDB's part of the report model: the rules that judge its durability settings
(innodb_flush_log_at_trx_commit, sync_binlog, innodb_doublewrite, innodb_flush_method), MariaDB told apart by
its version text.
"""

from __future__ import annotations

from diag.core.engines import MYSQL
from reports.model.engines.parts import FALSE, TRUE, ModelParts, SettingsReader


def _is_mariadb(acc: SettingsReader) -> bool:
    return MYSQL.is_mariadb(acc.s.get("version", "") + " " + acc.s.get("version_comment", ""))


def _mariadb_major(acc: SettingsReader) -> int | None:
    try:
        return int(acc.s.get("version", "").split(".", 1)[0])
    except ValueError:
        return None


def durability_rules(acc: SettingsReader) -> None:
    mariadb = _is_mariadb(acc)
    _flush_log_at_trx_commit(acc, mariadb)
    _sync_binlog(acc)
    _doublewrite(acc)
    _flush_method(acc, mariadb)


def _flush_log_at_trx_commit(acc: SettingsReader, mariadb: bool) -> None:
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


def _sync_binlog(acc: SettingsReader) -> None:
    log_bin = acc.get("log_bin")
    if log_bin is None or log_bin.lower() not in TRUE:
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


def _doublewrite(acc: SettingsReader) -> None:
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


def _flush_method(acc: SettingsReader, mariadb: bool) -> None:
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


PARTS = ModelParts(durability_rules)
