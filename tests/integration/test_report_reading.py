"""The report as a person sees it, in headless Chromium at 1400 and 900 px: the verdict on the first screen, no
horizontal scrolling of the page, no text over a chart it is not part of, every folded part opens, the print to PDF
starts with the summary, and axe-core finds no serious or critical accessibility violation. Screenshots are kept
under pytest's tmp dir (and DBDIAG_TEST_ARTIFACTS).

The two-target run, a critical finding and the compare pages are rendered from saved bundles (tests/data/bundles),
so they cost a few browser starts, no server; the run with a lost server is made here, a real throwaway server
killed mid-step. The overlap check is shown to fail on a small page with text planted over a chart. The probe
script is added to a copy of the page only: the report itself ships no script. axe-core comes from the npm
registry, installed once into ~/.cache/dbdiag-test (the README's test command installs npm); a missing npm or
browser fails with the reason."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pypdf
import pytest

from diag.core.bundle import load_bundle
from diag.core.errors import ServerLost
from reports.model.compare import compare
from reports.views.compare_report import render_comparison, render_sets
from reports.model.compare_sets import compare_sets
from reports.views.render import render_bundle

from .test_report_browser import CHROMIUM_FLAGS, chromium

REPO = Path(__file__).resolve().parents[2]
BUNDLES = REPO / "tests" / "data" / "bundles"
AXE_DIR = Path(os.environ.get("DBDIAG_TEST_CACHE", Path.home() / ".cache" / "dbdiag-test"))
AXE_JS = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
WIDTHS = (1400, 900)
PROBE_BUDGET_MS = 20000  # virtual time for the load event, axe's run and the probe's own work

# Text over a chart: each text node's line boxes (Range.getClientRects: where its glyphs are drawn, not the box of
# its element, which may be a full-width block beside a chart) against each outermost <svg> it is not inside. Both
# are cut to what their scrolling or clipping ancestors leave in view (a wide flame graph scrolls inside its box;
# its hidden part covers nothing). An overlap of more than 1 px each way is reported: where, what, over which chart.
OVERLAP_JS = """
function textOverCharts() {
  const clip = (el, r) => {
    let x0 = r.left, y0 = r.top, x1 = r.right, y1 = r.bottom;
    for (let a = el; a && a !== document.documentElement; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (s.overflowX === 'visible' && s.overflowY === 'visible') continue;
      const c = a.getBoundingClientRect();
      if (s.overflowX !== 'visible') { x0 = Math.max(x0, c.left); x1 = Math.min(x1, c.right); }
      if (s.overflowY !== 'visible') { y0 = Math.max(y0, c.top); y1 = Math.min(y1, c.bottom); }
    }
    return {x0, y0, x1, y1};
  };
  // Drawn at all: not in a closed <details> (its content keeps a layout box there but is not painted),
  // display: none or visibility: hidden.
  const shown = el => el.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true});
  const hit = (a, b) => Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0) > 1 && Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0) > 1;
  const name = c => c.getAttribute('aria-label') || (c.querySelector('title') || {}).textContent
      || (c.closest('[id]') || {}).id || 'svg';
  const charts = [...document.querySelectorAll('svg')].filter(c => !c.parentElement.closest('svg'))
      .map(c => ({el: c, box: clip(c.parentElement, c.getBoundingClientRect())}))
      .filter(c => shown(c.el) && c.box.x1 - c.box.x0 > 1 && c.box.y1 - c.box.y0 > 1);
  const found = [], range = document.createRange();
  const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walk.nextNode(); n; n = walk.nextNode()) {
    const el = n.parentElement;
    if (!n.data.trim() || !el || el.closest('script, style, title, #probe-result')) continue;
    if (!shown(el)) continue;
    range.selectNodeContents(n);
    for (const r of range.getClientRects()) {
      const raw = {x0: r.left, y0: r.top, x1: r.right, y1: r.bottom};
      for (const c of charts) {
        if (c.el.contains(n) || !hit(raw, c.box) || !hit(clip(el, r), c.box)) continue;
        found.push({text: n.data.trim().slice(0, 60), in: el.tagName + (el.className && el.className.baseVal === undefined
            ? '.' + el.className : ''), chart: String(name(c.el)).slice(0, 60),
            text_box: [r.left, r.top, r.right, r.bottom].map(Math.round),
            chart_box: [c.box.x0, c.box.y0, c.box.x1, c.box.y1].map(Math.round)});
      }
    }
  }
  return found;
}
"""

# Measures the page, opens every <details>, runs axe, and writes the results into the DOM that --dump-dom prints.
PROBE = """
<script>
""" + OVERLAP_JS + """
window.addEventListener('load', async () => {
  const d = document.documentElement, r = {};
  r.overlap_closed = textOverCharts();
  const summary = document.getElementById('summary');
  r.verdict_top = summary ? summary.getBoundingClientRect().top : null;
  r.verdict_bottom = summary ? summary.closest('section').getBoundingClientRect().bottom : null;
  r.viewport_h = window.innerHeight;
  r.critical = [...document.querySelectorAll('.sev-critical')].slice(0, 1).map(e => ({text: e.textContent.trim()
      .slice(0, 200), top: e.getBoundingClientRect().top, bottom: e.getBoundingClientRect().bottom}))[0] || null;
  r.overflow_closed = d.scrollWidth - d.clientWidth;
  const ds = [...document.querySelectorAll('details')];
  r.details = ds.length;
  ds.forEach(x => { x.open = true; });
  r.opened = ds.filter(x => x.open && x.lastElementChild && x.lastElementChild.getBoundingClientRect().height > 0).length;
  r.overflow_open = d.scrollWidth - d.clientWidth;
  r.overlap_open = textOverCharts();
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


def _assert_as_seen(r: dict, name: str) -> None:
    """What every page must pass, at any width (``r``: the probe's results)."""
    assert r["overflow_closed"] <= 0 and r["overflow_open"] <= 0, r  # no horizontal scrolling of the page
    assert r["wide"] == [], r
    assert r["overlap_closed"] == [] and r["overlap_open"] == [], r  # no text over a chart, folded or open
    assert r["opened"] == r["details"] and (r["details"] > 0 or name == "sets"), r  # every folded part opens
    assert "axe_error" not in r, r
    bad = [v for v in r["axe"] if v["impact"] in ("serious", "critical")]
    assert bad == [], bad


@pytest.mark.parametrize("name,width", [(n, w) for n in ("two_targets", "critical", "compare") for w in WIDTHS]
                         + [("sets", 900)])
def test_page_as_seen(pages, name, width, tmp_path):
    page = pages[name]
    r = _probe(page, width, tmp_path, axe_js())
    if name != "sets":
        _screenshot(page, width, tmp_path)
    _assert_as_seen(r, name)
    if name in ("two_targets", "critical"):
        assert r["verdict_top"] is not None and r["verdict_top"] < r["viewport_h"] / 2, r  # verdict on screen one
    if name == "two_targets" and width == 1400:  # the whole verdict, both targets and the pair, on the first screen
        assert r["verdict_bottom"] <= r["viewport_h"], r


@pytest.fixture(scope="module")
def lost_report(killed_server_run: tuple[Path, int, str]) -> Path:
    """The report of a run whose first target's server was killed mid-step (SIGKILL to its postmaster), the
    second target running on: rendered by the run itself, collectors on. The run test_lost_server checks
    (tests/conftest.py)."""
    out, rc, err = killed_server_run
    assert rc == ServerLost.exit_code, err[-3000:]
    findings = json.loads((out / "findings.json").read_text())["findings"]
    assert findings[0]["category"] == "server_lost" and findings[0]["severity"] == "critical", findings[:1]
    return out / "report.html"


@pytest.mark.parametrize("width", WIDTHS)
def test_lost_server_page_as_seen(lost_report, width, tmp_path):
    """A run with a critical finding, made by a real lost server: the same checks, and the loss on screen one."""
    r = _probe(lost_report, width, tmp_path, axe_js())
    _screenshot(lost_report, width, tmp_path)
    _assert_as_seen(r, "server_lost")
    crit = r["critical"]
    assert crit and crit["text"].startswith("Critical:") and "(gone)" in crit["text"], r
    assert "went away" in crit["text"] or "lost" in crit["text"].lower(), crit
    assert 0 <= crit["top"] and crit["bottom"] <= r["viewport_h"], r  # the critical finding is in the first screen


# A chart with its own labels, text beside it, and text cut off by a clipping box whose hidden part runs under the
# chart (none of them over it); PLANTED adds a paragraph moved up onto the chart.
OVERLAP_PAGE = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>overlap check</title></head>
<body style="margin: 8px; font: 14px sans-serif">
<p>A paragraph above the chart.</p>
<div style="display: flex; gap: 8px">
  <div style="width: 120px; overflow: hidden; white-space: nowrap">clipped text that runs on far under the chart</div>
  <svg class="chart" xmlns="http://www.w3.org/2000/svg" width="400" height="200" role="img" aria-label="planted chart">
    <rect x="0" y="0" width="400" height="200" fill="#eee"/><text x="10" y="20">own label</text></svg>
</div>
{planted}
<p>A paragraph below the chart.</p>
</body></html>
"""
PLANTED = '<p style="position: relative; top: -120px; margin-left: 200px">planted text over the chart</p>'


@pytest.mark.parametrize("width", WIDTHS)
def test_overlap_check_finds_planted_text(width, tmp_path):
    """The page check above can fail: it finds text moved onto a chart, and only that."""
    clean, planted = tmp_path / "clean.html", tmp_path / "planted.html"
    clean.write_text(OVERLAP_PAGE.format(planted=""), encoding="utf-8")
    planted.write_text(OVERLAP_PAGE.format(planted=PLANTED), encoding="utf-8")
    r = _probe(clean, width, tmp_path, axe_js())
    assert r["overlap_closed"] == [] and r["overlap_open"] == [], r
    r = _probe(planted, width, tmp_path, axe_js())
    found = [{k: o[k] for k in ("text", "in", "chart")} for o in r["overlap_closed"]]
    assert found == [{"text": "planted text over the chart", "in": "P", "chart": "planted chart"}], r


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
