"""Self-contained SVG flame graphs from folded stacks ("a;b;c" -> samples).

The SVG needs no script and no network: each frame is a ``<g>`` holding a
``<title>`` (the browser's own tooltip: full name, samples, percent), a
``<rect>`` and, when it fits, a ``<text>`` label. It can be inlined into the
HTML report or saved as a file. Output is deterministic (children sorted by
name, colours from a CRC of the name, fixed number formats), so re-rendering an
old run bundle gives the same bytes.

Frame names are untrusted (symbol names from binaries on the host, process
titles): every one is XML-escaped and characters that XML 1.0 forbids are
replaced.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

FRAME_H = 16  # px per stack level
FONT_PX = 12
CHAR_W = 7.0  # px per character of a 12 px Verdana label, rounded up so labels never overflow
PAD_X = 10
TOP = 36  # title and subtitle
BOTTOM = 8
MIN_FRACTION = 0.001  # frames narrower than 0.1% of all samples are omitted (not drawn, not labelled)
# The report's inline graphs (760 px) keep frames of at least 0.5% (3.8 px, about the narrowest a reader can hover);
# that halves their bytes (a 4-step report's profiles: 223 KB to ~110 KB). Every frame stays in the interactive page.
INLINE_MIN_FRACTION = 0.005

_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


@dataclass
class _Node:
    name: str
    total: int = 0
    children: dict[str, _Node] = field(default_factory=dict)


def _xml(text: str) -> str:
    """Escape for element text and double-quoted attributes."""
    return escape(_BAD_XML.sub("\ufffd", text), {'"': "&quot;", "'": "&#39;"})


def _build(folded: Mapping[str, int]) -> _Node:
    root = _Node("all")
    for stack, count in folded.items():
        if count <= 0:
            continue
        root.total += count
        node = root
        for name in stack.split(";"):
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = _Node(name)
            child.total += count
            node = child
    return root


def _colour(name: str, depth: int) -> str:
    """Warm hues like flamegraph.pl; kernel frames orange-brown, unresolved grey; the
    root and the two top levels (process kind, program name) blue-grey. Stable across runs."""
    h = zlib.crc32(name.encode("utf-8", "replace"))
    if depth <= 2:
        return f"rgb({150 + h % 30},{170 + h % 30},{200 + h % 30})"
    if name.startswith("[unknown]") or name.startswith("0x"):
        g = 180 + h % 30
        return f"rgb({g},{g},{g})"
    if name.endswith("_[k]"):
        return f"rgb({200 + h % 40},{120 + (h >> 8) % 50},{40 + (h >> 16) % 30})"
    return f"rgb({205 + h % 50},{(h >> 8) % 190},{(h >> 16) % 55})"


def _label(name: str, width_px: float) -> str:
    fit = int((width_px - 6) / CHAR_W)
    if fit < 3:
        return ""
    return name if len(name) <= fit else name[: fit - 2] + ".."


def flamegraph_svg(folded: Mapping[str, int], title: str, width: int = 1200,
                   min_fraction: float = MIN_FRACTION, unit: str = "samples") -> str:
    """An SVG flame graph (root at the bottom, leaves on top) ``width`` px wide.

    Frame width is proportional to samples including children; frames under
    ``min_fraction`` of all samples are left out with their children (the
    parent keeps its full width, so the gap shows). Same input, same string.
    ``unit`` names what the counts are ("samples", "µs off CPU").
    """
    root = _build(folded)
    total = root.total
    inner = width - 2 * PAD_X
    scale = inner / total if total else 0.0
    min_samples = total * min_fraction

    boxes: list[tuple[int, float, float, _Node]] = []  # depth, x, width px, node

    def place(node: _Node, depth: int, x: float) -> None:
        boxes.append((depth, x, node.total * scale, node))
        cx = x
        for name in sorted(node.children):
            child = node.children[name]
            if child.total >= min_samples and child.total * scale >= 0.1:
                place(child, depth + 1, cx)
            cx += child.total * scale

    if total:
        place(root, 0, float(PAD_X))
    depth_max = max((b[0] for b in boxes), default=0)
    height = TOP + (depth_max + 1) * FRAME_H + BOTTOM
    base_y = height - BOTTOM - FRAME_H  # the root's row

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Verdana, sans-serif" font-size="{FONT_PX}">',
        f"<title>{_xml(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f8f8f0"/>',
        f'<text x="{width / 2:.1f}" y="18" text-anchor="middle" font-size="16">{_xml(title)}</text>',
        f'<text x="{width / 2:.1f}" y="32" text-anchor="middle" fill="#555">'
        f"{total} {_xml(unit)}; width = share incl. callees; hover a frame for details</text>",
    ]
    if not total:
        out.append(f'<text x="{width / 2:.1f}" y="{height - BOTTOM - 2}" text-anchor="middle">no samples</text>')
    for depth, x, w, node in boxes:
        y = base_y - depth * FRAME_H
        pct = 100.0 * node.total / total
        label = _label(node.name, w)
        out.append(
            f"<g><title>{_xml(node.name)} ({node.total} {_xml(unit)}, {pct:.2f}%)</title>"
            f'<rect x="{x:.2f}" y="{y}" width="{max(w - 0.5, 0.1):.2f}" height="{FRAME_H - 1}" '
            f'rx="2" fill="{_colour(node.name, depth)}"/>'
            + (f'<text x="{x + 3:.2f}" y="{y + FRAME_H - 4}">{_xml(label)}</text>' if label else "")
            + "</g>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


@dataclass
class _DiffNode:
    name: str
    a: float = 0.0
    b: float = 0.0
    children: dict[str, _DiffNode] = field(default_factory=dict)


def _build_diff(a: Mapping[str, float], b: Mapping[str, float]) -> _DiffNode:
    root = _DiffNode("all")
    for side, folded in (("a", a), ("b", b)):
        for stack, value in folded.items():
            if value <= 0:
                continue
            node = root
            setattr(node, side, getattr(node, side) + value)
            for name in stack.split(";"):
                node = node.children.setdefault(name, _DiffNode(name))
                setattr(node, side, getattr(node, side) + value)
    return root


def _diff_colour(delta: float, max_delta: float) -> str:
    """FlameGraph's differential colours: red where B spends more, blue where less, white for no change."""
    if max_delta <= 0 or delta == 0:
        return "rgb(250,250,250)"
    v = int(210 * (1 - min(1.0, abs(delta) / max_delta)))
    return f"rgb(255,{v},{v})" if delta > 0 else f"rgb({v},{v},255)"


