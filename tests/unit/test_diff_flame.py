"""Differential flame graphs (reports.views.flamegraph.diff_flamegraph_svg, reports.views.diff_view) on hand-made profiles
and on the saved two-engine bundle tests/data/bundles/point_select (perf profiles of both targets)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from collectors.profile.parse import load_folded
from diag.core.bundle import load_bundle
from reports.views.diff_view import cpu_per_tx, with_diff_flames
from reports.views.flamegraph import diff_flamegraph_svg
from reports.views.render import _comparisons

BUNDLE = Path(__file__).resolve().parents[1] / "data" / "bundles" / "point_select"
FRAME = re.compile(r'<g><title>(?P<title>[^<]*)</title><rect [^>]*width="(?P<w>[\d.]+)"[^>]*fill="(?P<fill>[^"]+)"')


def _frames(svg: str) -> dict[str, tuple[float, str]]:
    return {m["title"].split(" (")[0]: (float(m["w"]), m["fill"]) for m in FRAME.finditer(svg)}


def test_red_where_b_costs_more_blue_where_less_widths_from_b() -> None:
    a = {"k;p;main;grow": 10.0, "k;p;main;shrink": 10.0, "k;p;main;gone": 5.0}
    b = {"k;p;main;grow": 30.0, "k;p;main;shrink": 10.0 / 4}
    svg = diff_flamegraph_svg(a, b, "t", ("A", "B"), unit="µs/tx", width=1020)
    f = _frames(svg)
    assert f["grow"][1] == "rgb(255,0,0)"  # the largest change: full red
    r, g, bl = map(int, re.findall(r"\d+", f["shrink"][1]))
    assert bl == 255 and r == g < 210  # blue, paler than the largest change
    assert "gone" not in f and "5.0 µs/tx only in A, not drawn" in svg
    assert abs((f["grow"][0] + 0.5) / (f["shrink"][0] + 0.5) - 30 / 2.5) < 0.01  # B's values set widths
    assert abs(f["all"][0] + 0.5 - 1000) < 0.01  # B fills the inner width
    assert "grow (B 30.00, A 10.00 µs/tx, +200.0%)" in svg
    assert diff_flamegraph_svg(a, b, "t", ("A", "B")) == diff_flamegraph_svg(a, b, "t", ("A", "B"))


def test_per_transaction_normalisation_by_hand() -> None:
    b = load_bundle(BUNDLE)
    row = b.rows[0]
    prof = row.profile
    assert prof is not None
    per_tx = cpu_per_tx(b, row)
    assert per_tx is not None
    samples = sum(load_folded(BUNDLE / prof["folded"]).values())
    seconds = prof["window"][1] - prof["window"][0]
    # 185 samples at 499 Hz over 3934.67 tps x 2.4 s
    assert row.tps is not None
    assert abs(sum(per_tx.values()) - samples / prof["freq_hz"] * 1e6 / (row.tps * seconds)) < 1e-6
    assert cpu_per_tx(b, replace(row, profile={})) is None and cpu_per_tx(b, replace(row, tps=0)) is None


def test_report_comparison_of_two_engines_says_why_no_diff() -> None:
    b = load_bundle(BUNDLE)
    items = _comparisons(b)
    assert len(items) == 2  # PostgreSQL against MariaDB at 1 and 2 clients
    for e in items:
        assert e["diff_flame"] == ""
        assert "different programs (mariadbd and postgres)" in e["diff_note"]


def test_a_profile_against_itself_is_drawn_white() -> None:
    b = load_bundle(BUNDLE)
    pg = b.results[0]
    e = {"fast": pg["target"], "slow": pg["target"], "workload": pg["workload"], "clients": pg["clients"],
         "fast_name": "A", "slow_name": "B"}
    (out,) = with_diff_flames([b], [e])
    svg = out["diff_flame"]
    assert svg.startswith("<svg") and "B against A" in svg and out["diff_note"] == ""
    fills = set(re.findall(r'fill="(rgb\([^)]*\))"', svg))
    assert "rgb(250,250,250)" in fills and not any(f.startswith("rgb(255,") for f in fills)
    assert with_diff_flames([b], [{**e, "fast": "nobody"}])[0]["diff_flame"] == ""  # a side without a profile
