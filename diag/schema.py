"""The run bundle's records, defined once: what the writer stores and what the loader reads back.

Each record is a frozen dataclass with ``to_dict()`` (the JSON stored in the
bundle) and ``from_dict(d, where)`` (tolerant of keys it does not know, which it
keeps in ``extra`` so nothing is lost on a round trip; a value of the wrong type
raises :class:`BundleFormatError` naming the file and field).

Format history (run.json ``format``; a bundle without it is format 1):

1. everything before the key existed: no metric declarations in run.json.
2. run.json carries ``format`` and ``metrics`` = ``{SERIES: [MetricDecl...]}``,
   the collectors' declared metrics, keyed by series name
   (``<collector>--<target label>``), so reports know counter from gauge.

The loader (:func:`diag.bundle.load_bundle`) migrates older formats in memory;
a bundle of a newer format than :data:`FORMAT` is refused with one line.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from diag.engines import Engine, engine_for
from diag.errors import DiagError

FORMAT = 2  # the bundle format this code writes; see the module docstring for the history
FORMAT_KEY = "format"
METRIC_KINDS = ("counter", "gauge")
FLUSH_METHOD = "fdatasync, one 8 kB write"  # what a stored flush capability measured

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class BundleFormatError(DiagError):
    """A bundle file does not have the shape this dbdiag reads (says which file, field and value)."""


def safe_name(text: str) -> str:
    """A file-name-safe form of a label or collector name (how series files are named)."""
    return _SAFE.sub("_", text).strip("_") or "x"


# --------------------------------------------------------------------------- field readers

_NUM = (int, float)


def _typename(kinds: tuple[type, ...]) -> str:
    names = {int: "an integer", float: "a number", str: "a string", bool: "true/false", dict: "an object",
             list: "a list"}
    return " or ".join(names.get(k, k.__name__) for k in kinds if not (k is int and float in kinds))


def _get(d: Mapping[str, Any], key: str, kinds: tuple[type, ...], where: str, default: Any = None,
         required: bool = False) -> Any:
    """``d[key]`` checked against ``kinds``; None/absent gives ``default`` (or an error when ``required``)."""
    v = d.get(key)
    if v is None:
        if required:
            raise BundleFormatError(f"{where}: {key} is missing")
        return default
    # JSON true/false are Python bools, which are ints: never accept one as a number.
    if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
        raise BundleFormatError(f"{where}: {key} should be {_typename(kinds)}, not {type(v).__name__} {v!r:.60}")
    return v


def _obj(d: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(d, Mapping):
        raise BundleFormatError(f"{where} should be an object, not {type(d).__name__}")
    return d


def _extra(d: Mapping[str, Any], known: Sequence[str]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in known}


def _strs(d: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    items = _get(d, key, (list, tuple), where, [])
    if not all(isinstance(x, str) for x in items):
        raise BundleFormatError(f"{where}: {key} should be a list of strings")
    return tuple(items)


# --------------------------------------------------------------------------- metric declarations


@functools.lru_cache(maxsize=1024)
def _pattern(name: str) -> re.Pattern[str]:
    """Regex of a declared name: ``<anything>`` is a placeholder, ``{a,b}`` an alternative."""
    out = []
    for part in re.split(r"(<[^>]*>|\{[^}]*\})", name):
        if part.startswith("<") and part.endswith(">"):
            out.append(".+")
        elif part.startswith("{") and part.endswith("}"):
            out.append("(?:" + "|".join(re.escape(p.strip()) for p in part[1:-1].split(",")) + ")")
        else:
            out.append(re.escape(part))
    return re.compile("".join(out))


@dataclass(frozen=True)
class MetricDecl:
    """One metric a collector declares: name (may hold ``<placeholders>``), unit, counter or gauge.

    A counter is monotonic and raw (turn it into a rate with :mod:`collectors.rates`);
    a gauge is a value as it stands.
    """

    name: str
    unit: str
    kind: Literal["counter", "gauge"]
    description: str = ""

    @property
    def is_pattern(self) -> bool:
        return "<" in self.name or "{" in self.name

    def matches(self, key: str) -> bool:
        """True when record field ``key`` is this metric (exactly, or through its placeholders)."""
        return key == self.name or (self.is_pattern and _pattern(self.name).fullmatch(key) is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "unit": self.unit, "kind": self.kind, "description": self.description}

    @classmethod
    def from_dict(cls, d: Any, where: str = "metric") -> MetricDecl:
        d = _obj(d, where)
        kind = _get(d, "kind", (str,), where, required=True)
        if kind not in METRIC_KINDS:
            raise BundleFormatError(f"{where}: kind should be counter or gauge, not {kind!r:.40}")
        return cls(name=_get(d, "name", (str,), where, required=True), unit=_get(d, "unit", (str,), where, ""),
                   kind=kind, description=_get(d, "description", (str,), where, ""))


@dataclass(frozen=True)
class MetricDeclarations:
    """run.json ``metrics``: per series name, the declared metrics of the collector that wrote it."""

    series: Mapping[str, tuple[MetricDecl, ...]] = field(default_factory=dict)

    def for_series(self, name: str) -> tuple[MetricDecl, ...]:
        """Declarations of series ``name`` (a file stem or a raw key); a series of the same collector stands in."""
        if name in self.series:
            return self.series[name]
        for key, decls in self.series.items():
            if safe_name(key) == name:
                return decls
        collector = name.split("--", 1)[0]
        for key, decls in self.series.items():
            if key.split("--", 1)[0] == collector:
                return decls
        return ()

    def find(self, series: str, key: str) -> MetricDecl | None:
        """The declaration of field ``key`` of ``series``: an exact name first, else the most specific pattern."""
        decls = self.for_series(series)
        for m in decls:
            if m.name == key:
                return m
        hits = [m for m in decls if m.matches(key)]
        return max(hits, key=lambda m: len(_pattern(m.name).pattern), default=None)

    def kind(self, series: str, key: str) -> str | None:
        """"counter", "gauge", or None when ``key`` of ``series`` is not declared."""
        m = self.find(series, key)
        return m.kind if m else None

    def merged(self, other: MetricDeclarations) -> MetricDeclarations:
        """These declarations, with ``other``'s for series these do not declare."""
        return MetricDeclarations({**dict(other.series), **dict(self.series)})

    def to_dict(self) -> dict[str, Any]:
        return {k: [m.to_dict() for m in v] for k, v in sorted(self.series.items())}

    @classmethod
    def from_dict(cls, d: Any, where: str = "metrics") -> MetricDeclarations:
        d = _obj(d, where)
        out: dict[str, tuple[MetricDecl, ...]] = {}
        for k, v in d.items():
            if not isinstance(v, list):
                raise BundleFormatError(f"{where}.{k} should be a list of metric declarations")
            out[str(k)] = tuple(MetricDecl.from_dict(m, f"{where}.{k}[{i}]") for i, m in enumerate(v))
        return cls(out)


