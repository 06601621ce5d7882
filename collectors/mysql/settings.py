"""MySQL / MariaDB settings snapshot: the durability settings always, and what differs from the defaults.

A record at the first sample and again whenever something changed (checked
every ``interval_s``)::

    {"snapshot": "start", "product": "mariadb", "version": "10.11.19-MariaDB-0+deb12u1",
     "version_num": 101119,
     "durability": {"innodb_flush_log_at_trx_commit": "1", "sync_binlog": "0", ...},
     "changed": {"bind_address": {"value": "127.0.0.1", "default": "", "origin": "CONFIG"}, ...},
     "changed_known": true}

``durability``: innodb_flush_log_at_trx_commit, sync_binlog, log_bin,
innodb_doublewrite, innodb_flush_method, innodb_buffer_pool_size, the redo size
(innodb_log_file_size; innodb_redo_log_capacity on MySQL 8.0.30+),
innodb_io_capacity, performance_schema, thread_handling and a few neighbours
(the list per version is in ``sql/durability.*.sql``). SHOW GLOBAL VARIABLES:
no privilege needed.

``changed``: every global variable that differs from its compiled default,
where the server can tell. MariaDB: INFORMATION_SCHEMA.SYSTEM_VARIABLES, value
!= DEFAULT_VALUE and GLOBAL_VALUE_ORIGIN not COMPILE-TIME (``origin``: CONFIG,
COMMAND-LINE, SQL, AUTO: sized by the server itself). MySQL 8.0+:
performance_schema.variables_info VARIABLE_SOURCE not COMPILED (no default
value column there: ``default`` is null; needs SELECT on performance_schema).
MySQL 5.7 cannot tell: ``changed_known`` false and ``changed_note`` says why.
A later record carries ``snapshot: "change"`` and ``changed_now`` (the names
whose value moved).
"""

from __future__ import annotations

from typing import Any

from collectors.base import CollectorContext, Metric, Probe
from collectors.mysql.common import GRANT_PS, MyCollector, Parts, query_named
from diag.core.db import Session

HINTS = {"changed": GRANT_PS}
REQUIRED = ("innodb_flush_log_at_trx_commit", "sync_binlog", "log_bin", "innodb_doublewrite", "innodb_flush_method",
            "innodb_buffer_pool_size", "innodb_io_capacity", "performance_schema", "thread_handling")


def _text(v: Any) -> str | None:
    if v is None:
        return None
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _durability(s: Session) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for r in query_named(s, "durability"):
        vals = list(r.values())
        out[str(vals[0]).lower()] = _text(vals[1])
    return out


def _changed(s: Session) -> dict[str, dict[str, str | None]]:
    return {str(r["name"]): {"value": _text(r["value"]), "default": _text(r["default_value"]),
                             "origin": _text(r["origin"])}
            for r in query_named(s, "settings_changed")}


class MySettingsCollector(MyCollector):
    """Durability settings and every setting changed from its default, with the server version."""

    name = "my_settings"
    interval_s = 5.0
    hints = HINTS
    metrics = (
        Metric("durability.<name>", "text", "gauge", "durability-related global variables (values as text)"),
        Metric("changed.<name>", "text", "gauge", "global variables that differ from the compiled default: "
               "value, default (MariaDB), origin"),
    )

    def __init__(self, ctx: CollectorContext) -> None:
        super().__init__(ctx)
        self.last: dict[str, Any] | None = None

    def check(self, s: Session, parts: Parts) -> Probe:
        dur = _durability(s)
        absent = [n for n in REQUIRED if n not in dur]
        parts.call("changed", lambda: _changed(s))
        missing = list(parts.missing())
        if absent:
            missing.append(f"durability: not on this server: {', '.join(absent)}")
        return Probe(True, missing=tuple(missing), hint=parts.hint())

    def snapshot(self) -> dict[str, Any]:
        """The current settings as a record (without ``snapshot`` / ``changed_now``)."""
        s = self.session
        assert s is not None, "start() first"
        rec: dict[str, Any] = {"product": s.product, "version": s.version_text, "version_num": s.version_num,
                               "durability": _durability(s)}
        changed = self.parts.call("changed", lambda: _changed(s))
        rec["changed"] = changed or {}
        rec["changed_known"] = changed is not None
        if changed is None:
            rec["changed_note"] = self.parts.off.get("changed", "")
        return rec

    def sample(self) -> dict[str, Any] | None:
        rec = self.snapshot()
        previous, self.last = self.last, dict(rec)
        if previous is None:
            rec["snapshot"] = "start"
        else:
            moved = sorted(_moved(previous, rec))
            if not moved:
                return None
            rec["snapshot"], rec["changed_now"] = "change", moved
        self.note_parts_off(rec)
        return rec


def _moved(old: dict[str, Any], new: dict[str, Any]) -> set[str]:
    """Names of settings whose value differs between two snapshots."""
    out: set[str] = set()
    for group in ("durability", "changed"):
        a, b = old.get(group, {}), new.get(group, {})
        for k in set(a) | set(b):
            va = a.get(k, {}).get("value") if group == "changed" and isinstance(a.get(k), dict) else a.get(k)
            vb = b.get(k, {}).get("value") if group == "changed" and isinstance(b.get(k), dict) else b.get(k)
            if va != vb:
                out.add(k)
    return out
