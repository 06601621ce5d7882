"""What every database engine answers: the :class:`Engine` contract.

An engine is an object that code asks (``target.dbms.log_name``), never a string
it compares. One module per engine (:mod:`diag.core.engines.postgres`,
:mod:`diag.core.engines.mysql`) holds everything engine-specific that the core needs:
driver choice and error mapping, connection arguments, identification, key and
durability settings, statement timeouts, and the vocabulary reports use.
Sources (collectors) and report rules that are engine-specific are registered
per engine in their own layer, keyed by :attr:`Engine.name`.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from diag.core.errors import DbError

if TYPE_CHECKING:  # type hints only: targets import engines at run time, not the other way
    from diag.core.targets import Target

# Modules whose exceptions are driver errors (mapped), as opposed to bugs (raised as is).
_DRIVER_MODULES = ("psycopg", "psycopg2", "pymysql", "MySQLdb", "socket", "workloads")
# The wait taxonomy both engines map their wait events and thread states into (reports.model.accounting):
# on CPU (or runnable), the client / network (waiting for the next statement), the commit's log flush,
# data-file I/O, row / table locks, latches (LWLocks, InnoDB mutexes), waiting for log or buffer space, other.
WAIT_CLASSES = ("cpu", "client", "commit_flush", "data_io", "lock", "latch", "buffer_log_space", "other")
_WAIT_WORDS = {"cpu": "CPU", "client": "client / network", "commit_flush": "commit flush", "data_io": "data file I/O",
               "lock": "row and table locks", "latch": "latches", "buffer_log_space": "buffer / log space",
               "other": "other"}

_HINTS = {
    "auth": "check the user and password",
    "connect": "is the server running, and are host, port and database right?",
    "privilege": "the user lacks a privilege",
    "lost": "the server closed the connection",
    "connection_limit": "the server is at its connection limit",
}


Rows = list[dict[str, Any]]  # rows as column name -> value


@dataclass(frozen=True)
class ConnectionRoom:
    """How many more connections a server takes from this user, by the tightest of its limits.

    ``setting``: the limit that binds ("max_connections", "max_user_connections", ...); ``limit``: its
    value; ``reserved``: slots of it this user cannot take (superuser_reserved_connections); ``in_use``:
    connections counted against it now, the asking session left out (it closes before the clients open).
    """

    setting: str
    limit: int
    reserved: int
    in_use: int

    @property
    def free(self) -> int:
        """Connections this user can still open (0 when the server is full or over)."""
        return max(self.limit - self.reserved - self.in_use, 0)

    def text(self) -> str:
        """``max_connections is 50 (3 reserved for superusers, 1 in use by other sessions)``."""
        parts = ([f"{self.reserved} reserved for superusers"] if self.reserved else []) + \
            ([f"{self.in_use} in use by other sessions"] if self.in_use else [])
        return f"{self.setting} is {self.limit}" + (f" ({', '.join(parts)})" if parts else "")


def tightest(rooms: list[ConnectionRoom]) -> ConnectionRoom:
    """The room that binds first among a server's limits (the fewest free connections)."""
    return min(rooms, key=lambda r: r.free)


