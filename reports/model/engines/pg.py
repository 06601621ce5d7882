"""PostgreSQL's part of the report model: the rules that judge its durability settings (fsync,
synchronous_commit, full_page_writes, wal_sync_method). Source: "Write Ahead Log" settings,
https://www.postgresql.org/docs/current/runtime-config-wal.html
"""

from __future__ import annotations

from diag.core.engines import POSTGRES
from reports.model.engines.parts import FALSE, TRUE, ModelParts, SettingsReader


def durability_rules(acc: SettingsReader) -> None:
    # Source: PostgreSQL documentation, "Write Ahead Log" server configuration,
    # https://www.postgresql.org/docs/current/runtime-config-wal.html
    fsync = acc.get("fsync")
    if fsync is not None:
        if fsync.lower() in FALSE:
            acc.relax("fsync", fsync, (
                "PostgreSQL never forces WAL or data files to disk: an operating-system crash or power "
                "loss can leave the cluster corrupt beyond repair, not merely missing recent commits."))
            acc.no_wait()
        elif fsync.lower() not in TRUE:
            acc.note("fsync", fsync, "Not a boolean PostgreSQL accepts; cannot judge it.")
            acc.wait_unknown()

    sc = acc.get("synchronous_commit")
    if sc is not None:
        v = sc.lower()
        if v in FALSE:
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
        elif v not in TRUE + ("remote_apply",):
            acc.note("synchronous_commit", sc, "Not a value PostgreSQL documents; "
                     "cannot tell whether commits wait for a flush.")
            acc.wait_unknown()

    fpw = acc.get("full_page_writes")
    if fpw is not None and fpw.lower() in FALSE:
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


PARTS = ModelParts(durability_rules)
