"""``dbdiag durability`` is a run with its own plan: which sources and workload that plan gives.

The command's options are parsed by the real CLI parser and turned into the run's
options by the same function the command uses; the sources come from the one
registry. No database is needed: sources are made, not started.
"""

from __future__ import annotations

from pathlib import Path

from collectors.base import CollectorContext
from collectors.flush import FlushCollector
from collectors.mysql import MyStatusCollector
from collectors.pg import PgStatsCollector
from collectors.registry import sources_for
from diag.cli import build_parser
from diag.commands.durability import PROBE_FLUSH_INTERVAL_S, durability_options
from diag.core.targets import parse_target


def _opts(tmp_path: Path, *args: str):  # type: ignore[no-untyped-def]
    a = build_parser().parse_args(["durability", *args])
    return durability_options(a, {}, tmp_path / "probe", ["dbdiag", "durability", *args])


def _ctx(tmp_path: Path, dsn: str) -> CollectorContext:
    return CollectorContext(target=parse_target(dsn), artifacts=tmp_path / "artifacts")


def test_probe_plan_is_inserts_with_flush_sources_only(tmp_path: Path) -> None:
    o = _opts(tmp_path, "postgresql://postgres@127.0.0.1/postgres")
    assert o.workloads == ["insert"] and tuple(o.driver.clients) == (1, 4) and o.driver.protocol == "prepared"
    assert o.kind == "durability" and not o.render and not o.profile
    made = sources_for("target", o.sources, _ctx(tmp_path, "postgresql://postgres@127.0.0.1/postgres"))
    assert [type(c) for c in made] == [PgStatsCollector, FlushCollector]
    assert made[1].perf_interval_s == PROBE_FLUSH_INTERVAL_S
    assert o.sources.strict, "clients must not connect before flush tracing is attached"
    my = sources_for("target", o.sources, _ctx(tmp_path, "mysql://root@127.0.0.1/"))
    assert [type(c) for c in my] == [MyStatusCollector, FlushCollector]
    # Run-wide: only the fsync test (F), no host sampling or profiles that would disturb the flush counts.
    assert [c.name for c in sources_for("run", o.sources, _ctx(tmp_path, "postgresql://postgres@127.0.0.1/x"))] \
        == ["flush_capability"]


def test_given_flush_capability_skips_the_fsync_test(tmp_path: Path) -> None:
    o = _opts(tmp_path, "embedded:postgres", "--flush-capability", "120", "-c", "2", "--seconds", "1.5")
    assert o.flush_capability == 120 and tuple(o.driver.clients) == (2,) and o.driver.duration_s == 1.5
    assert sources_for("run", o.sources, _ctx(tmp_path, "embedded:postgres")) == []
