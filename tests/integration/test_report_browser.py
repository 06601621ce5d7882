"""The report in a real headless Chromium: no console errors, findings and scaling chart present,
untrusted server text stays inert.

Needs Debian's chromium (installed by the README's test command); a missing browser fails with the reason.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                  "--enable-logging=stderr", "--v=0"]


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        pytest.fail("chromium is not installed: apt-get install -y chromium chromium-driver")
    return exe


@pytest.fixture(scope="module")
def hostile_bundle(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("browser")
    script = d / "hostile.sql"
    # Every transaction fails; the server's error message quotes the script tag back to us.
    script.write_text("\\set id random(1, 10)\nSELECT ('<script>document.title=\"pwned\"</script>' || :id)::int;\n")
    out = d / "bundle"
    p = subprocess.run([sys.executable, "-m", "diag", "run", "embedded:postgres", "-w", "custom", "--script",
                        str(script), "-c", "1,2", "-T", "1", "--warmup", "0", "--no-profile", "--fsync-seconds", "0.1",
                        "--out", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def test_report_in_chromium(hostile_bundle, tmp_path):
    report = hostile_bundle / "report.html"
    html = report.read_text()
    assert "<script" not in html.replace("&lt;script", "")  # the report itself ships no script at all
    assert "&lt;script&gt;document.title=" in html  # the server's message is shown, escaped
    p = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                        report.as_uri()], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    console = [ln for ln in p.stderr.splitlines() if ":CONSOLE" in ln]
    assert console == [], console
    dom = p.stdout
    title = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert title and "pwned" not in title.group(1)
    assert "<script" not in dom.replace("&lt;script", "")
    assert 'id="findings-table"' in dom
    assert 'id="scaling-chart"' in dom and "<svg" in dom.split('id="scaling-chart"', 1)[1][:400]
    assert 'id="results-table"' in dom
