"""The report as a person sees it, in headless Chromium at 1400 and 900 px: the verdict on the first screen, no
horizontal scrolling of the page, every folded part opens, the print to PDF starts with the summary, and axe-core
finds no serious or critical accessibility violation. Screenshots are kept under pytest's tmp dir.

Rendered from saved bundles (tests/data/bundles: two targets compared; a critical finding), so the test costs a
few browser starts, no server. The probe script is added to a copy of the page only: the report itself ships no
script. axe-core comes from the npm registry, installed once into ~/.cache/dbdiag-test (the README's test
command installs npm); a missing npm or browser fails with the reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pypdf
import pytest

from diag.bundle import load_bundle
from reports.compare import compare
from reports.compare_report import render_comparison, render_sets
from reports.compare_sets import compare_sets
from reports.render import render_bundle

from .test_report_browser import CHROMIUM_FLAGS, chromium

REPO = Path(__file__).resolve().parents[2]
BUNDLES = REPO / "tests" / "data" / "bundles"
AXE_DIR = Path(os.environ.get("DBDIAG_TEST_CACHE", Path.home() / ".cache" / "dbdiag-test"))
AXE_JS = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
WIDTHS = (1400, 900)
PROBE_BUDGET_MS = 20000  # virtual time for the load event, axe's run and the probe's own work

# Measures the page, opens every <details>, runs axe, and writes the results into the DOM that --dump-dom prints.
PROBE = """
<script>
window.addEventListener('load', async () => {
  const d = document.documentElement, r = {};
  const summary = document.getElementById('summary');
  r.verdict_top = summary ? summary.getBoundingClientRect().top : null;
  r.verdict_bottom = summary ? summary.closest('section').getBoundingClientRect().bottom : null;
  r.viewport_h = window.innerHeight;
  r.overflow_closed = d.scrollWidth - d.clientWidth;
  const ds = [...document.querySelectorAll('details')];
  r.details = ds.length;
  ds.forEach(x => { x.open = true; });
  r.opened = ds.filter(x => x.open && x.lastElementChild && x.lastElementChild.getBoundingClientRect().height > 0).length;
  r.overflow_open = d.scrollWidth - d.clientWidth;
  r.wide = [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > d.clientWidth + 1
      && !e.closest('table, .flame, .prof-side, pre')).slice(0, 5).map(e => e.tagName + '.' + e.className);
  try {
    const res = await axe.run(document, {resultTypes: ['violations']});
    r.axe = res.violations.map(v => ({id: v.id, impact: v.impact, n: v.nodes.length,
                                      where: v.nodes.slice(0, 2).map(n => n.target.join(' '))}));
  } catch (e) { r.axe_error = String(e); }
  const out = document.createElement('pre'); out.id = 'probe-result'; out.textContent = JSON.stringify(r);
  document.body.appendChild(out);
});
</script>
"""


def axe_js() -> str:
    """axe-core's script, installed from the npm registry into the cache on first use."""
    if not AXE_JS.exists():
        npm = shutil.which("npm")
        if not npm:
            pytest.fail("npm is not installed (apt-get install -y npm): the accessibility check needs axe-core")
        AXE_DIR.mkdir(parents=True, exist_ok=True)
        p = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(AXE_DIR), "axe-core@4"],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0 and AXE_JS.exists(), f"npm install axe-core failed: {p.stderr[-2000:]}"
    return AXE_JS.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """The default-like run (two targets), a run with a critical finding, and a compare page."""
    d = tmp_path_factory.mktemp("reading")
    out = {}
    for name, bundle in (("two_targets", "point_select"), ("critical", "insert_pg_fsync_off")):
        shutil.copytree(BUNDLES / bundle, d / bundle)
        out[name] = render_bundle(d / bundle)
    shutil.copytree(BUNDLES / "repeat_insert_pg_noisy", d / "noisy")  # two targets with statements
    pair = load_bundle(d / "noisy")
    page = d / "compare.html"
    page.write_text(render_comparison([pair], compare(pair)), encoding="utf-8")
    out["compare"] = page
    sets = d / "compare-vs.html"
    sets.write_text(render_sets([pair], [pair], compare_sets([pair], [pair])), encoding="utf-8")
    out["sets"] = sets
    return out


