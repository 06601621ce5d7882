"""TPC-C ``--think`` on real servers: keying and think times pace each client and stay out of latency.

The specification's times (seconds per transaction) would take minutes to show,
so the test scales them down to KEY_S keying + THINK_S mean think time for every
transaction type. Client processes are forked from the test, and ``pause_ns``
reads ``workloads.tpcc.tpcc.KEYING`` / ``THINK`` when it is called, so monkeypatching
the module reaches the clients. The mini TPC-C (scale 0.05) is the one
test_workload_engines loads on the same session servers: reused when present.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from diag.core.bundle import BundleWriter, safe_name
from diag.core.targets import Target
from workloads import hist
from workloads.tpcc import tpcc
from workloads.driver import DriverOptions
from tests.sweep import sweep_rows

SCALE = 0.05
KEY_S, THINK_S = 0.06, 0.09  # every type: 0.15 s of pause per transaction on average
CLIENTS = 2


@pytest.fixture(params=["postgres", "mysql"])
def target(request: pytest.FixtureRequest) -> Target:
    srv = request.getfixturevalue("pg_server" if request.param == "postgres" else "my_server")
    return srv.target()


def _mean_latency_s(bundle: Path, label: str) -> float:
    hdr = bundle / "artifacts" / f"workload--{safe_name(label)}--tpcc--c{CLIENTS}.hdr"
    return hist.decode(hdr.read_text().strip()).get_mean_value() / 1e6  # µs -> s


def test_think_paces_clients_and_stays_out_of_latency(target: Target, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    opts = DriverOptions(clients=(CLIENTS,), duration_s=1.0, warmup_s=0.0, scale=SCALE)
    free = sweep_rows(target, ["tpcc"], opts, BundleWriter(tmp_path / "free"), progress=None)[0]
    monkeypatch.setattr(tpcc, "KEYING", {k: KEY_S for k in tpcc.KEYING})
    monkeypatch.setattr(tpcc, "THINK", {k: THINK_S for k in tpcc.THINK})
    paced = sweep_rows(target, ["tpcc"], replace(opts, think=True, duration_s=2.5), BundleWriter(tmp_path / "paced"),
                       progress=None)[0]
    assert free["errors"] == {} and paced["errors"] == {}, (free["error_samples"], paced["error_samples"])
    # Latency runs from each transaction's actual start: no keying or think time in it.
    lat_s = _mean_latency_s(tmp_path / "paced", target.label)
    assert paced["latency_ms"]["p50"] < KEY_S * 1000 / 2, paced["latency_ms"]
    assert lat_s < (KEY_S + THINK_S) / 3, lat_s  # with the pause in it, it would be above KEY_S + THINK_S
    # Each client's cycle is its pause plus its transaction: TPM per client follows from the mean pause.
    # (About 35 transactions in 2.5 s; clients draw from seeded generators, so runs differ by a
    # transaction or two, and an unseeded mix would spread about 10%: the band is 4 times that.)
    expected = 60 / (KEY_S + THINK_S + lat_s)
    per_client = paced["tpm"] / CLIENTS
    assert 0.6 * expected <= per_client <= 1.4 * expected, (per_client, expected, lat_s)
    assert free["tpm"] / CLIENTS >= 5 * per_client, (free["tpm"], paced["tpm"])  # the pause is really there
