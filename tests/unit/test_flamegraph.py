"""reports.views.flamegraph: well-formed, escaped, deterministic SVG from folded stacks."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.pg import procs as pg_procs
from collectors.profile import parse
from reports.views.flamegraph import flamegraph_svg

DATA = Path(__file__).resolve().parents[1] / "data" / "perf"
SVG = "{http://www.w3.org/2000/svg}"


def pg_folded() -> dict[str, int]:
    titles = {int(k): v for k, v in json.loads((DATA / "pg15_pgbench_select.titles.json").read_text()).items()}
    text = (DATA / "pg15_pgbench_select.perf-script.txt").read_text(encoding="utf-8")
    return parse.fold(text, lambda tid, comm: pg_procs.postgres_title_kind(titles.get(tid, "")))


def frames(svg: str) -> list[tuple[str, float, float, int]]:
    """(tooltip, x, width, y) of every frame, parsed back from the SVG."""
    root = ET.fromstring(svg)
    out = []
    for g in root.iter(f"{SVG}g"):
        rect = g.find(f"{SVG}rect")
        title = g.find(f"{SVG}title")
        assert rect is not None and title is not None and title.text
        out.append((title.text, float(rect.get("x", "0")), float(rect.get("width", "0")), int(rect.get("y", "0"))))
    return out


def test_real_profile_is_well_formed_and_complete() -> None:
    folded = pg_folded()
    svg = flamegraph_svg(folded, "PostgreSQL 15 pgbench -S", width=1200)
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg" and root.get("width") == "1200"
    got = frames(svg)
    assert got[0][0] == "all (251 samples, 100.00%)"
    assert got[0][2] == 1180 - 0.5  # root spans the width between the 10 px paddings
    names = [t.split(" (")[0] for t, *_ in got]
    assert "backend" in names and "checkpointer" in names and "PostgresMain" in names
    assert "<script" not in svg and "http://" not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_frame_names_are_escaped() -> None:
    evil = '<script>alert("x")</script>'
    folded = {f"backend;postgres;main;{evil}": 10, "backend;postgres;main;a&b'c\x00d": 5, "k;c;f": 85}
    svg = flamegraph_svg(folded, 'title <b>"&"</b>')
    assert "<script>" not in svg and "<b>" not in svg
    assert "&lt;script&gt;" in svg
    root = ET.fromstring(svg)  # well-formed despite NUL and quotes
    tips = [t.text for t in root.iter(f"{SVG}title")]
    assert tips[0] == 'title <b>"&"</b>'
    assert f"{evil} (10 samples, 10.00%)" in tips
    assert "a&b'c\ufffdd (5 samples, 5.00%)" in tips
    assert not list(root.iter(f"{SVG}script"))


def test_deterministic_and_sorted_children() -> None:
    folded = pg_folded()
    a = flamegraph_svg(folded, "t")
    b = flamegraph_svg(dict(reversed(list(folded.items()))), "t")
    assert a == b
    svg = flamegraph_svg({"k;c;zeta": 1, "k;c;alpha": 1, "k;c;mid": 2}, "t")
    leaves = [(t.split(" (")[0], x) for t, x, _, _ in frames(svg) if t.split(" (")[0] in ("alpha", "mid", "zeta")]
    assert [n for n, _ in sorted(leaves, key=lambda p: p[1])] == ["alpha", "mid", "zeta"]


def test_children_nest_inside_parents_and_stack_upwards() -> None:
    svg = flamegraph_svg({"k;c;main;f;g": 60, "k;c;main;h": 40}, "t", width=1000)
    got = {t.split(" (")[0]: (x, w, y) for t, x, w, y in frames(svg)}
    assert got["main"][2] - got["f"][2] == 16  # one row up per level
    fx, fw, _ = got["f"]
    gx, gw, _ = got["g"]
    assert gx >= fx and gx + gw <= fx + fw + 1e-6
    assert fw / got["h"][1] == pytest.approx(60 / 40, rel=0.01)


def test_narrow_frames_are_omitted() -> None:
    folded = {"k;c;big": 100_000, "k;c;tiny": 50, "k;c;big;also_tiny": 99}
    svg = flamegraph_svg(folded, "t")
    names = [t.split(" (")[0] for t, *_ in frames(svg)]
    assert "big" in names and "tiny" not in names and "also_tiny" not in names


def test_empty_profile() -> None:
    svg = flamegraph_svg({}, "nothing")
    root = ET.fromstring(svg)
    assert "no samples" in svg and not list(root.iter(f"{SVG}g"))


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(
    st.lists(st.text(min_size=1, max_size=12).filter(lambda s: ";" not in s), min_size=1, max_size=6)
    .map(";".join),
    st.integers(min_value=1, max_value=1000), max_size=20))
def test_any_names_give_well_formed_svg(folded: dict[str, int]) -> None:
    svg = flamegraph_svg(folded, "fuzz")
    ET.fromstring(svg)
    assert svg == flamegraph_svg(folded, "fuzz")
