"""MySQL (5.7, 8.0, 8.4) and MariaDB (10.5 to 11.x) as one :class:`~diag.core.engines.base.Engine`.

They share a protocol and most catalog views; where they differ the ``product``
(``"mysql"`` or ``"mariadb"``, detected on connect) decides.
"""

from __future__ import annotations

import functools
import signal
import ssl
from typing import TYPE_CHECKING, Any

from diag.core.engines import mytext
from diag.core.engines.base import ConnectionRoom, DriverInfo, Engine, Identity, tightest

if TYPE_CHECKING:
    from diag.core.targets import Target

# Error numbers -> kind.
_KINDS = {
    1045: "auth", 1044: "privilege", 1142: "privilege", 1143: "privilege", 1227: "privilege", 1370: "privilege",
    1049: "connect", 2003: "connect", 2005: "connect", 2002: "connect", 2006: "lost", 2013: "lost", 2055: "lost",
    4031: "lost", 1927: "lost", 1053: "lost", 1213: "deadlock", 1205: "lock_timeout", 1969: "timeout", 3024: "timeout",
    1146: "undefined", 1054: "undefined", 1193: "undefined", 1109: "undefined", 1289: "unsupported",
    # ER_CON_COUNT_ERROR (max_connections), ER_TOO_MANY_USER_CONNECTIONS (max_user_connections),
    # ER_USER_LIMIT_REACHED (an account's MAX_USER_CONNECTIONS)
    1040: "connection_limit", 1203: "connection_limit", 1226: "connection_limit",
}
MARIADB = "mariadb"

# performance_schema event names and processlist states (``state:<state>``, lower case) by class of the
# shared taxonomy. MariaDB 10.8+ does not instrument the redo flush: its commits show as state "Commit".
_MY_FLUSH = frozenset({"wait/io/file/innodb/innodb_log_file", "wait/io/file/sql/binlog", "state:commit",
                       "state:waiting for handler commit"})
_MY_FLUSH_PREFIX = ("wait/synch/cond/sql/mysql_bin_log::cond_done", "wait/synch/cond/sql/mysql_bin_log::cond_queue")
_MY_LATCH_PREFIX = ("wait/synch/mutex/", "wait/synch/rwlock/", "wait/synch/sxlock/", "wait/synch/prlock/")
_MY_LOCK_PREFIX = ("wait/lock/",)
# Waiting for the client's next statement inside a transaction, or on the client socket.
_MY_CLIENT = frozenset({"clientread", "state:reading from net"})
_MY_CLIENT_PREFIX = ("wait/io/socket/",)
_MY_SPACE = frozenset({"state:waiting for redo log space", "state:waiting for free buffer"})
# Thread states of a statement at work (no wait): the server is on CPU (or runnable). "Writing to net" is
# the send itself (on loopback the kernel does the receiver's work inside it), not a wait for the client.
_MY_RUNNING = ("state:updat", "state:sending", "state:executing", "state:statistics", "state:preparing",
               "state:optimizing", "state:init", "state:starting", "state:end", "state:query end",
               "state:closing tables", "state:freeing items", "state:cleaning up", "state:opening table",
               "state:checking permissions", "state:writing to net", "state:system lock", "state:searching rows",
               "state:sorting", "state:creating", "state:copying", "state:after opening tables",
               "state:unlocking tables", "state:reset for next command", "state:update", "state:insert",
               "state:delete", "state:removing tmp table", "state:closing")