@dataclass(frozen=True)
class DriverInfo:
    """Which Python driver talks to an engine, e.g. ``psycopg 3.3.9``."""

    name: str
    version: str
    module: Any

    def __str__(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(frozen=True)
class Identity:
    """What a server says it is: ``version_num`` is e.g. 150019 or 101119."""

    product: str
    version_text: str
    version_num: int


class Engine:
    """Base of the engine objects; subclasses fill the class attributes and the hooks."""

    name: ClassVar[str] = ""                   # stored in bundles: "postgres" or "mysql"
    title: ClassVar[str] = ""                  # for people: "PostgreSQL", "MySQL/MariaDB"
    aliases: ClassVar[tuple[str, ...]] = ()    # other spellings and product names that mean this engine
    products: ClassVar[tuple[str, ...]] = ()   # Identity.product values; collector SQL files may be per product
    schemes: ClassVar[tuple[str, ...]] = ()    # DSN schemes, the first is the canonical one
    default_port: ClassVar[int] = 0
    default_user: ClassVar[str] = ""
    default_database: ClassVar[str] = ""
    socket_param: ClassVar[str] = ""           # DSN query parameter naming a unix socket
    # Whether the server reads \' in a string as a quote and "..." as a string (MySQL's default SQL mode);
    # how diag.core.fingerprint finds the literals of statement texts read from the server.
    string_backslashes: ClassVar[bool] = False
    passfile_param: ClassVar[str] = ""  # DSN query parameter naming a password file the driver reads ("" none)
    drivers: ClassVar[tuple[tuple[str, str], ...]] = ()  # (distribution, module), fastest first
    driver_hint: ClassVar[str] = ""            # what to pip install when none is present
    key_settings: ClassVar[tuple[str, ...]] = ()  # read with every run: durability and sizing
    # Report vocabulary.
    log_name: ClassVar[str] = ""               # "WAL" / "redo log"
    # The name of its SQL folders: collectors/<sql_folder>/sql/, workloads/tpcc/tpcc_sql/<sql_folder>/,
    # workloads/watch/watch_sql/<sql_folder>/ (files picked by diag.core.sqlfiles).
    sql_folder: ClassVar[str] = ""
    isolation_prefix_sql: ClassVar[str] = ""   # the session's isolation statement, before the level's SQL
    drop_routine_sql: ClassVar[str | None] = None  # drops a routine named {} before CREATE (None: CREATE OR REPLACE)
    buffer_pool_setting: ClassVar[str] = ""    # the setting that sizes the data cache
    group_commit_knobs: ClassVar[str] = ""     # the settings that batch commit flushes
    relaxed_durability: ClassVar[str] = ""     # how a user relaxes commit durability on purpose
    group_commit_condition: ClassVar[str] = ""  # what group_commit_knobs need to work ("" = nothing)
    # Findings and comparisons (asked by reports/rules and reports.model.compare).
    waits_series: ClassVar[str] = ""           # bundle series of the sampled waits: "pg_waits" / "my_waits"
    blocking_series: ClassVar[str] = ""        # bundle series of who blocks whom: "pg_blocking" / "my_blocking"
    # One OS process per session, so per-process counters (context switches) cover every session; a threaded
    # server's per-process counters are its main thread's and say nothing about the connections.
    process_per_connection: ClassVar[bool] = False
    # (metric, keys of stats_series summed) behind the per-transaction rows of a comparison; per metric the
    # first whose keys are recorded wins.
    per_txn_counters: ClassVar[tuple[tuple[str, tuple[str, ...]], ...]] = ()
    # Durability (asked by reports.model.durability_settings and reports.model.durability_view).
    commit_path_settings: ClassVar[tuple[str, ...]] = ()  # settings that decide whether a commit waits for a flush
    sync_method_setting: ClassVar[str] = ""    # the setting that picks how the log is flushed
    sync_methods: ClassVar[tuple[str, ...]] = ()   # its documented values that flush normally (lower case)
    osync_methods: ClassVar[tuple[str, ...]] = ()  # its values that flush by O_SYNC/O_DSYNC writes, not fsync calls
    durable_values: ClassVar[str] = ""         # the durable settings, as advice ("fsync=on, ...")
    stats_series: ClassVar[str] = ""           # bundle series of the global counters: "pg_stats" / "my_status"
    # (key in stats_series, name for people) of counters of the log's flushes, the first present wins.
    log_flush_counters: ClassVar[tuple[tuple[str, str], ...]] = ()
    # Host processes (CPU profiles: collectors/profile/).
    process_names: ClassVar[tuple[str, ...]] = ()  # ``comm`` of its server programs (and binary file names)
    process_title_prefix: ClassVar[str] = ""   # start of the title it writes over argv ("" = it keeps argv)
    symbols_hint: ClassVar[str] = ""           # where to get a server binary that keeps its symbol table
    # Where a local server is (collectors.hostinfo asks these; each query returns one row).
    data_directory_sql: ClassVar[str] = ""     # column ``d``: the server's data directory
    # Column ``p``: the PID of the process serving our connection, whose parent is the server
    # (process-per-connection engines); "" when connections are threads of the server process,
    # which is then found by the port or socket it listens on (among ``process_names``).
    backend_pid_sql: ClassVar[str] = ""
    # A statement that does not return (workloads.steps.stuck). Column ``p`` of session_id_sql: our connection's id
    # in the server's own view of its sessions. session_view_sql, with {ids} (integers): one row per session
    # (id, state, wait_type, wait, query, seconds: how long its statement has run). end_session_sql, with
    # {id}: ends one of our own sessions on the server (its client process is gone or going).
    session_id_sql: ClassVar[str] = ""
    session_view_sql: ClassVar[str] = ""
    end_session_sql: ClassVar[str] = ""
    # Waits that end only when something outside the statement happens (a lock released, a standby's
    # answer): the same one seen for longer than a load's bound is a stuck statement (prefixes of
    # "type/event"; a running statement, I/O, parallel workers' messages are progress).
    endless_waits: ClassVar[tuple[str, ...]] = ()
    # Folder under the data directory that holds the log and may be a symlink to another disk ("pg_wal");
    # "" when the log lives in the data directory itself. Flush tracing watches that disk too.
    log_directory: ClassVar[str] = ""
    # Throwaway servers (diag.core.servers starts them, from a launcher registry keyed by name).
    server_stop_signal: ClassVar[int] = signal.SIGTERM  # the signal that shuts a server down fast and cleanly
    # What a throwaway server starts with so that per-statement evidence exists (statement digests, I/O
    # timing, stages and waits): (setting, value, oldest server version that has it; 0 = every version), in
    # order; a setting may repeat (MySQL's performance-schema-instrument). A caller's own settings win.
    instrumentation: ClassVar[tuple[tuple[str, str, int], ...]] = ()
    # Statements run once a throwaway server with :attr:`instrumentation` accepts connections.
    instrumentation_sql: ClassVar[tuple[str, ...]] = ()
    # What :attr:`instrumentation` was measured to cost (bench/statements_overhead.py, BENCHMARKS.md), in words
    # for the report: a throwaway server's statement section says it next to the evidence it buys.
    instrumentation_cost: ClassVar[str] = ""
    # What the statement digests' timer covers, as a key (two engines' statement times are compared as equals
    # only when their keys match) and in words for the report.
    statement_timer_scope: ClassVar[str] = ""
    statement_timer_text: ClassVar[str] = ""
    # Sorts, hashes and temporary tables that outgrew memory (reports.rules.spills): (key in stats_series,
    # words) of counters of spill events, each recorded one counts; a bytes counter ("" = none) and the
    # settings that size the memory they outgrew, as advice.
    spill_counters: ClassVar[tuple[tuple[str, str], ...]] = ()
    spill_bytes_counter: ClassVar[str] = ""
    spill_settings: ClassVar[str] = ""
    # (rows read by table scans, scans) counters of stats_series, server-wide, for reports.rules.scans where the
    # engine has no per-table scan source of its own (() = it has one: PostgreSQL's collectors.pg.tables).
    scan_counters: ClassVar[tuple[str, ...]] = ()
    # What an old transaction holds back from cleanup (reports.rules.oldxact), and what to do about it.
    cleanup_backlog: ClassVar[str] = ""
    old_transaction_advice: ClassVar[str] = ""
    last_statement_hint: ClassVar[str] = ""
    per_table_io_hint: ClassVar[str] = ""  # why the buffer pool's hit ratio per table is not read ("" = it is)  # why another session's last statement may not be visible
    # Connection churn (reports.rules.churn): the stats_series counter of connections the server accepted
    # ("" = none), where it comes from, what each new connection costs the server, and (MySQL) the counter of
    # threads created for them (a new connection served from the thread cache creates none).
    # What a session active with no wait event, neither on a CPU nor on a run queue, may be waiting for that
    # the server does not name (reports.model.accounting_gaps), and what would name it.
    unnamed_waits: ClassVar[str] = "a wait the server does not instrument"
    connection_counter: ClassVar[str] = ""
    connection_counter_from: ClassVar[int] = 0  # the server version (version_num) that first has it
    connection_counter_older: ClassVar[str] = ""  # what shows connections on an older server
    # The collector behind each kind of evidence (reports.views.causes_view: which causes a run could check), and
    # what makes a source that did not run or answer run (when its probe gave no hint; %s: "collectors on").
    cause_sources: ClassVar[dict[str, str]] = {}
    source_remedies: ClassVar[dict[str, str]] = {}
    connection_counter_source: ClassVar[str] = ""
    backend_start: ClassVar[str] = ""
    thread_create_counter: ClassVar[str] = ""
    # Profiles (reports.rules.cpu): regular expressions, each matched at the start of one stack frame, of its
    # parser and planner frames, of the parser's alone ("" = not told apart), and of execution frames that sit
    # below a plan frame and are not planning ("" = none); the advice when parse/plan takes a large share of the
    # CPU, and the stats_series counter of prepared executions shown per transaction beside it ("" = none).
    parse_plan_frames: ClassVar[str] = ""
    parse_frames: ClassVar[str] = ""
    execution_frames: ClassVar[str] = ""
    parse_plan_advice: ClassVar[str] = ""
    prepared_executions_counter: ClassVar[str] = ""
    # Background work placed inside a measured window (reports.rules.noise): stats_series counters of finished
    # checkpoints, alternatives of which the first whose first key is recorded wins (the last when none is;
    # () = no discrete checkpoint to place), and the key prefix of its autovacuum workers' I/O ("" = none).
    checkpoint_counters: ClassVar[tuple[tuple[str, ...], ...]] = ()
    autovacuum_io_prefix: ClassVar[str] = ""
    # Who sampled its waits, in words, by the waits records' ``source`` ("" = any other source).
    wait_samplers: ClassVar[dict[str, str]] = {}
    # The native executor (workloads.native): the placeholders of its prepared statements ("numbered": $1,
    # "qmarks": ?), and whether its opener sets the session's isolation at connect (no SET statement after).
    placeholder_style: ClassVar[str] = ""
    isolation_at_connect: ClassVar[bool] = False
    # A watched server (workloads.watch): the statements its counters are read with (watch_sql/<sql_folder>/).
    watch_reads: ClassVar[tuple[str, ...]] = ()
    # A workload's tables (workloads.tables, workloads.load): what holds them (``CREATE <load_container> dbdiag``),
    # the column types of the ``{ts}`` and ``{autoinc}`` tokens of a table's DDL, and what follows each CREATE TABLE.
    load_container: ClassVar[str] = ""
    timestamp_type: ClassVar[str] = ""
    autoinc_type: ClassVar[str] = ""
    table_options: ClassVar[str] = ""

    def instrumentation_for(self, version_num: int) -> list[tuple[str, str]]:
        """The (setting, value) pairs of :attr:`instrumentation` a server of ``version_num`` has."""
        return [(k, v) for k, v, oldest in self.instrumentation if oldest <= version_num]

    # ------------------------------------------------------------------ identity and names

    def __repr__(self) -> str:
        return f"<Engine {self.name}>"

    def __str__(self) -> str:
        return self.name

    def knows(self, name: str) -> bool:
        """Whether ``name`` (engine, alias or product name, any case) means this engine."""
        n = name.strip().lower()
        return n == self.name or n in self.aliases

    def version_text(self, version_num: int) -> str:
        """A version number as people write it (``150020`` -> ``"15.20"``, ``80030`` -> ``"8.0.30"``)."""
        return f"{version_num // 10000}.{version_num // 100 % 100}.{version_num % 100}"

    def release_text(self, version_num: int) -> str:
        """How people name the release that first had a feature (PostgreSQL: ``160000`` -> ``"16"``)."""
        return self.version_text(version_num)

    # ------------------------------------------------------------------ wait taxonomy

    def wait_class(self, raw: str) -> str:
        """The class (one of :data:`WAIT_CLASSES`) of one raw wait-profile key of this engine's sampler.

        ``CPU`` (running, or a wait the server does not instrument) and ``Lock:*`` mean the same on every
        engine; the rest is the engine's own vocabulary (:meth:`wait_class_of`). The raw key stays the detail.
        """
        k = raw.strip().lower()
        if k == "cpu":
            return "cpu"
        if k.startswith("lock:"):
            return "lock"
        return self.wait_class_of(k)

    def wait_class_of(self, key: str) -> str:
        """Class of a lower-case key that is neither ``cpu`` nor ``lock:*``; engines override."""
        return "other"

    def wait_label(self, cls: str) -> str:
        """A wait class in this engine's words, for people: ``"commit flush (WAL)"``."""
        words = _WAIT_WORDS.get(cls, cls)
        return f"{words} ({self.log_name})" if cls == "commit_flush" and self.log_name else words

    # ------------------------------------------------------------------ drivers and errors

    def pick_driver(self) -> DriverInfo:
        """The fastest installed Python driver for this engine; DbError when none is."""
        for dist, mod in self.drivers:
            try:
                m = importlib.import_module(mod)
            except ImportError:
                continue
            try:
                version = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                version = str(getattr(m, "__version__", "")).split(" ")[0]
            return DriverInfo(dist, version, m)
        raise DbError(f"no {self.name} driver installed: pip install {self.driver_hint}", kind="connect")

    def error_kind(self, exc: BaseException) -> tuple[str, str, str]:
        """(code, first line of the message, kind) of a driver exception."""
        raise NotImplementedError

    def map_error(self, exc: BaseException, where: str = "") -> DbError:
        """Turn a driver exception into a DbError with code, kind and one clear line."""
        if isinstance(exc, DbError):
            return exc
        code, msg, kind = self.error_kind(exc)
        hint = _HINTS.get(kind, "")
        prefix = f"{where}: " if where else ""
        return DbError(f"{prefix}{msg}" + (f" ({hint})" if hint and hint not in msg else ""), code=code, kind=kind)

    @contextlib.contextmanager
    def translate_errors(self, where: str = "") -> Iterator[None]:
        """Re-raise any driver exception inside the block as a DbError (bugs pass through)."""
        try:
            yield
        except DbError:
            raise
        except Exception as e:
            if type(e).__module__.split(".")[0] in _DRIVER_MODULES or isinstance(e, (OSError, ConnectionError)):
                raise self.map_error(e, where) from None
            raise

    # ------------------------------------------------------------------ connections

    def connect_kwargs(self, target: "Target", driver: DriverInfo, autocommit: bool, timeout_s: int,
                       application_name: str) -> dict[str, Any]:
        """Keyword arguments for ``driver.module.connect``."""
        raise NotImplementedError

    def credentials_text(self, target: "Target") -> str:
        """Where the target's password comes from, for run.json: never the password, never a file's contents."""
        return "password in the DSN (***)" if target.password is not None else "no password"

    def connect(self, target: "Target", *, autocommit: bool = True, timeout_s: int = 5,
                application_name: str = "dbdiag", driver: DriverInfo | None = None) -> Any:
        """Open a driver connection; ``timeout_s`` bounds the connect (seconds). Raises DbError."""
        drv = driver or self.pick_driver()
        with self.translate_errors(target.label):
            kw = self.connect_kwargs(target, drv, autocommit, timeout_s, application_name)
            conn = self.driver_connect(drv, kw)
            if "autocommit" not in kw:  # a driver whose connect() cannot take it
                conn.autocommit = autocommit
            return conn

    def driver_connect(self, driver: DriverInfo, kw: dict[str, Any]) -> Any:
        """``driver.module.connect(**kw)``; an engine overrides it where a driver needs more than its arguments."""
        return driver.module.connect(**kw)

    def prepare_rows(self, conn: Any, driver: DriverInfo, sql: str, params: Any = None) -> Callable[[], Rows] | None:
        """``sql`` with ``params`` bound once, as a callable that runs it and returns its rows as dicts, cheaper
        a call than a cursor (the 10 Hz samplers: :meth:`diag.core.db.Session.prepared`); None where the driver has
        no such way (the caller then runs a cursor each time). Driver errors pass as the driver raises them."""
        return None

    def text_rows(self, conn: Any, driver: DriverInfo, sql: str) -> list[tuple[str | None, ...]] | None:
        """One statement's rows as tuples of text (None for NULL), read more cheaply than through a cursor (the
        MySQL samplers: :meth:`diag.db.Session.text_rows`); None where the driver has no such way (the caller
        then uses a cursor). Driver errors pass as the driver raises them."""
        return None

    def identify(self, query: Any) -> Identity:
        """Product and version; ``query(sql)`` runs one statement and returns rows as dicts."""
        raise NotImplementedError

    def statement_timeout_sql(self, product: str, ms: int) -> str:
        """The SET statement that bounds each statement of a session to ``ms`` milliseconds."""
        raise NotImplementedError

    def read_key_settings(self, query: Any) -> dict[str, str]:
        """:attr:`key_settings` as name -> value text (with unit where the server has one)."""
        raise NotImplementedError

    def connection_room(self, query: Any) -> ConnectionRoom:
        """How many more connections this session's user may open (``query`` as for :meth:`identify`);
        the asking session itself is not counted as in use."""
        raise NotImplementedError
