"""Real remote-host agents on loopback for the integration tests: Prometheus node_exporter (Debian:
prometheus-node-exporter), started on a free port with the collectors dbdiag's host sections read."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator

import pytest

from diag import servers

COLLECTORS = ("cpu", "stat", "diskstats", "meminfo", "loadavg", "filesystem")


def node_exporter_binary() -> str:
    exe = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if not exe:
        pytest.fail("node_exporter is not installed (Debian: apt-get install prometheus-node-exporter)")
    return exe


def serve_node_exporter() -> tuple[subprocess.Popen[str], str]:
    """node_exporter on a free loopback port with the collectors the host sections read, and its /metrics URL."""
    port = servers.free_port()
    proc = subprocess.Popen([node_exporter_binary(), f"--web.listen-address=127.0.0.1:{port}",
                             "--collector.disable-defaults", *(f"--collector.{c}" for c in COLLECTORS)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/metrics"
    deadline = time.monotonic() + 10
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"node_exporter did not serve {url}: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.1)
    return proc, url


@contextlib.contextmanager
def node_exporter_running() -> Iterator[str]:
    """A node_exporter for the block (a module's fixture): its /metrics URL; stopped at the end."""
    proc, url = serve_node_exporter()
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
