"""A node_exporter series that ends mid-step: D over the part it covers, said so, or none; never the rest of the step.

The records are what collectors.node_exporter writes (one ``disk.vda.flushes`` counter a second), the event what
collectors.runner writes for a SourceStopped; the integration test (test_node_exporter_host) kills a real one.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from collectors.node_exporter import scrape, scrape_reason
from diag.core.bundle import Bundle
from diag.core.errors import DiagError
from reports.model.durability_view import remote_device_flushes
from reports.model.evidence import evidence_rows
from reports.model.series import source_stopped

URL = "http://db1:9100/metrics"
T0 = 1_800_000_000.0  # the run's start; the step measures T0 + 10 .. T0 + 14


def _bundle(last_s: float, rate: float = 100.0) -> Bundle:
    """Records every second from the run's start to T0 + ``last_s`` at ``rate`` flushes/s, then a stop event."""
    recs = [{"t": T0 + i, "disk.vda.flushes": int(rate * i), "source": f"node_exporter {URL}"}
            for i in range(int(last_s) + 1)]
    info = {"label": "db1", "local": False, "host_metrics": URL, "storage": {"name": "vda", "stat_devices": ["vda"]}}
    events = [{"t": T0 + last_s + 5, "kind": "collector_off", "collector": "host--db1", "message": "host--db1: ...",
               "stopped_at": T0 + last_s, "reason": "connection refused"}]
    return Bundle(path=Path("/nonexistent"), run={"started": T0, "targets": [info]}, results=[], findings=[],
                  events=events, series={"host--db1": recs})


def test_a_stop_after_half_the_step_gives_d_over_the_covered_part_and_says_so() -> None:
    b = _bundle(13)
    D, src = remote_device_flushes(b, "db1", b.run["targets"][0], T0 + 10, T0 + 14)
    assert D == pytest.approx(100.0)
    assert src.endswith(f"over the step's first 3.0 s of 4.0 s only: node_exporter {URL} stopped answering at "
                        "08:00:13 UTC (13.0 s into the run; connection refused)"), src


def test_a_stop_before_half_the_step_gives_no_d() -> None:
    b = _bundle(11)
    D, src = remote_device_flushes(b, "db1", b.run["targets"][0], T0 + 10, T0 + 14)
    assert D is None
    assert src == (f"not measured: node_exporter {URL} stopped answering at 08:00:11 UTC (11.0 s into the run; "
                   "connection refused); its records cover 1.0 s of the step's 4.0 s")


def test_a_stop_after_the_step_leaves_it_whole() -> None:
    b = _bundle(20)
    D, src = remote_device_flushes(b, "db1", b.run["targets"][0], T0 + 10, T0 + 14)
    assert D == pytest.approx(100.0) and "stopped" not in src, src
    # The evidence rows still say where the series ends (later steps have nothing).
    rows = {r["evidence"]: r for r in evidence_rows(b)["db1"]}
    assert rows["device flushes (D)"]["missing"].startswith("none after 08:00:20 UTC (20.0 s into the run; "
                                                             "connection refused)")


def test_a_collector_off_without_stopped_at_is_not_a_stop() -> None:
    b = _bundle(20)
    b.events[0].pop("stopped_at")
    assert source_stopped(b, "host--db1") is None


def test_why_a_scrape_failed_in_a_few_words_from_real_sockets() -> None:
    """A port nothing listens on refuses; one that accepts and never answers times out."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(DiagError) as refused:
        scrape(f"http://127.0.0.1:{port}/metrics", timeout_s=2.0)
    assert scrape_reason(refused.value) == "connection refused", refused.value
    with socket.socket() as mute:  # listens (the kernel completes the handshake) but never reads or answers
        mute.bind(("127.0.0.1", 0))
        mute.listen(1)
        with pytest.raises(DiagError) as slow:
            scrape(f"http://127.0.0.1:{mute.getsockname()[1]}/metrics", timeout_s=0.3)
    assert scrape_reason(slow.value) == "timed out", slow.value