def diff_flamegraph_svg(a: Mapping[str, float], b: Mapping[str, float], title: str, names: tuple[str, str],
                        unit: str = "µs/tx", width: int = 1200, min_fraction: float = MIN_FRACTION) -> str:
    """A differential flame graph of B against A, as FlameGraph's difffolded.pl + flamegraph.pl draw it.

    Widths are B's values (``b``: stack -> value, already normalised, e.g. CPU µs per transaction);
    each frame is red where B's inclusive value exceeds A's, blue where it falls short, the deeper the
    colour the larger the change against the largest one. Frames only A has are not drawn (B has no
    width for them): their total is said in the subtitle. Same input, same string.
    """
    root = _build_diff(a, b)
    inner = width - 2 * PAD_X
    scale = inner / root.b if root.b else 0.0
    min_value = root.b * min_fraction
    boxes: list[tuple[int, float, float, _DiffNode]] = []
    max_delta = 0.0

    def place(node: _DiffNode, depth: int, x: float) -> None:
        nonlocal max_delta
        boxes.append((depth, x, node.b * scale, node))
        if depth > 0:
            max_delta = max(max_delta, abs(node.b - node.a))
        cx = x
        for name in sorted(node.children):
            child = node.children[name]
            if child.b >= min_value and child.b > 0 and child.b * scale >= 0.1:
                place(child, depth + 1, cx)
            cx += child.b * scale

    if root.b:
        place(root, 0, float(PAD_X))
    gone = _only_in_a(root)
    depth_max = max((d for d, *_ in boxes), default=0)
    height = TOP + (depth_max + 1) * FRAME_H + BOTTOM
    base_y = height - BOTTOM - FRAME_H
    na, nb = names
    sub = (f"{nb}: {root.b:.1f} {unit}, {na}: {root.a:.1f} {unit}; red: more in {nb}, blue: less"
           + (f"; {gone:.1f} {unit} only in {na}, not drawn" if gone > 0 else ""))
    sub = _label(sub, width - 2 * PAD_X) or sub[:8]  # long target names must not run off the graph
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Verdana, sans-serif" font-size="{FONT_PX}">',
        f"<title>{_xml(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#f8f8f0"/>',
        f'<text x="{width / 2:.1f}" y="18" text-anchor="middle" font-size="16">{_xml(title)}</text>',
        f'<text x="{width / 2:.1f}" y="32" text-anchor="middle" fill="#555">{_xml(sub)}</text>',
    ]
    if not root.b:
        out.append(f'<text x="{width / 2:.1f}" y="{height - BOTTOM - 2}" text-anchor="middle">no samples</text>')
    for depth, x, w, node in boxes:
        y = base_y - depth * FRAME_H
        change = f"{100 * (node.b - node.a) / node.a:+.1f}%" if node.a else "new"
        label = _label(node.name, w)
        fill = _colour(node.name, depth) if depth == 0 else _diff_colour(node.b - node.a, max_delta)
        out.append(
            f"<g><title>{_xml(node.name)} ({_xml(nb)} {node.b:.2f}, {_xml(na)} {node.a:.2f} {_xml(unit)}, "
            f"{change})</title>"
            f'<rect x="{x:.2f}" y="{y}" width="{max(w - 0.5, 0.1):.2f}" height="{FRAME_H - 1}" rx="2" '
            f'fill="{fill}" stroke="#ccc" stroke-width="0.3"/>'
            + (f'<text x="{x + 3:.2f}" y="{y + FRAME_H - 4}">{_xml(label)}</text>' if label else "")
            + "</g>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _only_in_a(node: _DiffNode) -> float:
    """Total A value of the subtrees B does not have (tops only: their children are inside them)."""
    total, todo = 0.0, [node]
    while todo:
        for c in todo.pop().children.values():
            if c.b <= 0:
                total += c.a
            else:
                todo.append(c)
    return total
