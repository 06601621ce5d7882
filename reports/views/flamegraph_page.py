"""An interactive flame graph page: click a frame to zoom into it, search frames by name, reset.

The report itself ships no script; each profile's graph is also written beside it as a standalone page
(``artifacts/*.flame.html``) holding the same SVG (:func:`reports.views.flamegraph.flamegraph_svg`) and a small
script. The script reads frame names with ``textContent`` and writes them back only as text, so untrusted
symbol names stay inert; it loads nothing. ``#search=NAME&zoom=NAME`` in the address applies a search
and a zoom on load (also how the browser test drives it headless).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

from reports.views.flamegraph import CHAR_W, PAD_X, flamegraph_svg

PAGE_W = 1200

_SCRIPT = """
(function () {
  var svg = document.querySelector('#graph svg');
  var W = %(width)d, PAD = %(pad)d, CW = %(char_w)s;
  var frames = Array.prototype.map.call(svg.querySelectorAll('g'), function (g) {
    var r = g.querySelector('rect'), t = g.querySelector('title'), l = g.querySelector('text');
    var title = t.textContent, name = title.slice(0, title.lastIndexOf(' ('));
    if (!l) { l = document.createElementNS('http://www.w3.org/2000/svg', 'text'); g.appendChild(l); }
    return {g: g, r: r, l: l, name: name, x: +r.getAttribute('x'), w: +r.getAttribute('width') + 0.5,
            y: +r.getAttribute('y'), fill: r.getAttribute('fill')};
  });
  function label(f, x, w) {
    var fit = Math.floor((w - 6) / CW), s = f.name;
    f.l.textContent = fit < 3 ? '' : (s.length <= fit ? s : s.slice(0, fit - 2) + '..');
    f.l.setAttribute('x', (x + 3).toFixed(2)); f.l.setAttribute('y', f.y + 12);
  }
  function draw(x0, w0, y0) {
    var k = (W - 2 * PAD) / w0;
    frames.forEach(function (f) {
      var inside = f.x >= x0 - 0.01 && f.x + f.w <= x0 + w0 + 0.01 && f.y <= y0;
      var below = f.y > y0 && f.x <= x0 + 0.01 && f.x + f.w >= x0 + w0 - 0.01;
      if (!inside && !below) { f.g.style.display = 'none'; return; }
      f.g.style.display = '';
      var x = below ? PAD : PAD + (f.x - x0) * k, w = below ? W - 2 * PAD : f.w * k;
      f.r.setAttribute('x', x.toFixed(2)); f.r.setAttribute('width', Math.max(w - 0.5, 0.1).toFixed(2));
      f.g.setAttribute('data-zoomed', inside && f.x === x0 && f.y === y0 ? 'yes' : '');
      label(f, x, w);
    });
  }
  var root = frames[0];
  function zoom(f) { draw(f.x, f.w, f.y); }
  function search(term) {
    var hits = 0;
    frames.forEach(function (f) {
      var hit = term && f.name.indexOf(term) >= 0;
      f.r.setAttribute('fill', hit ? 'rgb(230,0,230)' : f.fill);
      f.g.setAttribute('data-match', hit ? 'yes' : '');
      if (hit) { hits++; }
    });
    document.getElementById('matches').textContent = term ? hits + ' frames match' : '';
  }
  frames.forEach(function (f) {
    f.g.style.cursor = 'pointer';
    f.g.addEventListener('click', function () { zoom(f); });
  });
  document.getElementById('reset').addEventListener('click', function () { zoom(root); });
  document.getElementById('search').addEventListener('input', function (e) { search(e.target.value); });
  var args = {};
  location.hash.slice(1).split('&').forEach(function (kv) {
    var i = kv.indexOf('=');
    if (i > 0) { args[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1)); }
  });
  if (args.search) { document.getElementById('search').value = args.search; search(args.search); }
  if (args.zoom) {
    var z = frames.filter(function (f) { return f.name === args.zoom; })[0];
    if (z) { zoom(z); }
  }
})();
"""


def interactive_page(folded: Mapping[str, int], title: str, unit: str = "samples") -> str:
    """A standalone HTML page with the flame graph of ``folded``, zoom on click and search."""
    svg = flamegraph_svg(folded, title, width=PAGE_W, unit=unit)
    script = _SCRIPT % {"width": PAGE_W, "pad": PAD_X, "char_w": repr(CHAR_W)}
    t = escape(title)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{t}</title><style>body {{ font: 14px system-ui, sans-serif; margin: 12px; }} "
        "#bar { margin-bottom: 8px; } #matches { color: #555; margin-left: 8px; }</style></head><body>\n"
        "<div id=\"bar\"><button id=\"reset\" type=\"button\">Reset zoom</button> "
        "<input id=\"search\" type=\"search\" placeholder=\"search frames\" size=\"40\"><span id=\"matches\"></span> "
        "<span style=\"color:#777\">click a frame to zoom into it</span></div>\n"
        f"<div id=\"graph\">{svg}</div>\n<script>{script}</script>\n</body></html>\n"
    )


def write_page(bundle_dir: Path, folded_rel: str, folded: Mapping[str, int], title: str,
               unit: str = "samples") -> str:
    """Write the page beside its folded file (``X.folded`` -> ``X.flame.html``); its path relative to the bundle.

    "" when the bundle cannot be written (a read-only copy): the report then links no page.
    """
    rel = folded_rel.removesuffix(".folded") + ".flame.html"
    path = bundle_dir / rel
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(interactive_page(folded, title, unit), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return ""
    return rel
