"""Real remote-host agents on loopback for the integration tests: Prometheus node_exporter (Debian:
prometheus-node-exporter), started on a free port with the collectors dbdiag's host sections read."""

from __future__ import annotations

import base64
import contextlib
import shutil
import subprocess
import time
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from diag.core import servers

COLLECTORS = ("cpu", "stat", "diskstats", "meminfo", "loadavg", "filesystem")


def node_exporter_binary() -> str:
    exe = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if not exe:
        pytest.fail("node_exporter is not installed (Debian: apt-get install prometheus-node-exporter)")
    return exe


def serve_node_exporter(web_config: Path | None = None,
                        auth: tuple[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """node_exporter on a free loopback port with the collectors the host sections read, and its /metrics URL.

    ``web_config``: node_exporter's --web.config.file (basic auth users); ``auth`` (user, password) is then
    what the readiness check logs in with."""
    port = servers.free_port()
    proc = subprocess.Popen([node_exporter_binary(), f"--web.listen-address=127.0.0.1:{port}",
                             *([f"--web.config.file={web_config}"] if web_config else []),
                             "--collector.disable-defaults", *(f"--collector.{c}" for c in COLLECTORS)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/metrics"
    headers = {"Authorization": "Basic " + base64.b64encode(":".join(auth).encode()).decode()} if auth else {}
    deadline = time.monotonic() + 10
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=1) as r:
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


def bcrypt_hash(password: str) -> str:
    """A bcrypt hash of ``password`` for node_exporter's web config (cost 4: the check is per scrape)."""
    with warnings.catch_warnings():  # crypt is deprecated (gone in 3.13) but is this Python's only bcrypt
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt
    if crypt.METHOD_BLOWFISH not in crypt.methods:
        pytest.fail("this system's crypt(3) cannot make bcrypt hashes (node_exporter's basic auth needs one)")
    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))


@contextlib.contextmanager
def node_exporter_with_login(tmp: Path, user: str, password: str) -> Iterator[str]:
    """A node_exporter that answers only to ``user``/``password`` (HTTP basic auth): its /metrics URL, without
    the credentials."""
    cfg = tmp / "web.yml"
    cfg.write_text(f"basic_auth_users:\n  {user}: '{bcrypt_hash(password)}'\n")
    proc, url = serve_node_exporter(cfg, (user, password))
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
