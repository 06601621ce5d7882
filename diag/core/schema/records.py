"""run.json (run and targets), results.json rows and findings.json entries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from diag.core.engines import Engine, engine_for
from diag.core.schema.base import FORMAT, NUM, as_object, get_field, str_list, unknown_keys
from diag.core.schema.flush import FlushCapabilityInfo
from diag.core.schema.metrics import MetricDeclarations
from diag.core.schema.repeats import RepeatSummary, TpsInterval, check_repeat_fields, num_list
from diag.core.schema.profile import StepProfile
from diag.core.schema.statements import StepStatements
from diag.core.schema.watch import WatchWindow
from diag.core.schema.workers import StepWorkers


# --------------------------------------------------------------------------- targets and the run


_TARGET_STR = ("label", "engine", "product", "version", "driver", "dsn", "host", "socket", "user", "database",
               "server_binary", "data_directory")
_TARGET_INT = ("port", "version_num", "server_pid")
_TARGET_BOOL = ("embedded", "local", "throwaway")


@dataclass(frozen=True)
class TargetInfo:
    """run.json ``targets[]``: one database target as identified at the start of the run (no password)."""

    label: str
    engine: str = ""  # the engine's name ("postgres", "mysql"): see :attr:`dbms`
    product: str = ""  # "postgresql", "mysql" or "mariadb"
    version: str = ""
    version_num: int | None = None
    driver: str = ""
    dsn: str = ""
    host: str | None = None
    port: int | None = None
    socket: str | None = None
    user: str = ""
    database: str = ""
    embedded: bool = False
    local: bool = False
    throwaway: bool = False
    server_pid: int | None = None
    server_binary: str | None = None
    data_directory: str | None = None
    host_metrics: str | None = None  # node_exporter URL of the target's host (--host-metrics), when given
    ssh: str | None = None  # user@host whose perf profiles the server over ssh (--ssh), when given
    credentials: str | None = None  # where the password came from ("passfile ~/.pgpass ..."), never the password
    settings: Mapping[str, Any] = field(default_factory=dict)  # key settings as the server reports them
    storage: Mapping[str, Any] = field(default_factory=dict)  # the data directory's device facts
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dbms(self) -> Engine:
        """The engine object (raises UsageError for an unknown engine name)."""
        return engine_for(self.engine or self.product)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in (*_TARGET_STR, *_TARGET_INT, *_TARGET_BOOL)}
        if self.host_metrics is not None:  # only where given: older bundles round-trip unchanged
            d["host_metrics"] = self.host_metrics
        if self.ssh is not None:
            d["ssh"] = self.ssh
        if self.credentials is not None:
            d["credentials"] = self.credentials
        return {**dict(self.extra), **d, "settings": dict(self.settings), "storage": dict(self.storage)}

    @classmethod
    def from_dict(cls, d: Any, where: str = "target") -> TargetInfo:
        d = as_object(d, where)
        kw: dict[str, Any] = {k: get_field(d, k, (str,), where, cls.__dataclass_fields__[k].default) for k in _TARGET_STR}
        kw["label"] = get_field(d, "label", (str,), where, required=True)
        kw.update({k: get_field(d, k, (int,), where) for k in _TARGET_INT})
        kw.update({k: get_field(d, k, (bool,), where, False) for k in _TARGET_BOOL})
        kw["host_metrics"] = get_field(d, "host_metrics", (str,), where)
        kw["ssh"] = get_field(d, "ssh", (str,), where)
        kw["credentials"] = get_field(d, "credentials", (str,), where)
        kw["settings"] = get_field(d, "settings", (dict,), where, {})
        kw["storage"] = get_field(d, "storage", (dict,), where, {})
        return cls(**kw, extra=unknown_keys(d, (*_TARGET_STR, *_TARGET_INT, *_TARGET_BOOL, "host_metrics", "ssh",
                                                "credentials", "settings", "storage")))


_RUN_KNOWN = ("format", "tool", "version", "command", "status", "error", "started", "ended", "host", "workloads",
              "options", "targets", "collectors", "flush_capability", "metrics")


@dataclass(frozen=True)
class RunInfo:
    """run.json: what ran, where, with which options, how it ended, and what the collectors declared."""

    format: int = FORMAT
    tool: str = "dbdiag"
    version: str = ""
    command: tuple[str, ...] = ()  # redacted argv
    status: str = ""  # "running", "complete", "interrupted", "failed"
    error: str = ""
    started: float | None = None  # Unix s
    ended: float | None = None  # Unix s
    host: Mapping[str, Any] = field(default_factory=dict)
    workloads: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    targets: tuple[TargetInfo, ...] = ()
    collectors: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # probe results by collector key
    flush_capability: FlushCapabilityInfo | None = None
    metrics: MetricDeclarations | None = None  # None: not declared (a format-1 bundle before migration)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def target(self, label: str) -> TargetInfo | None:
        return next((t for t in self.targets if t.label == label), None)

    @property
    def planned_s(self) -> float | None:
        """The seconds each step was to measure (``-T``, ``options.duration_s``); None when not recorded."""
        v = self.options.get("duration_s")
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {**dict(self.extra), "format": self.format, "tool": self.tool, "version": self.version,
                             "command": list(self.command), "status": self.status, "error": self.error,
                             "started": self.started, "ended": self.ended, "host": dict(self.host),
                             "workloads": list(self.workloads), "options": dict(self.options),
                             "targets": [t.to_dict() for t in self.targets],
                             "collectors": {k: dict(v) for k, v in self.collectors.items()}}
        if self.flush_capability is not None:
            d["flush_capability"] = self.flush_capability.to_dict()
        if self.metrics is not None:
            d["metrics"] = self.metrics.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Any, where: str = "run.json") -> RunInfo:
        d = as_object(d, where)
        fc = d.get("flush_capability")
        metrics = d.get("metrics")
        return cls(
            format=get_field(d, "format", (int,), where, 1), tool=get_field(d, "tool", (str,), where, "dbdiag"),
            version=get_field(d, "version", (str,), where, ""), command=str_list(d, "command", where),
            status=get_field(d, "status", (str,), where, ""), error=get_field(d, "error", (str,), where, ""),
            started=get_field(d, "started", NUM, where), ended=get_field(d, "ended", NUM, where),
            host=get_field(d, "host", (dict,), where, {}), workloads=str_list(d, "workloads", where),
            options=get_field(d, "options", (dict,), where, {}),
            targets=tuple(TargetInfo.from_dict(t, f"{where}: targets[{i}]")
                          for i, t in enumerate(get_field(d, "targets", (list,), where, []))),
            collectors=get_field(d, "collectors", (dict,), where, {}),
            flush_capability=FlushCapabilityInfo.from_dict(fc, f"{where}: flush_capability") if fc else None,
            metrics=MetricDeclarations.from_dict(metrics, f"{where}: metrics") if metrics is not None else None,
            extra=unknown_keys(d, _RUN_KNOWN))


# --------------------------------------------------------------------------- results and findings


# scale is a number, not an integer: the library and the tests run fractional scales (0.05 of TPC-C's warehouse).
_ROW_NUM = ("measured_s", "tps", "qps", "client_cpu_pct", "client_cpu_s", "t_start", "t_end", "scale")
_ROW_INT = ("transactions", "retries", "reconnects")
# What cut a step short: {t, after_s, client, code, message[, probe]}; a stuck statement adds the server's view
# of its session (clients, session, state, wait_type, wait, query, seconds).
_ROW_CUT = ("server_lost", "aborted", "stuck")
_ROW_STR = ("engine", "driver", "protocol", "isolation")
_ROW_DICT = ("latency_ms", "errors", "error_samples")
# The clients' start-up before the window and, under --connect-per-transaction, the connect inside each
# transaction (workloads.steps.stepresult: Startup, connect_fields); absent (None) in rows written before them.
_ROW_SCALE_NUM = ("startup_s", "connects_per_s", "connect_ms_per_txn", "connect_share_of_latency",
                  "connects_per_s_measured")
_ROW_PARTS = ("table_scans", "table_io", "old_transaction", "source", "profile_tail", "flush_tail")
_ROW_REPEAT = ("interval_tps", "tps_ci", "repeats", "repeat", "repeat_count", "representative_repeat")


@dataclass(frozen=True)
class ResultRow:
    """results.json ``results[]``: one (target, workload, clients) step as the workload driver measured it.

    Times are Unix s (``t_start``/``t_end`` bound the measured window, warmup
    excluded); ``latency_ms`` holds p50/p95/p99/p999/max in ms; ``client_cpu_s``
    is the clients' CPU seconds over the window; ``measured_s`` the seconds actually measured, the row's one
    form of them (less than the planned ``-T``, run.json's ``options.duration_s``, when ``complete`` is False:
    cut by Ctrl-C, a lost server or ``--on-error abort``; the loader fills it from ``duration_s`` for rows
    before format 4). Fields added by workloads
    (TPC-C ``nopm``) or step plugins (``profile``) that have no field here stay in ``extra``.
    """

    target: str = ""
    workload: str = ""
    clients: int | None = None
    engine: str = ""  # the product: "postgresql", "mysql", "mariadb"
    transactions: int | None = None
    tps: float | None = None
    qps: float | None = None
    latency_ms: Mapping[str, float] = field(default_factory=dict)
    errors: Mapping[str, int] = field(default_factory=dict)
    error_samples: Mapping[str, Any] = field(default_factory=dict)
    retries: int | None = None
    reconnects: int | None = None  # lost connections the clients re-established
    driver: str = ""
    protocol: str = ""
    isolation: str = ""
    scale: float | None = None
    client_cpu_pct: float | None = None  # percent of all the machine's CPUs
    client_cpu_s: float | None = None
    t_start: float | None = None
    t_end: float | None = None
    interrupted: bool = False
    measured_s: float | None = None
    complete: bool | None = None  # None: not recorded (older bundles), read as complete unless interrupted
    server_lost: Mapping[str, Any] | None = None  # the server went away: when, which client, why
    aborted: Mapping[str, Any] | None = None  # --on-error abort ended the step: the error
    stuck: Mapping[str, Any] | None = None  # a statement did not return: what the server showed it waiting for
    profile: Mapping[str, Any] | None = None  # the step's perf profile summary (collectors.profile)
    # Native executor steps: {statement text: {p50, p95, p99, p999, max (ms), count}}, from the clients'
    # per-statement latencies (the Python loop measures transactions only: absent then).
    statement_latency_ms: Mapping[str, Any] | None = None
    # Repeats and the interval (format 3, diag.core.schema.repeats): per-interval tps, --repeat's repeats.
    interval_tps: tuple[float, ...] = ()
    tps_ci: Mapping[str, Any] | None = None
    repeats: tuple[Mapping[str, Any], ...] = ()
    repeat: int | None = None  # a single repeat's row (as the driver wrote it, before combining)
    repeat_count: int | None = None
    representative_repeat: int | None = None
    # The step's statement digests and plans (collectors.statements), shape: diag.core.schema.statements.StepStatements
    statements: Mapping[str, Any] | None = None
    # Start-up (s from the first fork to the last client ready; clients ready per s; each client's connect
    # p50 / max in ms), the clients that ran when fewer than ``clients`` started, and the connect of
    # --connect-per-transaction (ms per transaction, its share of the mean latency, connections per s).
    startup_s: float | None = None
    connects_per_s: float | None = None
    connect_ms: Mapping[str, float] | None = None
    clients_ran: int | None = None
    connect_per_transaction: bool | None = None
    connect_ms_per_txn: float | None = None
    connect_share_of_latency: float | None = None
    connects_per_s_measured: float | None = None
    # What step sources added (collectors.pg.tables, collectors oldest transaction): per-table scans over the
    # window {t0, t1, tables}, per-table block I/O [{table, heap_blks_read, ...}], the oldest open transaction.
    table_scans: Mapping[str, Any] | None = None
    # The load's run-on after the measured part, where profiles record (workloads.steptail): t_start, t_end,
    # seconds, transactions, tps, tps_ratio (the tail's rate over the step's).
    profile_tail: Mapping[str, Any] | None = None
    # Flush calls counted in that tail (collectors.flush_tail): t_start, t_end, seconds, counts {key: calls}.
    flush_tail: Mapping[str, Any] | None = None
    table_io: Sequence[Mapping[str, Any]] | None = None
    old_transaction: Mapping[str, Any] | None = None
    source: str | None = None  # "server": a dbdiag watch window, counted from the server's counters
    extra: Mapping[str, Any] = field(default_factory=dict)

    _FIELDS = ("target", "workload", "clients", *_ROW_STR, *_ROW_NUM, *_ROW_INT, *_ROW_DICT, "interrupted",
               "complete", *_ROW_CUT, "profile", "statements", *_ROW_REPEAT, "statement_latency_ms",
               *_ROW_SCALE_NUM, "connect_ms", "clients_ran", "connect_per_transaction", *_ROW_PARTS)

    @property
    def interval(self) -> TpsInterval | None:
        """:attr:`tps_ci` as a typed record (None for rows written before format 3)."""
        return TpsInterval.from_dict(self.tps_ci, "tps_ci") if self.tps_ci is not None else None

    @property
    def repeat_summaries(self) -> tuple[RepeatSummary, ...]:
        """:attr:`repeats` as typed records (empty for a step run once)."""
        return tuple(RepeatSummary.from_dict(r, f"repeats[{i}]") for i, r in enumerate(self.repeats))

    @property
    def step_profile(self) -> StepProfile | None:
        """:attr:`profile` as a typed record (None when the step was not profiled)."""
        return StepProfile.from_dict(self.profile, "profile") if self.profile is not None else None

    @property
    def step_statements(self) -> StepStatements | None:
        """:attr:`statements` as a typed record (None when the step has none)."""
        return StepStatements.from_dict(self.statements, "statements") if self.statements is not None else None

    @property
    def step_workers(self) -> StepWorkers | None:
        """The step's Dask worker shares (``--workers``) as a typed record; None for a local step."""
        return StepWorkers.from_row(self.extra, "workers")

    @property
    def watch(self) -> WatchWindow | None:
        """The watch part of a ``dbdiag watch`` window's row (``source`` "server") as a typed record; None for a
        step dbdiag drove."""
        return WatchWindow.from_row({**self.extra, "source": self.source}, "watch") if self.source == "server" else None

    @property
    def key(self) -> tuple[str, str, int | None]:
        """(target, workload, clients): how series, findings and the report name the step."""
        return (self.target, self.workload, self.clients)

    @property
    def is_complete(self) -> bool:
        """The step ran its planned time (a row without ``complete`` is, unless interrupted)."""
        return not self.interrupted if self.complete is None else self.complete

    @property
    def p95_ms(self) -> float | None:
        v = self.latency_ms.get("p95")
        return v if isinstance(v, NUM) else None

    def to_dict(self) -> dict[str, Any]:
        d = {**dict(self.extra), **{k: getattr(self, k) for k in self._FIELDS}}
        for k in _ROW_DICT:
            d[k] = dict(d[k])
        if not self.interrupted:
            del d["interrupted"]
        d["interval_tps"], d["repeats"] = list(self.interval_tps), [dict(r) for r in self.repeats]
        return {k: v for k, v in d.items() if v is not None and not (k in ("interval_tps", "repeats") and not v)}

    @classmethod
    def from_dict(cls, d: Any, where: str = "result") -> ResultRow:
        d = as_object(d, where)
        # Nothing is required: a row cut short or written by an older driver still loads.
        kw: dict[str, Any] = {"target": get_field(d, "target", (str,), where, ""),
                              "workload": get_field(d, "workload", (str,), where, ""),
                              "clients": get_field(d, "clients", (int,), where)}
        kw.update({k: get_field(d, k, NUM, where) for k in _ROW_NUM})
        kw.update({k: get_field(d, k, (int,), where) for k in _ROW_INT})
        kw.update({k: get_field(d, k, (str,), where, "") for k in _ROW_STR})
        kw.update({k: get_field(d, k, (dict,), where, {}) for k in _ROW_DICT})
        kw["interrupted"] = get_field(d, "interrupted", (bool,), where, False)
        kw["complete"] = get_field(d, "complete", (bool,), where)
        kw.update({k: get_field(d, k, (dict,), where) for k in _ROW_CUT})
        kw["profile"] = get_field(d, "profile", (dict,), where)
        if kw["profile"] is not None:  # shape: diag.core.schema.profile.StepProfile
            StepProfile.from_dict(kw["profile"], f"{where}: profile")
        kw["statement_latency_ms"] = get_field(d, "statement_latency_ms", (dict,), where)
        kw.update({k: get_field(d, k, NUM, where) for k in _ROW_SCALE_NUM})
        kw["connect_ms"] = get_field(d, "connect_ms", (dict,), where)
        kw["clients_ran"] = get_field(d, "clients_ran", (int,), where)
        kw["connect_per_transaction"] = get_field(d, "connect_per_transaction", (bool,), where)
        kw["statements"] = get_field(d, "statements", (dict,), where)
        if kw["statements"] is not None:  # validated here, so a bad record names its row when the bundle loads
            StepStatements.from_dict(kw["statements"], f"{where}: statements")
        WatchWindow.from_row(d, where)  # a watch window: its server-side part is validated here (kept in extra)
        StepWorkers.from_row(d, where)  # a step run on Dask workers: its shares are validated here (kept in extra)
        check_repeat_fields(d, where)
        kw.update({k: get_field(d, k, (dict,), where) for k in ("table_scans", "old_transaction", "profile_tail",
                                                                   "flush_tail")})
        kw["table_io"] = get_field(d, "table_io", (list,), where)
        kw["source"] = get_field(d, "source", (str,), where)
        kw["interval_tps"] = num_list(d, "interval_tps", where)
        kw["tps_ci"] = get_field(d, "tps_ci", (dict,), where)
        kw["repeats"] = tuple(get_field(d, "repeats", (list,), where, []))
        kw.update({k: get_field(d, k, (int,), where) for k in ("repeat", "repeat_count", "representative_repeat")})
        return cls(**kw, extra=unknown_keys(d, cls._FIELDS))


