"""A step's row meets the sources' parts in one place (diag.core.schema.with_part): each source declares the
row fields it owns, and a part goes in only through those."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import collectors
from collectors.base import Collector
from diag.core.schema import BundleFormatError, ResultRow, UndeclaredPartError, with_part

ROW = ResultRow(target="pg", workload="insert", clients=2, tps=100.0, latency_ms={"p95": 2.0},
                extra={"nopm": 5.0})


def test_a_declared_part_sets_typed_fields_and_keeps_other_names_in_extra() -> None:
    got = with_part(ROW, {"table_io": [{"table": "t", "heap_blks_read": 3}],
                          "table_scans": {"t0": 1.0, "t1": 2.0, "tables": []}}, ("table_scans", "table_io"), "pg_tables")
    assert got.table_io == [{"table": "t", "heap_blks_read": 3}] and got.table_scans == {"t0": 1.0, "t1": 2.0,
                                                                                        "tables": []}
    assert got.tps == 100.0 and got.extra == {"nopm": 5.0}
    named = with_part(ROW, {"client_profile": {"folded": "x"}}, ("client_profile",), "client_profile")
    assert named.extra == {"nopm": 5.0, "client_profile": {"folded": "x"}}
    assert ROW.table_io is None and "client_profile" not in ROW.extra  # a new record; the step's own is kept


def test_a_field_the_source_did_not_declare_is_refused() -> None:
    with pytest.raises(UndeclaredPartError, match=r"oldest_xact returned tps .*row_fields: old_transaction"):
        with_part(ROW, {"old_transaction": {}, "tps": 0.0}, ("old_transaction",), "oldest_xact")
    with pytest.raises(UndeclaredPartError, match="row_fields: none"):
        with_part(ROW, {"profile": {}}, (), "quiet")


def test_a_part_of_the_wrong_shape_names_its_source() -> None:
    with pytest.raises(BundleFormatError, match="statements's part"):
        with_part(ROW, {"statements": ["not", "a", "record"]}, ("statements",), "statements")


def _all_collectors() -> list[type[Collector]]:
    for m in pkgutil.walk_packages(collectors.__path__, "collectors."):
        importlib.import_module(m.name)
    out, todo = [], list(Collector.__subclasses__())
    while todo:
        c = todo.pop()
        out.append(c)
        todo.extend(c.__subclasses__())
    return out


def test_every_source_that_adds_to_a_row_declares_its_fields() -> None:
    adding = [c for c in _all_collectors() if c.step_finished is not Collector.step_finished and c.name]
    assert len(adding) >= 6, adding
    bare = [c.__name__ for c in adding if not c.row_fields]
    assert not bare, f"sources with step_finished but no row_fields: {bare}"
    # the profile sources return {result_key: ...}: that key is what they declare
    keyed = [c for c in adding if getattr(c, "result_key", "")]
    assert keyed and all(c.row_fields == (getattr(c, "result_key"),) for c in keyed), keyed


def test_a_watch_windows_own_fields_are_typed_and_checked_when_loaded() -> None:
    row = ResultRow.from_dict({"target": "pg", "workload": "watch#02", "source": "server", "window": 2,
                               "own_backends": [41, 42], "client": {"tool": "pgbench", "tps": 10.5, "lines": 2},
                               "local_clients": {"pids": [7], "names": ["pgbench"], "unreadable": 1}})
    w = row.watch
    assert w is not None and w.window == 2 and w.own_backends == (41, 42) and w.client is not None
    assert (w.client.tool, w.client.tps, w.client.lines) == ("pgbench", 10.5, 2)
    assert w.local_clients is not None and w.local_clients.names == ("pgbench",) and w.local_clients.unreadable == 1
    assert ResultRow(target="pg", workload="insert").watch is None  # a step dbdiag drove
    with pytest.raises(BundleFormatError, match="client: tps"):
        ResultRow.from_dict({"source": "server", "client": {"tool": "pgbench"}}, "results[0]")
    with pytest.raises(BundleFormatError, match="window"):
        ResultRow.from_dict({"source": "server", "window": "two"}, "results[0]")