# --------------------------------------------------------------------------- flush capability


@dataclass(frozen=True)
class FlushDevice:
    """One device's fsync test: F (flushes/s, None when the test gave no rate), what it measured, the test.

    ``fsync_test`` is ``collectors.fsync_test.FsyncTestResult.to_dict()``; it is read
    back by that class (a sources-layer type core does not know).
    """

    ops_per_s: float | None
    method: str = FLUSH_METHOD
    fsync_test: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_fsync_test(cls, test: Mapping[str, Any]) -> FlushDevice:
        """The entry for one fsync test (``FsyncTestResult.to_dict()``): F is its best fdatasync rate, if any."""
        ops = test.get("best_flush_capability_ops_per_s")
        return cls(ops if isinstance(ops, _NUM) and not isinstance(ops, bool) else None, FLUSH_METHOD, dict(test))

    def to_dict(self) -> dict[str, Any]:
        return {"ops_per_s": self.ops_per_s, "method": self.method, "fsync_test": dict(self.fsync_test)}

    @classmethod
    def from_dict(cls, d: Any, where: str = "device") -> FlushDevice:
        d = _obj(d, where)
        return cls(ops_per_s=_get(d, "ops_per_s", _NUM, where), method=_get(d, "method", (str,), where, "fdatasync"),
                   fsync_test=_get(d, "fsync_test", (dict,), where, {}))