def _probe(page: Path, width: int, tmp: Path, axe: str) -> dict:
    probed = tmp / f"probe-{page.stem}-{width}.html"
    html = page.read_text(encoding="utf-8")
    probed.write_text(html.replace("</body>", f"<script>{axe}</script>{PROBE}</body>"), encoding="utf-8")
    p = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'profile'}",
                        f"--window-size={width},1000", f"--virtual-time-budget={PROBE_BUDGET_MS}", "--dump-dom",
                        probed.as_uri()], capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    m = re.search(r'<pre id="probe-result">(.*?)</pre>', p.stdout, re.S)
    assert m, "the probe did not finish: " + p.stderr[-2000:]
    return json.loads(m.group(1).replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


def _screenshot(page: Path, width: int, tmp: Path) -> Path:
    shot = tmp / f"{page.parent.name}-{page.stem}-{width}.png".replace("reading0-", "")
    p = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'profile'}", "--hide-scrollbars",
                        f"--window-size={width},1000", f"--screenshot={shot}", page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and shot.exists() and shot.stat().st_size > 10_000, p.stderr[-2000:]
    keep = os.environ.get("DBDIAG_TEST_ARTIFACTS")
    if keep:  # pytest keeps only its last few tmp dirs: a place to look at them later
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
    return shot


@pytest.mark.parametrize("name,width", [(n, w) for n in ("two_targets", "critical", "compare") for w in WIDTHS]
                         + [("sets", 900)])
def test_page_as_seen(pages, name, width, tmp_path):
    page = pages[name]
    r = _probe(page, width, tmp_path, axe_js())
    if name != "sets":
        _screenshot(page, width, tmp_path)
    assert r["overflow_closed"] <= 0 and r["overflow_open"] <= 0, r  # no horizontal scrolling of the page
    assert r["wide"] == [], r
    assert r["opened"] == r["details"] and (r["details"] > 0 or name == "sets"), r  # every folded part opens
    assert "axe_error" not in r, r
    bad = [v for v in r["axe"] if v["impact"] in ("serious", "critical")]
    assert bad == [], bad
    if name in ("two_targets", "critical"):
        assert r["verdict_top"] is not None and r["verdict_top"] < r["viewport_h"] / 2, r  # verdict on screen one
    if name == "two_targets" and width == 1400:  # the whole verdict, both targets and the pair, on the first screen
        assert r["verdict_bottom"] <= r["viewport_h"], r


def test_verdict_reads_without_script(pages):
    """The verdict is plain HTML: each target's limit and the pair's gap are in the page's text."""
    html = pages["two_targets"].read_text(encoding="utf-8")
    head = html.split('id="summary"', 1)[1].split("</section>", 1)[0]
    assert "<script" not in html
    assert head.count("What limits it: <b>") == 2 and "faster than" in head and "What would move it:" in head
    assert "statements-versus" in pages["compare"].read_text(encoding="utf-8")  # A vs B per statement
    crit = pages["critical"].read_text(encoding="utf-8").split('id="summary"', 1)[1].split("</section>", 1)[0]
    assert "Critical: Not durable: fsync=off" in crit


def test_prints_summary_first(pages, tmp_path):
    pdf = tmp_path / "report.pdf"
    p = subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                        "--no-pdf-header-footer", f"--print-to-pdf={pdf}", pages["two_targets"].as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and pdf.exists(), p.stderr[-2000:]
    reader = pypdf.PdfReader(str(pdf))
    first = reader.pages[0].extract_text()
    assert "Verdict" in first and "What limits it" in first and "faster than" in first, first[:800]