class MysqlEngine(Engine):
    """MySQL and MariaDB: libmariadb through ctypes for workloads; mysqlclient, else PyMySQL, for sessions."""

    name = "mysql"
    title = "MySQL/MariaDB"
    aliases = ("mariadb",)
    products = ("mysql", MARIADB)
    schemes = ("mysql", "mariadb")
    default_port = 3306
    default_user = "root"
    default_database = ""
    socket_param = "unix_socket"
    string_backslashes = True
    drivers = (("mysqlclient", "MySQLdb"), ("PyMySQL", "pymysql"))
    driver_hint = "pymysql"
    key_settings = ("innodb_flush_log_at_trx_commit", "sync_binlog", "log_bin", "innodb_doublewrite",
                    "innodb_flush_method", "innodb_buffer_pool_size", "innodb_log_file_size", "innodb_io_capacity",
                    "performance_schema", "thread_handling", "max_connections")
    log_name = "redo log"
    sql_folder = "mysql"
    isolation_prefix_sql = "SET SESSION TRANSACTION ISOLATION LEVEL "
    drop_routine_sql = "DROP PROCEDURE IF EXISTS dbdiag.{}"
    buffer_pool_setting = "innodb_buffer_pool_size"
    group_commit_knobs = "binlog_commit_wait_count / binlog_commit_wait_usec"
    relaxed_durability = "innodb_flush_log_at_trx_commit=2"
    group_commit_condition = "with the binary log on"
    waits_series = "my_waits"
    blocking_series = "my_blocking"
    per_txn_counters = (("log_bytes_per_txn", ("status.Innodb_os_log_written",)),
                        ("block_reads_per_txn", ("status.Innodb_buffer_pool_read_requests",)),
                        ("disk_reads_per_txn", ("status.Innodb_buffer_pool_reads",)))
    server_stop_signal = signal.SIGTERM  # mysqld's normal shutdown
    # Per-statement evidence on throwaway servers: performance_schema with its statement digests (and prepared
    # statements), and metadata-lock waits (MariaDB leaves MDL uninstrumented by default) for blocking chains.
    # The statement-history, current-waits and stages consumers and the InnoDB mutex instruments stay off: on
    # point selects at saturation performance_schema alone cost nothing measurable here, stages / InnoDB
    # mutexes ~30-50%; what this set still costs (the MDL instrument, perhaps) is not settled (BENCHMARKS.md,
    # statement instrumentation); --set performance-schema-consumer-events-waits-current=ON (or
    # -instrument=...) adds one.
    # Source: https://mariadb.com/kb/en/performance-schema-system-variables/ and -options/
    instrumentation = (("performance_schema", "ON", 0), ("performance-schema-consumer-statements-digest", "ON", 0),
                       # prepared_statements_instances counts executions only with a statements consumer on
                       ("performance-schema-consumer-events-statements-current", "ON", 0),
                       ("performance-schema-instrument", "wait/lock/metadata/sql/mdl=ON", 0))
    instrumentation_cost = ("measured at about 7% of point-select throughput at saturation on a quiet machine, "
                            "server CPU per statement +10-23% (MariaDB 10.11, 4 clients, BENCHMARKS.md, 2026-12-01)")
    # performance_schema's statement events are timed from the statement's start (before parsing) to its end,
    # so the digest's time holds parse, optimisation and execution. Source: "Performance Schema Statement Event
    # Tables", https://dev.mysql.com/doc/refman/8.0/en/performance-schema-statement-tables.html
    statement_timer_scope = "parse_to_end"
    statement_timer_text = ("parse to end of statement (performance_schema statement events: parse, optimisation "
                            "and execution)")
    # Sort merge passes: a sort larger than sort_buffer_size merges runs from temporary files. Source: "Server
    # Status Variables", MySQL manual. Not Created_tmp_disk_tables: it is server-wide and dbdiag's own samplers'
    # information_schema reads make on-disk temporary tables (measured on MariaDB 10.11: 41 in a 1.5 s step of
    # a load that made none, 0 in 5 s of an idle server), so it would name our looking as the cause.
    spill_counters = (("status.Sort_merge_passes", "sort merge passes"),)
    # Rows read by table scans (the next row of a scan) and joins that scanned their first table.
    # Source: "Server Status Variables", MySQL manual.
    scan_counters = ("status.Handler_read_rnd_next", "status.Select_scan")
    cleanup_backlog = "the InnoDB history list"
    per_table_io_hint = ("not read: InnoDB counts pool reads per table only in performance_schema's "
                         "table_io_waits_summary_by_table (no hits) or INNODB_BUFFER_PAGE (a scan of the whole "
                         "pool, too costly to read during a step)")
    # Connection attempts (server-wide) and threads created for them. Source: "Server Status Variables".
    unnamed_waits = ("without performance_schema wait events a thread state such as 'Sending data' or 'Update' "
                     "covers InnoDB's mutex, page-read and redo waits alike (performance_schema=ON with its wait "
                     "instruments names them; a perf off-CPU profile shows where the threads block)")
    connection_counter = "status.Connections"
    cause_sources = {"waits": "my_waits", "stats": "my_status", "tables": "my_status", "blocking": "my_blocking",
                     "settings": "my_settings"}
    source_remedies = {"my_waits": "%s; the PROCESS privilege", "my_status": "%s; PROCESS for the InnoDB status",
                       "my_settings": "%s", "my_blocking": "%s; PROCESS, and performance_schema=ON for metadata locks",
                       "oldest_xact": "%s; the PROCESS privilege",
                       "statements": "performance_schema=ON (statement digests)"}
    connection_counter_source = "SHOW GLOBAL STATUS Connections (server-wide: every client's connections)"
    backend_start = ("a thread (from the thread cache, or a new one when the cache is empty), authentication "
                     "and the session's set-up")
    thread_create_counter = "status.Threads_created"
    last_statement_hint = ("not visible: the processlist shows only a running statement; an idle thread's last "
                           "one is in performance_schema.events_statements_current (performance_schema=ON)")
    old_transaction_advice = ("End that session's transaction (COMMIT or ROLLBACK in the application, or KILL its "
                              "thread); until then purge cannot free the undo log behind its read view, and reads "
                              "walk ever longer version chains.")
    spill_settings = ("tmp_table_size and max_heap_table_size (an in-memory temporary table may grow to the smaller "
                      "of the two), sort_buffer_size for sorts; all settable per session")
    # Sources: https://dev.mysql.com/doc/refman/8.0/en/innodb-parameters.html,
    # https://mariadb.com/kb/en/innodb-system-variables/
    commit_path_settings = ("innodb_flush_log_at_trx_commit", "innodb_flush_method")
    sync_method_setting = "innodb_flush_method"
    # The values that flush normally; o_direct_no_fsync, nosync and littlesync are judged one by one.
    sync_methods = ("fsync", "fdatasync", "o_dsync", "o_direct", "normal", "unbuffered", "async_unbuffered")
    osync_methods = ("o_dsync",)
    durable_values = "innodb_flush_log_at_trx_commit=1, sync_binlog=1 with the binary log on, innodb_doublewrite=ON"
    stats_series = "my_status"
    log_flush_counters = (("status.Innodb_os_log_fsyncs", "Innodb_os_log_fsyncs"),
                          ("metrics.os_log_fsyncs", "INNODB_METRICS os_log_fsyncs"),
                          # MariaDB 10.8+ has no redo-only counter.
                          ("status.Innodb_data_fsyncs", "Innodb_data_fsyncs (redo log and data files)"))
    process_names = ("mariadbd", "mysqld")
    # Debian's mariadbd keeps only its exported symbols; its debug symbols come as a separate package or by build id.
    symbols_hint = ("install mariadb-server-core-dbgsym from Debian's debug archive, or set "
                    "DEBUGINFOD_URLS=https://debuginfod.debian.net so perf finds them by build id")
    data_directory_sql = "SELECT @@datadir AS d"
    # Source: https://mariadb.com/kb/en/information-schema-processlist-table/ (STATE is the thread's stage,
    # "Waiting for ..." when it waits on another session or a replica)
    session_id_sql = "SELECT CONNECTION_ID() AS p"
    session_view_sql = ("SELECT /* dbdiag */ ID AS id, COMMAND AS state, '' AS wait_type, "
                        "COALESCE(STATE, '') AS wait, LEFT(COALESCE(INFO, ''), 300) AS query, TIME AS seconds "
                        "FROM information_schema.PROCESSLIST WHERE ID IN ({ids})")
    end_session_sql = "KILL {id}"
    endless_waits = ("/Waiting for", "/waiting for", "/Waiting on", "/Locked")
    # Frames of the parser and optimizer; MySQL reads "const" tables (a primary-key lookup) inside
    # JOIN::optimize: those frames below a plan frame are execution, not planning.
    parse_plan_frames = (
        r"^(parse_sql|MYSQLparse|ORAparse|MYSQLlex|my_sql_parser_parse|THD::sql_parser|Lex_input_stream::\w+|"
        r"lex_start|JOIN::optimize\w*|JOIN::prepare|make_join_statistics|Query_block::prepare|"
        r"st_select_lex::prepare|SELECT_LEX::prepare|SQL_SELECT::test_quick_select|test_quick_select|"
        r"Optimize_table_order::\w+|choose_plan|greedy_search|best_access_path)$")
    parse_frames = (r"^(parse_sql|MYSQLparse|ORAparse|MYSQLlex|my_sql_parser_parse|THD::sql_parser|"
                    r"Lex_input_stream::\w+|lex_start)$")
    execution_frames = r"^(handler::|ha_\w+::|row_search|row_sel|btr_|buf_page_|join_read_const|read_const)"
    parse_plan_advice = ("Every statement is parsed and optimized again. Server-side prepared statements "
                         "(COM_STMT_PREPARE: a driver option such as useServerPrepStmts, or PREPARE/EXECUTE) skip "
                         "the parse; MySQL and MariaDB still optimize each execution, so for many tiny statements "
                         "fewer round trips (multi-row statements, stored procedures) cut the rest.")
    # Protocol-level and SQL-level EXECUTE both count.
    prepared_executions_counter = "status.Com_stmt_execute"
    # InnoDB checkpoints continuously (fuzzy checkpointing) and purges in the background: no discrete event to
    # place in a window (redo pressure is reports.rules.checkpoints'), so checkpoint_counters stays empty.
    wait_samplers = {"performance_schema": "performance_schema current waits sampled at 10 Hz (threads inside a "
                                           "transaction)",
                     "": "processlist states and INNODB_TRX sampled at 10 Hz (threads inside a transaction; no wait "
                         "events)"}
    placeholder_style = "qmarks"
    watch_reads = ("counters", "sessions")
    load_container = "DATABASE"
    timestamp_type = "datetime"
    autoinc_type = "integer NOT NULL AUTO_INCREMENT"
    # No CHARSET: the tables take the server's default (latin1 on a server without a config file, utf8mb4
    # on Debian's), as sysbench's sbtest does, so the same statements sort and compare the same bytes
    # (BENCHMARKS.md, issue 15: with utf8mb4 char(120) sort keys our read-only cost the server 1,013 µs per
    # transaction against sysbench's 761 on its latin1 table; 851 against 835 on a latin1 one). Our
    # generated strings are ASCII, and string parameters (utf8mb4 on our connections) still use the
    # column's index: the server converts the parameter (EXPLAIN: ref on the index; a value with a
    # character latin1 lacks is error 1267 there, which no built-in workload sends).
    table_options = " ENGINE=InnoDB"

    @staticmethod
    def is_mariadb(product: str) -> bool:
        """Whether a product name (or version text) is MariaDB rather than MySQL."""
        return MARIADB in product.lower()

    def wait_class_of(self, key: str) -> str:
        if key in _MY_FLUSH or key.startswith(_MY_FLUSH_PREFIX):
            return "commit_flush"
        if key.startswith(_MY_LATCH_PREFIX):
            return "latch"
        if key.startswith(_MY_LOCK_PREFIX):
            return "lock"
        if key in _MY_CLIENT or key.startswith(_MY_CLIENT_PREFIX):
            return "client"
        if key in _MY_SPACE:
            return "buffer_log_space"
        if key.startswith("wait/io/file/"):
            return "data_io"
        if key.startswith(_MY_RUNNING):
            return "cpu"
        return "other"

    def error_kind(self, exc: BaseException) -> tuple[str, str, str]:
        args: tuple[Any, ...] = getattr(exc, "args", ())
        num = args[0] if args and isinstance(args[0], int) else 0
        msg = str(args[1]) if len(args) > 1 else (str(exc) or type(exc).__name__)
        msg = msg.strip().splitlines()[0] if msg.strip() else type(exc).__name__
        kind = _KINDS.get(num, "lost" if type(exc).__name__ == "InterfaceError" else "other")
        return (str(num) if num else ""), msg, kind

    def connect_kwargs(self, target: "Target", driver: DriverInfo, autocommit: bool, timeout_s: int,
                       application_name: str) -> dict[str, Any]:
        kw: dict[str, Any] = dict(user=target.user, connect_timeout=timeout_s, autocommit=autocommit,
                                  charset="utf8mb4")
        # mysqlclient spells two arguments differently from PyMySQL.
        kw["passwd" if driver.name == "mysqlclient" else "password"] = target.password or ""
        if target.database:
            kw["database" if driver.name == "PyMySQL" else "db"] = target.database
        if driver.name == "PyMySQL":
            # MySQL's counterpart of application_name: the program_name connection attribute, which
            # performance_schema.session_connect_attrs shows (the wait sampler leaves dbdiag's own sessions
            # out by it). mysqlclient cannot set connection attributes.
            kw["program_name"] = application_name
        if target.socket:
            kw["unix_socket"] = target.socket
        else:
            kw["host"] = target.host or "127.0.0.1"
            kw["port"] = target.port or self.default_port
        return kw

    def text_rows(self, conn: Any, driver: DriverInfo, sql: str) -> list[tuple[str | None, ...]] | None:
        # PyMySQL only: its column descriptions and converters cost more than the rows (diag.engines.mytext).
        if driver.name != "PyMySQL" or not mytext.usable(conn):
            return None
        return mytext.text_rows(conn, sql)

    def driver_connect(self, driver: DriverInfo, kw: dict[str, Any]) -> Any:
        if driver.name == "PyMySQL":
            return _pymysql_connection(driver.module)(**kw)
        return driver.module.connect(**kw)

    def identify(self, query: Any) -> Identity:
        text = str(query("SELECT VERSION() AS v")[0]["v"])
        nums = [int(x) for x in text.split("-")[0].split(".")[:3] if x.isdigit()]
        nums += [0] * (3 - len(nums))
        return Identity(MARIADB if self.is_mariadb(text) else "mysql", text, nums[0] * 10000 + nums[1] * 100 + nums[2])

    def statement_timeout_sql(self, product: str, ms: int) -> str:
        if self.is_mariadb(product):
            return f"SET SESSION max_statement_time = {ms / 1000.0:.3f}"
        return f"SET SESSION max_execution_time = {int(ms)}"

    def read_key_settings(self, query: Any) -> dict[str, str]:
        names = self.key_settings
        rows = query("SHOW GLOBAL VARIABLES WHERE Variable_name IN (%s)" % ",".join(["%s"] * len(names)), list(names))
        out: dict[str, str] = {}
        for r in rows:
            vals = list(r.values())
            out[str(vals[0])] = str(vals[1])
        return out

    def connection_room(self, query: Any) -> ConnectionRoom:
        # Threads_connected counts every client connection (a global status: no privilege needed); the
        # processlist shows a user without PROCESS its own threads only, which is what max_user_connections
        # counts. A user with SUPER or CONNECTION ADMIN is not held to max_user_connections (MariaDB 10.11,
        # measured: root opened 16 connections under max_user_connections=12). The one extra connection
        # such a user may open beyond max_connections is not counted on.
        me = ("CONCAT(QUOTE(SUBSTRING_INDEX(CURRENT_USER(), '@', 1)), '@', "
              "QUOTE(SUBSTRING_INDEX(CURRENT_USER(), '@', -1)))")  # USER_PRIVILEGES.GRANTEE: 'user'@'host'
        # SHOW GLOBAL STATUS on both products (MySQL 8 has no information_schema.GLOBAL_STATUS).
        used = int(list(query("SHOW GLOBAL STATUS LIKE 'Threads_connected'")[0].values())[1])
        r = query("SELECT @@max_connections AS max, @@max_user_connections AS muc, "
                  "(SELECT COUNT(*) FROM information_schema.PROCESSLIST "
                  " WHERE USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1)) AS mine, "
                  f"(SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = {me}"
                  " AND PRIVILEGE_TYPE IN ('SUPER', 'CONNECTION ADMIN', 'CONNECTION_ADMIN')) AS exempt")[0]
        rooms = [ConnectionRoom("max_connections", int(r["max"]), 0, used - 1)]
        if int(r["muc"]) > 0 and not int(r["exempt"]):
            rooms.append(ConnectionRoom("max_user_connections", int(r["muc"]), 0, int(r["mine"]) - 1))
        return tightest(rooms)

MYSQL = MysqlEngine()


@functools.cache
def _pymysql_connection(pymysql: Any) -> type:
    """PyMySQL's Connection class, with the TLS context of its PREFERRED mode (no ``ssl`` arguments: TLS when
    the server offers it, plain otherwise) made once per process instead of once per connection.

    PyMySQL 1.1+ builds that context with ``ssl.create_default_context()`` for every connection, which loads the
    system's CA store: ~90 ms of CPU per connection on this VM (0.9 s of a two-target run's set-up, 10
    collector sessions), for a context that verifies nothing (CERT_NONE, no host name check: PyMySQL's own
    settings for no CA). The context is the same for every connection and reads no per-connection state, so
    one serves them all; a caller's explicit TLS options still get PyMySQL's own context.
    """
    base = pymysql.connections.Connection
    made: list[ssl.SSLContext] = []

    class Connection(base):  # type: ignore[misc, valid-type]
        def _create_ssl_ctx(self, sslp: Any) -> Any:
            if isinstance(sslp, dict) and not sslp:  # PREFERRED mode: no options given
                if not made:
                    made.append(super()._create_ssl_ctx(sslp))
                return made[0]
            return super()._create_ssl_ctx(sslp)

    return Connection