_FINDING_KNOWN = ("category", "severity", "target", "title", "evidence", "advice", "impact", "workload", "clients",
                  "extra")


@dataclass(frozen=True)
class FindingRecord:
    """findings.json ``findings[]``: one stored finding (the shape of ``reports.model.steps.Finding.to_dict()``).

    ``impact`` (0..1) ranks findings across categories: see :mod:`reports.rules.base`.
    ``workload``/``clients`` are None for a finding about the whole target.
    """

    category: str
    severity: str  # "critical", "warning", "info"
    target: str
    title: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    advice: str = ""
    impact: float = 0.0
    workload: str | None = None
    clients: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_durability(self) -> bool:
        return self.category.startswith("durability")

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "severity": self.severity, "target": self.target, "title": self.title,
                "evidence": dict(self.evidence), "advice": self.advice, "impact": self.impact,
                "workload": self.workload, "clients": self.clients, "extra": dict(self.extra)}

    @classmethod
    def from_dict(cls, d: Any, where: str = "finding") -> FindingRecord:
        d = as_object(d, where)
        return cls(category=get_field(d, "category", (str,), where, ""), severity=get_field(d, "severity", (str,), where, ""),
                   target=get_field(d, "target", (str,), where, ""), title=get_field(d, "title", (str,), where, ""),
                   evidence=get_field(d, "evidence", (dict,), where, {}), advice=get_field(d, "advice", (str,), where, ""),
                   impact=get_field(d, "impact", NUM, where, 0.0), workload=get_field(d, "workload", (str,), where),
                   clients=get_field(d, "clients", (int,), where),
                   extra={**get_field(d, "extra", (dict,), where, {}), **unknown_keys(d, _FINDING_KNOWN)})