@dataclass(frozen=True)
class FlushTarget:
    """Which device a target's data directory is on (``device`` None when its test could not run: ``error``)."""

    device: str | None
    directory: str | None = None
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "directory": self.directory, "error": self.error}

    @classmethod
    def from_dict(cls, d: Any, where: str = "target") -> FlushTarget:
        d = _obj(d, where)
        return cls(device=_get(d, "device", (str,), where) or None, directory=_get(d, "directory", (str,), where),
                   error=_get(d, "error", (str,), where, ""))


@dataclass(frozen=True)
class FlushCapabilityInfo:
    """run.json ``flush_capability``: one fsync test per device, and each target's device."""

    devices: Mapping[str, FlushDevice] = field(default_factory=dict)
    targets: Mapping[str, FlushTarget] = field(default_factory=dict)

    def of(self, label: str) -> tuple[FlushTarget, FlushDevice | None]:
        """Target ``label``'s entry and its device's test (None when not tested)."""
        tgt = self.targets.get(label) or FlushTarget(None, None, "no fsync test stored for this target")
        return tgt, (self.devices.get(tgt.device) if tgt.device else None)

    def to_dict(self) -> dict[str, Any]:
        return {"devices": {k: v.to_dict() for k, v in self.devices.items()},
                "targets": {k: v.to_dict() for k, v in self.targets.items()}}

    @classmethod
    def from_dict(cls, d: Any, where: str = "flush_capability") -> FlushCapabilityInfo:
        d = _obj(d, where)
        devs = _get(d, "devices", (dict,), where, {})
        tgts = _get(d, "targets", (dict,), where, {})
        return cls(devices={k: FlushDevice.from_dict(v, f"{where}.devices.{k}") for k, v in devs.items()},
                   targets={k: FlushTarget.from_dict(v, f"{where}.targets.{k}") for k, v in tgts.items()})


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
    settings: Mapping[str, Any] = field(default_factory=dict)  # key settings as the server reports them
    storage: Mapping[str, Any] = field(default_factory=dict)  # the data directory's device facts
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dbms(self) -> Engine:
        """The engine object (raises UsageError for an unknown engine name)."""
        return engine_for(self.engine or self.product)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in (*_TARGET_STR, *_TARGET_INT, *_TARGET_BOOL)}
        return {**dict(self.extra), **d, "settings": dict(self.settings), "storage": dict(self.storage)}

    @classmethod
    def from_dict(cls, d: Any, where: str = "target") -> TargetInfo:
        d = _obj(d, where)
        kw: dict[str, Any] = {k: _get(d, k, (str,), where, cls.__dataclass_fields__[k].default) for k in _TARGET_STR}
        kw["label"] = _get(d, "label", (str,), where, required=True)
        kw.update({k: _get(d, k, (int,), where) for k in _TARGET_INT})
        kw.update({k: _get(d, k, (bool,), where, False) for k in _TARGET_BOOL})
        kw["settings"] = _get(d, "settings", (dict,), where, {})
        kw["storage"] = _get(d, "storage", (dict,), where, {})
        return cls(**kw, extra=_extra(d, (*_TARGET_STR, *_TARGET_INT, *_TARGET_BOOL, "settings", "storage")))


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
        d = _obj(d, where)
        fc = d.get("flush_capability")
        metrics = d.get("metrics")
        return cls(
            format=_get(d, "format", (int,), where, 1), tool=_get(d, "tool", (str,), where, "dbdiag"),
            version=_get(d, "version", (str,), where, ""), command=_strs(d, "command", where),
            status=_get(d, "status", (str,), where, ""), error=_get(d, "error", (str,), where, ""),
            started=_get(d, "started", _NUM, where), ended=_get(d, "ended", _NUM, where),
            host=_get(d, "host", (dict,), where, {}), workloads=_strs(d, "workloads", where),
            options=_get(d, "options", (dict,), where, {}),
            targets=tuple(TargetInfo.from_dict(t, f"{where}: targets[{i}]")
                          for i, t in enumerate(_get(d, "targets", (list,), where, []))),
            collectors=_get(d, "collectors", (dict,), where, {}),
            flush_capability=FlushCapabilityInfo.from_dict(fc, f"{where}: flush_capability") if fc else None,
            metrics=MetricDeclarations.from_dict(metrics, f"{where}: metrics") if metrics is not None else None,
            extra=_extra(d, _RUN_KNOWN))


# --------------------------------------------------------------------------- results and findings


