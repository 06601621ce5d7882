"""Inline SVG charts: self-contained, deterministic, no JavaScript, no network.

Every label passes through markupsafe.escape because series names come from
targets' labels and server strings.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from markupsafe import Markup, escape

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0]
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks: list[float] = []
    v = start
    while v <= hi + step * 0.5 and len(ticks) < 50:
        ticks.append(round(v, 10))
        v += step
    return ticks


def fmt(v: float) -> str:
    """Short human number: 84213 -> 84.2k, 0.00123 -> 0.00123."""
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:.3g}G"
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e3:
        return f"{v / 1e3:.3g}k"
    if a == 0:
        return "0"
    return f"{v:.3g}"


# A series longer than this many points per plot pixel column is reduced for drawing (a line cannot show more).
MAX_POINTS_PER_PX = 2


def reduce_series(points: Sequence[tuple[float, float | None]], buckets: int
                  ) -> list[tuple[float, float | None]]:
    """At most ~2 points per bucket of equal x width: each bucket's lowest and highest point in x order, so a
    stall (one interval at 0) or a spike still shows; a gap (None) in a bucket stays a gap. Short series and
    unordered x (a scaling curve) are returned unchanged."""
    if len(points) <= MAX_POINTS_PER_PX * buckets or buckets < 1:
        return list(points)
    xs = [x for x, _ in points]
    if any(b < a for a, b in zip(xs, xs[1:])):
        return list(points)
    lo, hi = xs[0], xs[-1]
    span = (hi - lo) or 1.0
    groups: dict[int, list[tuple[float, float | None]]] = {}
    for x, y in points:
        groups.setdefault(min(buckets - 1, int((x - lo) / span * buckets)), []).append((x, y))
    out: list[tuple[float, float | None]] = []
    for _, g in sorted(groups.items()):
        vals = [p for p in g if p[1] is not None and math.isfinite(p[1])]
        if len(vals) < len(g):
            out.append((g[0][0], None))
        if vals:
            keep = {min(vals, key=lambda p: p[1] or 0.0), max(vals, key=lambda p: p[1] or 0.0)}  # None: left out
            out.extend(sorted(keep))
    return out


def line_chart(series: Sequence[tuple[str, Sequence[tuple[float, float | None]]]], *, x_label: str,
               y_label: str, width: int = 720, height: int = 260, log_x: bool = False,
               markers: bool = False, bands: Sequence[tuple[float, float, str]] = (),
               intervals: Mapping[str, Sequence[tuple[float, float, float, str]]] | None = None) -> Markup:
    """A line chart; ``series`` is [(name, [(x, y|None), ...])]; None breaks the line.

    ``bands`` are shaded x ranges (start, end, label), e.g. a profile window. ``intervals``: by
    series name, error bars (x, low, high, what) drawn in the series' colour, e.g. a median's interval.
    """
    intervals = intervals or {}
    series = [(name, reduce_series(s, width - 80)) for name, s in series]  # 80: the plot's side margins
    pts = [(x, y) for _, s in series for x, y in s if y is not None and math.isfinite(y)]
    pts += [(x, hi) for v in intervals.values() for x, _, hi, _ in v if math.isfinite(hi)]
    if not pts:
        return Markup('<p class="empty">no data</p>')
    tx = (lambda v: math.log2(v)) if log_x else (lambda v: v)
    xs = [tx(x) for x, _ in pts]
    ys = [y for _, y in pts]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x1 = x0 + 1
    yt = nice_ticks(min(0.0, min(ys)), max(ys) * 1.05 if max(ys) > 0 else 1.0)
    y0, y1 = yt[0], yt[-1]
    ml, mr, mt, mb = 64, 16, 12, 44
    pw, ph = width - ml - mr, height - mt - mb

    def px(x: float) -> float:
        return ml + (tx(x) - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return mt + ph - (y - y0) / ((y1 - y0) or 1) * ph

    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height + 18 * len(series)}"'
           f' width="{width}" role="img" aria-label="{escape(y_label)} against {escape(x_label)}">']
    for b0, b1, blabel in bands:
        xa, xb = max(ml, px(b0)), min(ml + pw, px(b1))
        if xb > xa:
            out.append(f'<rect x="{xa:.1f}" y="{mt}" width="{xb - xa:.1f}" height="{ph}" fill="#fff3c4">'
                       f'<title>{escape(blabel)}</title></rect>')
    for t in yt:
        y = py(t)
        out.append(f'<line x1="{ml}" y1="{y:.1f}" x2="{ml + pw}" y2="{y:.1f}" stroke="#e5e5e5"/>'
                   f'<text x="{ml - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{fmt(t)}</text>')
    if log_x:
        xticks = sorted({x for x, _ in pts})
    else:
        xticks = [v for v in nice_ticks(x0, x1, 6) if x0 <= v <= x1]
    for t in xticks:
        x = px(t)
        out.append(f'<line x1="{x:.1f}" y1="{mt + ph}" x2="{x:.1f}" y2="{mt + ph + 4}" stroke="#444"/>'
                   f'<text x="{x:.1f}" y="{mt + ph + 16}" text-anchor="middle" font-size="11">{fmt(t)}</text>')
    out.append(f'<line x1="{ml}" y1="{mt + ph}" x2="{ml + pw}" y2="{mt + ph}" stroke="#444"/>'
               f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{mt + ph}" stroke="#444"/>')
    out.append(f'<text x="{ml + pw / 2:.1f}" y="{mt + ph + 34}" text-anchor="middle" font-size="12">'
               f'{escape(x_label)}</text>')
    out.append(f'<text x="14" y="{mt + ph / 2:.1f}" text-anchor="middle" font-size="12" '
               f'transform="rotate(-90 14 {mt + ph / 2:.1f})">{escape(y_label)}</text>')
    for i, (name, s) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        segs: list[list[str]] = [[]]
        for xv, yv in s:
            if yv is None or not math.isfinite(yv):
                segs.append([])
                continue
            segs[-1].append(f"{px(xv):.1f},{py(yv):.1f}")
        for seg in segs:
            if len(seg) > 1:
                out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.8" points="{" ".join(seg)}"/>')
            if markers or len(seg) == 1:
                for p in seg:
                    cx, cy = p.split(",")
                    out.append(f'<circle cx="{cx}" cy="{cy}" r="3" fill="{color}"/>')
        out.extend(_error_bars(intervals.get(name, ()), px, py, color))
        ly = height + 4 + 18 * i
        out.append(f'<rect x="{ml}" y="{ly}" width="12" height="12" fill="{color}"/>'
                   f'<text x="{ml + 18}" y="{ly + 10}" font-size="12">{escape(name)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def _error_bars(bars: Sequence[tuple[float, float, float, str]], px: Callable[[float], float],
                py: Callable[[float], float], color: str) -> list[str]:
    """Vertical bars with caps from low to high at x, each with its ``what`` as the hover title."""
    out = []
    for x, lo, hi, what in bars:
        if not (math.isfinite(lo) and math.isfinite(hi)):
            continue
        cx, y0, y1 = px(x), py(lo), py(hi)
        out.append(f'<g class="interval" stroke="{color}" stroke-width="1.4"><title>{escape(what)}</title>'
                   f'<line x1="{cx:.1f}" y1="{y0:.1f}" x2="{cx:.1f}" y2="{y1:.1f}"/>'
                   f'<line x1="{cx - 4:.1f}" y1="{y0:.1f}" x2="{cx + 4:.1f}" y2="{y0:.1f}"/>'
                   f'<line x1="{cx - 4:.1f}" y1="{y1:.1f}" x2="{cx + 4:.1f}" y2="{y1:.1f}"/></g>')
    return out


def stacked_bars(bars: Sequence[tuple[str, Sequence[tuple[str, str, float, float]]]], width: int = 640) -> Markup:
    """Horizontal bars of shares that add to 1, one per (label, [(key, part label, share, µs)]), side by side.

    Colours follow the key (the same component has the same colour on every bar); each segment's title
    (hover) gives its label, share and µs per transaction; a legend lists the parts in order.
    """
    bar_h, gap = 22, 8
    # room for the longest target label at 12 px (about 7 px a character; "postgres@127.0.0.1:33313 (29 µs)"
    # was cut at a fixed 170 px), at most half the chart
    left = min(width // 2, max(170, 7 * max((len(label) for label, _p in bars), default=0) + 12))
    keys: list[tuple[str, str]] = []
    for _label, parts in bars:
        for key, plabel, _s, _us in parts:
            if key not in [k for k, _ in keys]:
                keys.append((key, plabel))
    colour = {k: ("#bbbbbb" if k == "unaccounted" else PALETTE[i % len(PALETTE)]) for i, (k, _l) in enumerate(keys)}
    height = len(bars) * (bar_h + gap) + 18 * ((len(keys) + 1) // 2) + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="stacked" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" '
           f'aria-label="share of the mean transaction\'s time per part, one bar per target">']
    span = width - left - 10
    for i, (label, parts) in enumerate(bars):
        y = i * (bar_h + gap)
        out.append(f'<text x="{left - 6}" y="{y + bar_h * 0.7:.1f}" text-anchor="end" font-size="12">'
                   f'{escape(label)}</text>')
        x = float(left)
        for key, plabel, share, us in parts:
            w = max(0.0, share) * span
            if w <= 0:
                continue
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour[key]}">'
                       f'<title>{escape(plabel)}: {100 * share:.1f}%, {fmt(us)} µs per transaction</title></rect>')
            if w > 34:
                out.append(f'<text x="{x + w / 2:.1f}" y="{y + bar_h * 0.7:.1f}" text-anchor="middle" '
                           f'font-size="11" fill="#fff">{100 * share:.0f}%</text>')
            x += w
    y0 = len(bars) * (bar_h + gap) + 4
    for j, (key, plabel) in enumerate(keys):
        # two columns: a part's label (about 6 px a character at 11 px) fits in half the width
        lx, ly = 10 + (j % 2) * (width // 2), y0 + 18 * (j // 2)
        short = plabel if len(plabel) <= 50 else plabel[:49] + "…"
        out.append(f'<rect x="{lx}" y="{ly}" width="10" height="10" fill="{colour[key]}"/>'
                   f'<text x="{lx + 14}" y="{ly + 9}" font-size="11"><title>{escape(plabel)}</title>'
                   f'{escape(short)}</text>')
    out.append("</svg>")
    return Markup("".join(out))
