"""node_exporter's /metrics page: the text-format parser and the host records built from it.

Inputs are two real scrapes of prometheus-node-exporter 1.5.0 (Debian 12, default collectors) one second
apart on this machine kind (tests/data/node_exporter/); expected values are read off the raw text lines.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.host import CPU_FIELDS, HostCollector
from collectors.node_exporter import HOST_METRICS, host_record, missing_parts, storage_from_metrics
from collectors.promtext import Sample, parse_line, parse_metrics
from collectors.rates import counter_delta
from diag.core.errors import ParseError

DATA = Path(__file__).resolve().parents[1] / "data" / "node_exporter"
SRC = "node_exporter http://127.0.0.1:9100/metrics"


def _text(n: int) -> str:
    return (DATA / f"metrics-{n}.txt").read_text()


def _raw(text: str, line_start: str) -> float:
    """The value of the one line that starts with ``line_start`` (the expected value, read from the text)."""
    lines = [ln for ln in text.splitlines() if ln.startswith(line_start + " ")]
    assert len(lines) == 1, line_start
    return float(lines[0].rsplit(" ", 1)[1])


def test_parses_every_sample_line_of_a_real_scrape() -> None:
    text = _text(1)
    samples = parse_metrics(text)
    n_lines = sum(1 for ln in text.splitlines() if ln.strip() and not ln.startswith("#"))
    assert sum(len(v) for v in samples.values()) == n_lines
    assert {"node_cpu_seconds_total", "node_context_switches_total", "node_disk_flush_requests_total",
            "node_filesystem_size_bytes"} <= set(samples)


def test_host_record_has_the_local_host_collectors_keys_and_the_raw_values() -> None:
    text = _text(1)
    rec = host_record(parse_metrics(text), SRC)
    assert rec["source"] == SRC
    ncpu = len({m for m in re.findall(r'^node_cpu_seconds_total\{cpu="(\d+)"', text, re.M)})
    assert rec["ncpu"] == ncpu >= 1
    for f in CPU_FIELDS:
        want = sum(_raw(text, f'node_cpu_seconds_total{{cpu="{i}",mode="{f}"}}') for i in range(ncpu))
        assert rec[f"cpu.all.{f}"] == pytest.approx(want, abs=1e-3)
        assert rec[f"cpu.0.{f}"] == pytest.approx(_raw(text, f'node_cpu_seconds_total{{cpu="0",mode="{f}"}}'))
    assert rec["ctx_switches"] == int(_raw(text, "node_context_switches_total"))
    assert rec["interrupts"] == int(_raw(text, "node_intr_total"))
    assert rec["mem.available"] == int(_raw(text, "node_memory_MemAvailable_bytes"))
    assert 0 < rec["mem.used"] < _raw(text, "node_memory_MemTotal_bytes")
    assert rec["disk.vda.flushes"] == int(_raw(text, 'node_disk_flush_requests_total{device="vda"}'))
    assert rec["disk.vda.flush_ms"] == pytest.approx(
        1000 * _raw(text, 'node_disk_flush_requests_time_seconds_total{device="vda"}'))
    assert rec["disk.vda.busy_ms"] == pytest.approx(1000 * _raw(text, 'node_disk_io_time_seconds_total{device="vda"}'))
    assert rec["disk.vda.write_bytes"] == int(_raw(text, 'node_disk_written_bytes_total{device="vda"}'))
    assert rec["load1"] == _raw(text, "node_load1")
    # Every key is one the local host collector declares (no procs.*: node_exporter has no process rows).
    declared = {m.name for m in HOST_METRICS}
    assert not any(m.name.startswith("procs.") for m in HOST_METRICS)
    assert {m.name for m in HostCollector.metrics} - declared == {m.name for m in HostCollector.metrics
                                                                  if m.name.startswith("procs.")}
    assert not any(k.startswith("procs.") for k in rec)


def test_two_scrapes_give_counter_deltas_of_one_second() -> None:
    a, b = (host_record(parse_metrics(_text(n)), SRC) for n in (1, 2))
    total = sum(counter_delta(a[f"cpu.all.{f}"], b[f"cpu.all.{f}"]) or 0.0 for f in CPU_FIELDS)
    # The scrapes were about 1 s apart (curl, sleep 1, curl): CPU seconds of all CPUs ~ ncpu x ~1 s.
    assert 0.5 * a["ncpu"] < total < 3.0 * a["ncpu"]
    assert (counter_delta(a["ctx_switches"], b["ctx_switches"]) or 0) > 0


def test_data_directory_device_from_the_filesystems() -> None:
    samples = parse_metrics(_text(1))
    st_ = storage_from_metrics(samples, "/var/lib/postgresql/18/main", SRC)
    assert st_["name"] == "vda" and st_["stat_devices"] == ["vda"] and st_["mount_point"] == "/"
    assert st_["fs_type"] == "ext4" and st_["source"] == SRC


def _fs(device: str, mountpoint: str, fstype: str = "ext4") -> Sample:
    return Sample("node_filesystem_size_bytes", (("device", device), ("fstype", fstype), ("mountpoint", mountpoint)),
                  1e9)


def _disk(dev: str) -> Sample:
    return Sample("node_disk_reads_completed_total", (("device", dev),), 1.0)


def test_partitions_map_to_their_disk_and_other_mounts_say_why_not() -> None:
    samples = {"node_filesystem_size_bytes": [_fs("/dev/sda2", "/"), _fs("/dev/nvme0n1p1", "/data"),
                                              _fs("tmpfs", "/run", "tmpfs"), _fs("/dev/mapper/vg-db", "/db")],
               "node_disk_reads_completed_total": [_disk("sda"), _disk("nvme0n1")]}
    assert storage_from_metrics(samples, "/data/pg", SRC)["stat_devices"] == ["nvme0n1"]
    s = storage_from_metrics(samples, "/var/lib/mysql", SRC)
    assert (s["name"], s["partition"]) == ("sda", "sda2")
    assert storage_from_metrics(samples, "/run/x", SRC)["name"] is None
    assert "device-mapper" in storage_from_metrics(samples, "/db/x", SRC)["reason"]
    assert storage_from_metrics(samples, "/database", SRC)["name"] == "sda"  # /db is not a prefix of /database
    assert storage_from_metrics(samples, None, SRC) == {}


def test_missing_collectors_are_named() -> None:
    text = "\n".join(ln for ln in _text(1).splitlines() if not ln.startswith("node_disk_flush_requests"))
    assert any("node_disk_flush_requests_total" in m for m in missing_parts(parse_metrics(text)))
    assert missing_parts(parse_metrics(_text(1))) == []


def test_label_escapes_and_special_values() -> None:
    s = parse_line(r'm{a="x\"y",b="c\\d",n="1\n2"} +Inf 1700000000000', 1)
    assert s is not None and s.label("a") == 'x"y' and s.label("b") == "c\\d" and s.label("n") == "1\n2"
    assert s.value == math.inf
    nan = parse_line("m NaN")
    assert nan is not None and math.isnan(nan.value)
    assert parse_line("# HELP m x") is None and parse_line("   ") is None


@pytest.mark.parametrize("bad", ["m{a=1} 2", 'm{a="x} 2', "m", "m 1 2 3", "m abc", "{a=\"b\"} 1", "<html>"])
def test_bad_lines_raise_parse_error_naming_the_line(bad: str) -> None:
    with pytest.raises(ParseError, match="line 7"):
        parse_line(bad, 7)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_any_text_parses_or_raises_parse_error(text: str) -> None:
    try:
        parse_metrics(text)
    except ParseError:
        pass
