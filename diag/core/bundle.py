"""The run bundle: one folder per run, written as it goes, read back by reports.

Layout::

    run.json            format, tool version, redacted command line, host, targets, collectors' probes
                        and declared metrics (records: :mod:`diag.core.schema`)
    results.json        {"results": [...]}  one row per (target, workload, clients) step
    findings.json       {"findings": [...]}
    events.jsonl        things that happened (collector switched off, step started, run cut short)
    series/NAME.jsonl   append-only time series, one JSON object a line, flushed per write
    artifacts/          large files (folded stacks, raw INNODB STATUS text), referenced by relative path
    report.html

Writers append and flush every record, so a crash or Ctrl-C keeps everything up
to the last record; :func:`read_jsonl` tolerates a cut-off last line. A write that
fails (full disk, I/O error, quota, read-only) raises :class:`BundleWriteError`,
one line naming the file and the cause, and is remembered on the writer
(:attr:`BundleWriter.failure`) so the run stops once and its last writes still try;
whole files are written to a temporary name and renamed, so a failed write
leaves the previous version readable. Passwords
never enter: targets are stored via ``Target.to_dict()`` and every text written
goes through :meth:`BundleWriter.scrub` as a second guard.

The records' shapes and the format history live in :mod:`diag.core.schema`; the
writer stamps run.json with :data:`diag.core.schema.FORMAT` and :func:`load_bundle`
validates every file against those records and migrates older formats.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

try:  # a C parser, about 2x the json module on the series of a long run (read_jsonl)
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson is a dependency; a bare install still reads bundles
    _loads = json.loads  # type: ignore[assignment]  # same call shape for what read_jsonl passes (str / bytes)

from diag.core.errors import DiagError
from diag.core.redact import redact_text
from diag.core.schema import (FORMAT, FORMAT_KEY, BundleFormatError, FindingRecord, MetricDeclarations, ResultRow,
                         RunInfo, safe_name)

_T = TypeVar("_T")

__all__ = ["Bundle", "BundleWriteError", "BundleWriter", "SeriesWriter", "gc_paused", "load_bundle", "read_jsonl",
           "safe_name"]

# What each errno says about the storage under the bundle, and the exit status a collector process
# ends with when it hits it (how a child tells the run; 90+ is clear of Python's 1 and signals' 128+).
_DISK_ERRORS: dict[int, tuple[str, int]] = {
    errno.ENOSPC: ("the disk under {where} is full", 90),
    errno.EDQUOT: ("the disk quota under {where} is used up", 91),
    errno.EIO: ("the disk under {where} failed", 92),
    errno.EROFS: ("the file system under {where} is read-only", 93),
}
OTHER_WRITE_EXIT = 94  # any other OSError writing the bundle (permissions, a removed folder)


class BundleWriteError(DiagError):
    """Writing a file of the bundle failed: the one line names the cause, the bundle and the file.

    ``errno`` is the OSError's errno (0 when unknown); :attr:`exit_status` is what a
    collector process exits with to pass it to the run (:meth:`from_exit_status`).
    """

    def __init__(self, message: str, err: int = 0) -> None:
        super().__init__(message)
        self.errno = err

    @classmethod
    def of(cls, e: OSError, bundle: Path, name: str) -> BundleWriteError:
        """The error for OSError ``e`` writing ``name`` (relative to the bundle folder ``bundle``)."""
        err = e.errno or 0
        cause = e.strerror or str(e)
        if err in _DISK_ERRORS:
            return cls(f"{_DISK_ERRORS[err][0].format(where=bundle)} ({cause}) writing {name}", err)
        return cls(f"cannot write {name} in {bundle} ({cause})", err)

    @property
    def exit_status(self) -> int:
        return _DISK_ERRORS.get(self.errno, ("", OTHER_WRITE_EXIT))[1]

    @classmethod
    def from_exit_status(cls, status: int | None, bundle: Path, name: str) -> BundleWriteError | None:
        """The error a child process that wrote ``name`` reported by exiting with ``status``; None for other ends."""
        for err, (_, code) in _DISK_ERRORS.items():
            if status == code:
                return cls.of(OSError(err, os.strerror(err)), bundle, name)
        if status == OTHER_WRITE_EXIT:
            return cls(f"a collector process could not write {name} in {bundle}")
        return None


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False)


class SeriesWriter:
    """Appends JSON records to one ``series/*.jsonl`` file, flushing each one.

    A failed write raises :class:`BundleWriteError` (through the owner's guard); the
    line it cut off is dropped by :func:`read_jsonl`, so the file stays readable.
    """

    def __init__(self, path: Path, owner: BundleWriter) -> None:
        self.path = path
        self._owner = owner
        with owner.guard(path):
            self._fh: TextIO = open(path, "a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._owner.poll()
        with self._owner.guard(self.path):
            self._fh.write(self._owner.scrub(_dumps(record)) + "\n")
            self._fh.flush()

    def close(self) -> None:
        # A record still buffered after a failed write would fail again: dropped, the error was raised then.
        with contextlib.suppress(OSError):
            self._fh.close()


class BundleWriter:
    """Creates the run folder and writes its files; safe to reopen in a child process."""

    def __init__(self, path: Path | str, secrets: tuple[str, ...] = ()) -> None:
        self.path = Path(path)
        # Every known password; diag.core.redact replaces the long ones blindly and finds short ones by their form.
        self.secrets = tuple(s for s in secrets if s)
        self.failure: BundleWriteError | None = None
        self._watchers: list[Callable[[], BundleWriteError | None]] = []
        try:
            for sub in ("", "series", "artifacts"):
                (self.path / sub).mkdir(parents=True, exist_ok=True)
            # Per-process name: collector processes open the bundle at the same moment.
            probe = self.path / f".write-test-{os.getpid()}"
            probe.write_text("ok")
            probe.unlink()
        except OSError as e:
            raise BundleWriteError(f"cannot write the run bundle to {self.path}: {e.strerror or e}",
                                   e.errno or 0) from None

    @contextlib.contextmanager
    def guard(self, dest: Path) -> Iterator[None]:
        """Turn an OSError writing ``dest`` into :class:`BundleWriteError`, remembered as :attr:`failure`."""
        try:
            yield
        except OSError as e:
            err = BundleWriteError.of(e, self.path, self._relative(dest))
            self.failure = self.failure or err
            raise err from None

    def _relative(self, dest: Path) -> str:
        try:
            return str(Path(dest).relative_to(self.path))
        except ValueError:
            return str(dest)

    def watch(self, check: Callable[[], BundleWriteError | None]) -> None:
        """Have ``check`` (a failure reported by another process, or None) looked at before each append."""
        self._watchers.append(check)

    def unwatch(self, check: Callable[[], BundleWriteError | None]) -> None:
        with contextlib.suppress(ValueError):
            self._watchers.remove(check)

    def report(self, err: BundleWriteError) -> None:
        """A failure seen elsewhere (a collector process): raised here once; later ones are the same story."""
        if self.failure is None:
            self.failure = err
            raise err

    def poll(self) -> None:
        """Raise the first failure a watcher reports (appends run every interval, so the run stops promptly)."""
        for check in list(self._watchers):
            err = check()
            if err is not None:
                self.report(err)

    def scrub(self, text: str) -> str:
        """``text`` without passwords (:func:`diag.core.redact.redact_text`): every line and file written goes through it."""
        return redact_text(text, self.secrets)

    def write_json(self, name: str, obj: Any) -> Path:
        """Write ``name`` atomically (temp file + rename) so readers never see half a file.

        run.json gets ``format`` (:data:`diag.core.schema.FORMAT`) when the caller did not set one,
        so every writer of run.json (a run, the durability probe) stamps the same format.
        """
        if name == "run.json" and isinstance(obj, dict) and FORMAT_KEY not in obj:
            obj = {FORMAT_KEY: FORMAT, **obj}
        text = self.scrub(json.dumps(obj, indent=1, sort_keys=True, default=str, ensure_ascii=False))
        return self._replace(self.path / name, text)

    def _replace(self, dest: Path, text: str) -> Path:
        """Write ``text`` to a temporary name and rename it over ``dest``; on failure ``dest`` is untouched."""
        tmp = dest.with_name(dest.name + ".tmp")
        with self.guard(dest):
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, dest)
            except OSError:
                with contextlib.suppress(OSError):
                    tmp.unlink()  # a half-written temp file would hold the space a retry needs
                raise
        return dest

    def write_results(self, rows: Iterable[ResultRow | Mapping[str, Any]]) -> Path:
        """results.json from the steps' rows, each written as its :class:`~diag.schema.ResultRow` record (a row
        still built as a dict is read into one first: a field of the wrong type fails here, at the step that
        wrote it, not when the bundle is read back)."""
        recs = [r if isinstance(r, ResultRow) else ResultRow.from_dict(r, f"results[{i}]") for i, r in enumerate(rows)]
        return self.write_json("results.json", {"results": [r.to_dict() for r in recs]})

    def write_text(self, name: str, text: str) -> Path:
        """Write a text file (report, artifact) atomically."""
        return self._replace(self.path / name, self.scrub(text))

    def series(self, name: str) -> SeriesWriter:
        """An appender for ``series/<name>.jsonl``."""
        return SeriesWriter(self.path / "series" / f"{safe_name(name)}.jsonl", self)

    def artifact(self, name: str) -> Path:
        """Path for a large file under artifacts/ (the caller writes it)."""
        p = self.path / "artifacts" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def event(self, kind: str, message: str, **fields: Any) -> None:
        """Append one event (collector off, step start, interruption...)."""
        rec = {"t": time.time(), "kind": kind, "message": message, **fields}
        dest = self.path / "events.jsonl"
        with self.guard(dest), open(dest, "a", encoding="utf-8") as fh:
            fh.write(self.scrub(_dumps(rec)) + "\n")


def _json_loads_fallback(line: bytes) -> Any:
    """What the standard library makes of a line orjson refused: NaN and Infinity (json.dumps writes them),
    integers past 64 bits, bytes that are not UTF-8 (replaced, as the file was read before orjson)."""
    return json.loads(line.decode("utf-8", errors="replace").strip())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines file; a cut-off or corrupt line is skipped, not fatal.

    Parsed with orjson when it is installed (a one-hour bundle's 31 MB of series: 0.19 s against 0.36 s with
    the json module), else with json; a line orjson refuses is tried with json, so both read the same records.
    Lines end at \\n or \\r only: a U+2028 in a stored text (json.dumps with ensure_ascii=False writes it raw)
    stays inside its record."""
    out: list[dict[str, Any]] = []
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return out
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            rec = _loads(line)
        except ValueError:
            try:
                rec = _json_loads_fallback(line)
            except ValueError:
                continue  # the last line of a run cut short may be half written
        if isinstance(rec, dict):
            out.append(rec)
    return out


class Memo(dict[Hashable, Any]):
    """Values derived from a loaded bundle, keyed by what they depend on (:meth:`Bundle.memo`).

    A copy of the bundle starts with an empty memo (tests edit copies of loaded
    series), so nothing derived from the original is read back for the copy."""

    def __copy__(self) -> Memo:
        return Memo()

    def __deepcopy__(self, memo: dict[int, Any]) -> Memo:
        return Memo()


@dataclass
class Bundle:
    """Everything a report needs, read from a run folder.

    ``run``, ``results`` and ``findings`` are the files' JSON as loaded (and
    migrated to :data:`~diag.core.schema.FORMAT`); :attr:`info`, :attr:`rows` and
    :attr:`stored_findings` are the same data as typed records. ``metrics`` are
    the collectors' metric declarations; None when the bundle declared none (a
    format-1 bundle: :func:`reports.model.series.declarations` fills them from the
    collectors). ``source_format`` is the format the files were written in.
    """

    path: Path
    run: dict[str, Any]
    results: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    events: list[dict[str, Any]]
    series: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    metrics: MetricDeclarations | None = None
    source_format: int = FORMAT
    derived: Memo = field(default_factory=Memo, repr=False, compare=False)

    def memo(self, key: Hashable, make: Callable[[], _T]) -> _T:
        """``make()``, computed once per bundle and ``key`` (what the value depends on besides the files).

        For what several rules and sections derive from the same long series (CPU use over a step: one
        scan of the host series each, asked for 20 times per report of an hour's bundle). The series
        are taken as loaded: edit a copy (``copy.deepcopy``), whose memo starts empty."""
        if key not in self.derived:
            self.derived[key] = make()
        value: _T = self.derived[key]
        return value

    @property
    def partial(self) -> bool:
        """True when the run did not record a normal end."""
        return self.run.get("status") != "complete"

    @property
    def info(self) -> RunInfo:
        """run.json as a record (read afresh: tests and migrations may edit ``run``)."""
        return RunInfo.from_dict(self.run, f"{self.path / 'run.json'}")

    @property
    def rows(self) -> list[ResultRow]:
        """results.json rows as records, read once per list of row dicts (a report asks ~90 times; a row
        takes ~0.1 ms to read, so an hour's watch of 360 windows would spend seconds reading them again). The
        rows are taken as loaded, like the series: to change one, put a new dict in its place in ``results``
        (or edit a ``copy.deepcopy``); a dict edited in place keeps the record first read from it."""
        return list(self.memo(("rows", tuple(id(r) for r in self.results)), self.read_rows))

    def read_rows(self) -> list[ResultRow]:
        """results.json rows as records, read afresh (what :attr:`rows` keeps)."""
        return [ResultRow.from_dict(r, f"{self.path / 'results.json'}: results[{i}]")
                for i, r in enumerate(self.results)]

    @property
    def stored_findings(self) -> list[FindingRecord]:
        """findings.json as records (what the last render derived)."""
        return [FindingRecord.from_dict(f, f"{self.path / 'findings.json'}: findings[{i}]")
                for i, f in enumerate(self.findings)]

    def series_for(self, prefix: str) -> dict[str, list[dict[str, Any]]]:
        """Series whose file name starts with ``prefix``."""
        return {k: v for k, v in self.series.items() if k.startswith(prefix)}


def _load_json(path: Path, key: str | None) -> Any:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {} if key is None else []
    except ValueError as e:
        raise DiagError(f"{path} is not valid JSON: {e}") from None
    if key is None:
        return data if isinstance(data, dict) else {}
    return data.get(key, []) if isinstance(data, dict) else []


def bundle_format(run: dict[str, Any], where: str) -> int:
    """The format a run.json was written in (1 without the key); refuses a format newer than this code reads."""
    fmt = run.get(FORMAT_KEY, 1)
    if not isinstance(fmt, int) or isinstance(fmt, bool) or fmt < 1:
        raise BundleFormatError(f"{where}: format should be a positive integer, not {fmt!r:.40}")
    if fmt > FORMAT:
        raise BundleFormatError(f"{where}: bundle format {fmt} is newer than this dbdiag reads (up to {FORMAT}): "
                                "render it with a newer dbdiag")
    return fmt


def _v1_to_v2(run: dict[str, Any]) -> dict[str, Any]:
    """Format 1 had no ``format`` and no metric declarations; the declarations stay absent
    (``metrics`` None) for the reports layer to fill from the collectors, which core cannot import."""
    return {**run, FORMAT_KEY: 2}


def _v2_to_v3(run: dict[str, Any]) -> dict[str, Any]:
    """Format 2 rows have no repeats or intervals: each is a step run once, which is what a row without
    them means in format 3 (the reports read per-interval throughput from the workload series)."""
    return {**run, FORMAT_KEY: 3}


def _v3_to_v4(run: dict[str, Any]) -> dict[str, Any]:
    """Format 3 rows carry their measured seconds twice (see :func:`_row_v3_to_v4`)."""
    return {**run, FORMAT_KEY: 4}


def _row_v3_to_v4(row: dict[str, Any]) -> dict[str, Any]:
    """A row's measured seconds in their one form, ``measured_s``: rows before format 4 wrote them as
    ``duration_s`` too (equal), and rows older than ``measured_s`` as ``duration_s`` only."""
    if not isinstance(row, dict) or "duration_s" not in row:
        return row
    out = {k: v for k, v in row.items() if k != "duration_s"}
    if out.get("measured_s") is None:
        out["measured_s"] = row["duration_s"]
    return out


# Migration from format N to N + 1, applied in order; each a pure function of run.json, and of each result row
# for the formats that changed the row (ROW_MIGRATIONS).
MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}
ROW_MIGRATIONS = {3: _row_v3_to_v4}


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: for work that makes many objects and few cycles, as parsing a long
    run's series (trees of dicts, freed by their reference counts). With the collector running, each of its
    full passes walks every record made so far: an hour's 22,000 records took 0.28-0.46 s to parse with it, 0.11-0.22 s
    without (orjson both). Cycles made inside are collected after it, as usual. Nests."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_bundle(path: Path) -> Bundle:
    """Read a run folder, validate its files against :mod:`diag.core.schema` and migrate it to :data:`FORMAT`.

    Raises DiagError when it is not a run folder, a file has a value of the wrong
    type (the message names file and field), or its format is newer than this code.
    """
    path = Path(path)
    if not (path / "run.json").exists():
        raise DiagError(f"{path} is not a dbdiag run folder (no run.json)")
    run = _load_json(path / "run.json", None)
    source = bundle_format(run, str(path / "run.json"))
    results = _load_json(path / "results.json", "results")
    for n in range(source, FORMAT):
        run = MIGRATIONS[n](run)
        if n in ROW_MIGRATIONS:
            results = [ROW_MIGRATIONS[n](r) for r in results]
    with gc_paused():
        series = {p.stem: read_jsonl(p) for p in sorted((path / "series").glob("*.jsonl"))}
    b = Bundle(path=path, run=run, results=results,
               findings=_load_json(path / "findings.json", "findings"),
               events=read_jsonl(path / "events.jsonl"), series=series, source_format=source)
    b.metrics = b.info.metrics  # validates run.json
    b.read_rows()  # validates results.json (not kept: callers may edit the rows before a report reads them)
    # findings.json is not validated here: reports derive the findings again from the rest, and a
    # render rewrites it, so an odd findings file must not stop `dbdiag report` from mending it.
    return b
