"""The interactive flame graph page (reports.views.flamegraph_page): self-contained, untrusted names inert, written
beside its folded file. Its zoom and search run in Chromium in tests/integration/test_profile_stacks_live.py."""

from __future__ import annotations

from pathlib import Path

from reports.views.flamegraph_page import interactive_page, write_page

HOSTILE = {"backend;postgres;<script>alert(1)</script>;f": 3, "backend;postgres;main;g&h": 2}


def test_page_is_self_contained_and_escapes_names() -> None:
    html = interactive_page(HOSTILE, "t <b>")
    assert html.count("<script>") == 1  # its own, nothing from the data
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "g&amp;h" in html
    assert "<title>t &lt;b&gt;</title>" in html
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")  # loads nothing
    assert "innerHTML" not in html  # names are only ever written back as text
    assert interactive_page(HOSTILE, "t") == interactive_page(HOSTILE, "t")


def test_write_page_beside_the_folded_file(tmp_path: Path) -> None:
    (tmp_path / "artifacts").mkdir()
    rel = write_page(tmp_path, "artifacts/profile--a--b--c1.folded", HOSTILE, "t")
    assert rel == "artifacts/profile--a--b--c1.flame.html" and (tmp_path / rel).read_text().startswith("<!DOCTYPE")
    assert write_page(tmp_path / "missing", "artifacts/x.folded", HOSTILE, "t") == ""  # unwritable: no link
