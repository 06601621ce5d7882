"""PostgreSQL settings snapshot: every non-default setting, the durability ones always.

Taken once at the start of the run (first ``sample()``); ``stop()`` reads again
and writes a second record only when something changed during the run (a
reload, ALTER SYSTEM, a restart), with the names that changed.

Which settings are "non-default" (see :func:`non_default`)? pg_settings'
``source`` says where a value came from, but two sources need thought:

- ``client``, ``session``, ``interactive`` are values of *this* connection
  (our application_name, our statement_timeout, the driver's client encoding),
  not the server's. What the server would give a new session is ``reset_val``;
  it is kept when it differs from the built-in default.
- ``override`` is set by the server itself at start (data_directory,
  config_file from ``-D``, transaction_isolation per transaction, an lc_* or
  wal_buffers computed at initdb / start). Kept only when it differs from the
  built-in default, so the paths stay and the transaction_* noise goes.

Superuser-only settings (data_directory, config_file...) are visible only with
pg_read_all_settings (part of pg_monitor); without it they are named as missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from collectors.base import Collector, Metric, Probe
from collectors.pg.common import MONITOR_HINT, open_session, privileges, probe_hint, unsupported_reason
from collectors.sql import session_sql
from diag.core.db import Session
from diag.core.errors import DbError

TIMEOUT_MS = 2000
DURABILITY = ("fsync", "synchronous_commit", "wal_sync_method", "full_page_writes", "commit_delay",
              "commit_siblings", "wal_level", "shared_buffers", "max_wal_size",
              # close relatives that change what the counters mean
              "wal_buffers", "wal_writer_delay", "checkpoint_timeout", "data_checksums", "track_io_timing",
              "track_wal_io_timing")
OWN_CONNECTION_SOURCES = ("client", "session", "interactive")
PATH_NOTE = "data_directory and config file paths: needs pg_monitor or pg_read_all_settings"


def _entry(row: Mapping[str, Any], value: Any = None, source: str | None = None) -> dict[str, Any]:
    return {"value": row["setting"] if value is None else value, "unit": row["unit"],
            "source": row["source"] if source is None else source}


def non_default(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """name -> {"value", "unit", "source"} for the settings the server runs with that are not built-in defaults.

    ``rows`` are pg_settings rows (name, setting, unit, source, boot_val, reset_val).
    """
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        source = r["source"]
        if source == "default":
            continue
        if source in OWN_CONNECTION_SOURCES:
            if r["reset_val"] != r["boot_val"] and source != "client":
                out[r["name"]] = _entry(r, r["reset_val"], "reset value (this session overrides it)")
            continue
        if source == "override" and r["setting"] == r["boot_val"]:
            continue
        out[r["name"]] = _entry(r)
    return out


def snapshot(rows: Sequence[Mapping[str, Any]], session: Session) -> dict[str, Any]:
    """The settings record for one read of pg_settings."""
    by_name = {r["name"]: r for r in rows}
    durability: dict[str, Any] = {}
    for name in DURABILITY:
        r = by_name.get(name)
        if r is None:
            continue  # not in this version (track_wal_io_timing < 14)
        if r["source"] in OWN_CONNECTION_SOURCES:
            durability[name] = _entry(r, r["reset_val"], "reset value (this session overrides it)")
        else:
            durability[name] = _entry(r)
    data_dir = by_name.get("data_directory")
    return {
        "kind": "settings",
        "server_version": str(by_name["server_version"]["setting"]) if "server_version" in by_name else "",
        "server_version_num": session.version_num,
        "version": session.version_text,
        "data_directory": data_dir["setting"] if data_dir else None,
        "durability": durability,
        "settings": non_default(rows),
        "pending_restart": sorted(r["name"] for r in rows if r.get("pending_restart")),
    }


def changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Names whose non-default or durability entry differs between two snapshots."""
    names: set[str] = set()
    for part in ("settings", "durability"):
        a, b = before.get(part, {}), after.get(part, {})
        names |= {n for n in set(a) | set(b) if a.get(n) != b.get(n)}
    return sorted(names)


class PgSettingsCollector(Collector):
    """pg_settings snapshot at start (and at stop if it changed); version and data directory."""

    name = "pg_settings"
    interval_s = 60.0  # nothing to do per tick; the runner's stop event ends the wait early
    metrics = (
        Metric("durability.<name>", "setting", "gauge",
               "fsync, synchronous_commit, wal_sync_method, full_page_writes, commit_delay, commit_siblings, "
               "wal_level, shared_buffers, max_wal_size and relatives: value, unit, source"),
        Metric("settings.<name>", "setting", "gauge", "every non-default setting: value, unit, source"),
        Metric("server_version", "text", "gauge", "server_version and server_version_num"),
        Metric("data_directory", "path", "gauge", "the data directory (needs pg_read_all_settings)"),
    )

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.session: Session | None = None
        self._first: dict[str, Any] | None = None

    def probe(self) -> Probe:
        try:
            with open_session(self.ctx.target, self.name, TIMEOUT_MS) as s:
                too_old = unsupported_reason(s.version_num)
                if too_old:
                    return Probe(False, too_old, "use PostgreSQL 13 or newer")
                s.query(session_sql(s, "settings"))
                priv = privileges(s)
        except DbError as e:
            return Probe(False, str(e), probe_hint(e))
        if not (priv.pg_read_all_settings or priv.superuser):
            return Probe(True, hint=MONITOR_HINT, missing=(PATH_NOTE,))
        return Probe(True)

    def start(self) -> None:
        self.session = open_session(self.ctx.target, self.name, TIMEOUT_MS)

    def _read(self) -> dict[str, Any]:
        assert self.session is not None, "start() first"
        rows = self.session.query(session_sql(self.session, "settings"))
        rec = snapshot(rows, self.session)
        if rec["data_directory"] is None:
            rec["missing"] = [PATH_NOTE]
        return rec

    def sample(self) -> dict[str, Any] | None:
        if self._first is not None:
            return None
        self._first = self._read()
        return self._first

    def stop(self) -> list[dict[str, Any]] | None:
        if self.session is None:
            return None
        try:
            if self._first is None:
                return [self.sample() or {}]
            now = self._read()
            diff = changed(self._first, now)
            if diff:
                now["kind"] = "settings_changed"
                now["changed"] = diff
                return [now]
            return None
        finally:
            self.session.close()
            self.session = None
