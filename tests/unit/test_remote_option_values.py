"""--host-metrics and --ssh values a user can mistype are refused when the run is made, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.core.errors import UsageError
from diag.run import Run, RunOptions
from workloads.driver import DriverOptions

TARGET = "db1=postgresql://bench@127.0.0.1:1/bench"  # never connected to: the values are refused first


def _run(tmp_path: Path, **kw: dict[str, str]) -> Run:
    return Run(RunOptions(targets=[TARGET], workloads=["point-select"], driver=DriverOptions(),
                          out=tmp_path / "b", **kw))


@pytest.mark.parametrize("url", ["notaurl", "127.0.0.1:9100", "ftp://db1:9100/metrics", "http:///metrics"])
def test_a_mistyped_node_exporter_address_is_refused(tmp_path: Path, url: str) -> None:
    with pytest.raises(UsageError, match=r"--host-metrics db1=.*: node_exporter's address is http://HOST:PORT"):
        _run(tmp_path, host_metrics={"db1": url})
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("spec", ["@", "user@", "@db1", "-oProxyCommand=touch x", "-oProxyCommand=x@db1", "a b"])
def test_an_ssh_destination_that_ssh_would_misread_is_refused(tmp_path: Path, spec: str) -> None:
    with pytest.raises(UsageError, match="expected USER@HOST or a Host of your ssh config"):
        _run(tmp_path, ssh={"db1": spec})


@pytest.mark.parametrize("spec", ["root@db1", "db1", "bench@10.0.0.7"])
def test_well_formed_values_pass(tmp_path: Path, spec: str) -> None:
    run = _run(tmp_path, ssh={"db1": spec}, host_metrics={"db1": "http://db1:9100/metrics"})
    assert run.opts.ssh == {"db1": spec}
