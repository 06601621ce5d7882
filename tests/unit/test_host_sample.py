"""One real host sample: CPU counters, context switches, memory, and device flush counters."""

from pathlib import Path

from collectors.diskstats import read_diskstats
from collectors.host import HostCollector
from collectors.base import CollectorContext
from diag.core.targets import parse_target


def test_host_sample_has_counters_and_flushes():
    h = HostCollector(CollectorContext(target=parse_target("embedded:postgres"), artifacts=Path("/tmp")))
    assert h.probe().ok
    r = h.sample()
    assert r["ncpu"] >= 1 and r["cpu.all.user"] > 0 and r["ctx_switches"] > 0 and r["mem.available"] > 0
    with_flush = [d for d, s in read_diskstats().items() if s.flushes_completed is not None
                  and not d.startswith(("loop", "ram"))]
    assert with_flush, "this kernel reports flush counters (5.5+)"
    for d in with_flush:
        assert isinstance(r[f"disk.{d}.flushes"], int)
    assert r["procs.server"] == {} and r["procs.client"] == {} and r["procs.collector"] == {}
