"""The run bundle: one folder per run, written as it goes, read back by reports.

Layout::

    run.json            format, tool version, redacted command line, host, targets, collectors' probes
                        and declared metrics (records: :mod:`diag.schema`)
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

The records' shapes and the format history live in :mod:`diag.schema`; the
writer stamps run.json with :data:`diag.schema.FORMAT` and :func:`load_bundle`
validates every file against those records and migrates older formats.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from diag.errors import DiagError
from diag.redact import redact_text
from diag.schema import (FORMAT, FORMAT_KEY, BundleFormatError, FindingRecord, MetricDeclarations, ResultRow,
                         RunInfo, safe_name)

__all__ = ["Bundle", "BundleWriteError", "BundleWriter", "SeriesWriter", "load_bundle", "read_jsonl", "safe_name"]

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

    def __init__(self, path: Path, secrets: tuple[str, ...] = ()) -> None:
        self.path = Path(path)
        # Every known password; diag.redact replaces the long ones blindly and finds short ones by their form.
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
        """``text`` without passwords (:func:`diag.redact.redact_text`): every line and file written goes through it."""
        return redact_text(text, self.secrets)

    def write_json(self, name: str, obj: Any) -> Path:
        """Write ``name`` atomically (temp file + rename) so readers never see half a file.

        run.json gets ``format`` (:data:`diag.schema.FORMAT`) when the caller did not set one,
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


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Records of a JSON-lines file; a cut-off or corrupt line is skipped, not fatal."""
    out: list[dict[str, Any]] = []
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # the last line of a run cut short may be half written
        if isinstance(rec, dict):
            out.append(rec)
    return out


class Memo(dict):
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
    migrated to :data:`~diag.schema.FORMAT`); :attr:`info`, :attr:`rows` and
    :attr:`stored_findings` are the same data as typed records. ``metrics`` are
    the collectors' metric declarations; None when the bundle declared none (a
    format-1 bundle: :func:`reports.series.declarations` fills them from the
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

    def memo(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """``make()``, computed once per bundle and ``key`` (what the value depends on besides the files).

        For what several rules and sections derive from the same long series (CPU use over a step: one
        scan of the host series each, asked for 20 times per report of an hour's bundle). The series
        are taken as loaded: edit a copy (``copy.deepcopy``), whose memo starts empty."""
        if key not in self.derived:
            self.derived[key] = make()
        return self.derived[key]

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
        """results.json rows as records."""
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


# Migration from format N to N + 1, applied in order; each a pure function of run.json.
MIGRATIONS = {1: _v1_to_v2, 2: _v2_to_v3}


def load_bundle(path: Path) -> Bundle:
    """Read a run folder, validate its files against :mod:`diag.schema` and migrate it to :data:`FORMAT`.

    Raises DiagError when it is not a run folder, a file has a value of the wrong
    type (the message names file and field), or its format is newer than this code.
    """
    path = Path(path)
    if not (path / "run.json").exists():
        raise DiagError(f"{path} is not a dbdiag run folder (no run.json)")
    run = _load_json(path / "run.json", None)
    source = bundle_format(run, str(path / "run.json"))
    for n in range(source, FORMAT):
        run = MIGRATIONS[n](run)
    series = {p.stem: read_jsonl(p) for p in sorted((path / "series").glob("*.jsonl"))}
    b = Bundle(path=path, run=run, results=_load_json(path / "results.json", "results"),
               findings=_load_json(path / "findings.json", "findings"),
               events=read_jsonl(path / "events.jsonl"), series=series, source_format=source)
    b.metrics = b.info.metrics  # validates run.json
    b.rows  # noqa: B018  (validates results.json)
    # findings.json is not validated here: reports derive the findings again from the rest, and a
    # render rewrites it, so an odd findings file must not stop `dbdiag report` from mending it.
    return b
