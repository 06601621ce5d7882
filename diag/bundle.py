"""The run bundle: one folder per run, written as it goes, read back by reports.

Layout::

    run.json            tool version, redacted command line, host, targets, collectors' probes
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
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from diag.errors import DiagError

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(text: str) -> str:
    """A file-name-safe form of a label or collector name."""
    return _SAFE.sub("_", text).strip("_") or "x"


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
        """Write ``name`` atomically (temp file + rename) so readers never see half a file."""
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
    """Everything a report needs, read from a run folder."""

    path: Path
    run: dict[str, Any]
    results: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    events: list[dict[str, Any]]
    series: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        """True when the run did not record a normal end."""
        return self.run.get("status") != "complete"

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


def load_bundle(path: Path) -> Bundle:
    """Read a run folder; raises DiagError when it is not one."""
    path = Path(path)
    if not (path / "run.json").exists():
        raise DiagError(f"{path} is not a dbdiag run folder (no run.json)")
    series = {p.stem: read_jsonl(p) for p in sorted((path / "series").glob("*.jsonl"))}
    return Bundle(path=path, run=_load_json(path / "run.json", None),
                  results=_load_json(path / "results.json", "results"),
                  findings=_load_json(path / "findings.json", "findings"),
                  events=read_jsonl(path / "events.jsonl"), series=series)
