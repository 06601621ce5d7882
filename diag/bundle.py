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
to the last record; :func:`read_jsonl` tolerates a cut-off last line. Passwords
never enter: targets are stored via ``Target.to_dict()`` and every text written
goes through :meth:`BundleWriter.scrub` as a second guard.

The records' shapes and the format history live in :mod:`diag.schema`; the
writer stamps run.json with :data:`diag.schema.FORMAT` and :func:`load_bundle`
validates every file against those records and migrates older formats.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from diag.errors import DiagError
from diag.schema import (FORMAT, FORMAT_KEY, BundleFormatError, FindingRecord, MetricDeclarations, ResultRow,
                         RunInfo, safe_name)

__all__ = ["Bundle", "BundleWriter", "SeriesWriter", "load_bundle", "read_jsonl", "safe_name"]


def _dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False)


class SeriesWriter:
    """Appends JSON records to one ``series/*.jsonl`` file, flushing each one."""

    def __init__(self, path: Path, scrub: Any) -> None:
        self.path = path
        self._scrub = scrub
        self._fh: TextIO = open(path, "a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        self._fh.write(self._scrub(_dumps(record)) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


class BundleWriter:
    """Creates the run folder and writes its files; safe to reopen in a child process."""

    def __init__(self, path: Path, secrets: tuple[str, ...] = ()) -> None:
        self.path = Path(path)
        # Short secrets would mangle unrelated text if replaced blindly; they are
        # still kept out structurally (Target.to_dict has no password).
        self.secrets = tuple(s for s in secrets if s and len(s) >= 4)
        try:
            for sub in ("", "series", "artifacts"):
                (self.path / sub).mkdir(parents=True, exist_ok=True)
            # Per-process name: collector processes open the bundle at the same moment.
            probe = self.path / f".write-test-{os.getpid()}"
            probe.write_text("ok")
            probe.unlink()
        except OSError as e:
            raise DiagError(f"cannot write the run bundle to {self.path}: {e.strerror or e}") from None

    def scrub(self, text: str) -> str:
        """Replace any known secret in ``text`` by ``***``."""
        for s in self.secrets:
            text = text.replace(s, "***")
        return text

    def write_json(self, name: str, obj: Any) -> Path:
        """Write ``name`` atomically (temp file + rename) so readers never see half a file.

        run.json gets ``format`` (:data:`diag.schema.FORMAT`) when the caller did not set one,
        so every writer of run.json (a run, the durability probe) stamps the same format.
        """
        if name == "run.json" and isinstance(obj, dict) and FORMAT_KEY not in obj:
            obj = {FORMAT_KEY: FORMAT, **obj}
        dest = self.path / name
        tmp = dest.with_suffix(dest.suffix + ".tmp")
        tmp.write_text(self.scrub(json.dumps(obj, indent=1, sort_keys=True, default=str, ensure_ascii=False)),
                       encoding="utf-8")
        os.replace(tmp, dest)
        return dest

    def write_text(self, name: str, text: str) -> Path:
        """Write a text file (report, artifact) atomically."""
        dest = self.path / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".tmp")
        tmp.write_text(self.scrub(text), encoding="utf-8")
        os.replace(tmp, dest)
        return dest

    def series(self, name: str) -> SeriesWriter:
        """An appender for ``series/<name>.jsonl``."""
        return SeriesWriter(self.path / "series" / f"{safe_name(name)}.jsonl", self.scrub)

    def artifact(self, name: str) -> Path:
        """Path for a large file under artifacts/ (the caller writes it)."""
        p = self.path / "artifacts" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def event(self, kind: str, message: str, **fields: Any) -> None:
        """Append one event (collector off, step start, interruption...)."""
        rec = {"t": time.time(), "kind": kind, "message": message, **fields}
        with open(self.path / "events.jsonl", "a", encoding="utf-8") as fh:
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


# Migration from format N to N + 1, applied in order; each a pure function of run.json.
MIGRATIONS = {1: _v1_to_v2}


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
    b.stored_findings  # noqa: B018  (validates findings.json)
    return b