_ROW_NUM = ("duration_s", "tps", "qps", "client_cpu_pct", "client_cpu_s", "t_start", "t_end")
_ROW_INT = ("transactions", "retries", "scale")
_ROW_STR = ("engine", "driver", "protocol", "isolation")
_ROW_DICT = ("latency_ms", "errors", "error_samples")


@dataclass(frozen=True)
class ResultRow:
    """results.json ``results[]``: one (target, workload, clients) step as the workload driver measured it.

    Times are Unix s (``t_start``/``t_end`` bound the measured window, warmup
    excluded); ``latency_ms`` holds p50/p95/p99/p999/max in ms; ``client_cpu_s``
    is the clients' CPU seconds over the window. Fields added by workloads
    (TPC-C ``nopm``) or step plugins (``profile``) that have no field here stay in ``extra``.
    """

    target: str = ""
    workload: str = ""
    clients: int | None = None
    engine: str = ""  # the product: "postgresql", "mysql", "mariadb"
    duration_s: float | None = None
    transactions: int | None = None
    tps: float | None = None
    qps: float | None = None
    latency_ms: Mapping[str, float] = field(default_factory=dict)
    errors: Mapping[str, int] = field(default_factory=dict)
    error_samples: Mapping[str, Any] = field(default_factory=dict)
    retries: int | None = None
    driver: str = ""
    protocol: str = ""
    isolation: str = ""
    scale: int | None = None
    client_cpu_pct: float | None = None  # percent of all the machine's CPUs
    client_cpu_s: float | None = None
    t_start: float | None = None
    t_end: float | None = None
    interrupted: bool = False
    profile: Mapping[str, Any] | None = None  # the step's perf profile summary (collectors.profile)
    extra: Mapping[str, Any] = field(default_factory=dict)

    _FIELDS = ("target", "workload", "clients", *_ROW_STR, *_ROW_NUM, *_ROW_INT, *_ROW_DICT, "interrupted",
               "profile")

    @property
    def p95_ms(self) -> float | None:
        v = self.latency_ms.get("p95")
        return v if isinstance(v, _NUM) else None

    def to_dict(self) -> dict[str, Any]:
        d = {**dict(self.extra), **{k: getattr(self, k) for k in self._FIELDS}}
        for k in _ROW_DICT:
            d[k] = dict(d[k])
        if not self.interrupted:
            del d["interrupted"]
        return {k: v for k, v in d.items() if v is not None}

    @classmethod
    def from_dict(cls, d: Any, where: str = "result") -> ResultRow:
        d = _obj(d, where)
        # Nothing is required: a row cut short or written by an older driver still loads.
        kw: dict[str, Any] = {"target": _get(d, "target", (str,), where, ""),
                              "workload": _get(d, "workload", (str,), where, ""),
                              "clients": _get(d, "clients", (int,), where)}
        kw.update({k: _get(d, k, _NUM, where) for k in _ROW_NUM})
        kw.update({k: _get(d, k, (int,), where) for k in _ROW_INT})
        kw.update({k: _get(d, k, (str,), where, "") for k in _ROW_STR})
        kw.update({k: _get(d, k, (dict,), where, {}) for k in _ROW_DICT})
        kw["interrupted"] = _get(d, "interrupted", (bool,), where, False)
        kw["profile"] = _get(d, "profile", (dict,), where)
        return cls(**kw, extra=_extra(d, cls._FIELDS))


_FINDING_KNOWN = ("category", "severity", "target", "title", "evidence", "advice", "impact", "workload", "clients",
                  "extra")


@dataclass(frozen=True)
class FindingRecord:
    """findings.json ``findings[]``: one stored finding (the shape of ``reports.rules.base.Finding.to_dict()``).

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
        d = _obj(d, where)
        return cls(category=_get(d, "category", (str,), where, ""), severity=_get(d, "severity", (str,), where, ""),
                   target=_get(d, "target", (str,), where, ""), title=_get(d, "title", (str,), where, ""),
                   evidence=_get(d, "evidence", (dict,), where, {}), advice=_get(d, "advice", (str,), where, ""),
                   impact=_get(d, "impact", _NUM, where, 0.0), workload=_get(d, "workload", (str,), where),
                   clients=_get(d, "clients", (int,), where),
                   extra={**_get(d, "extra", (dict,), where, {}), **_extra(d, _FINDING_KNOWN)})
