"""The report's reading aids: evidence in words, a finding's key figures and "because", series reduced for
drawing with their extremes kept, the unnamed share of a profile explained, step anchors, the page's weight."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from reports.views.charts import line_chart, reduce_series
from reports.views.evidence_words import because_and_advice, evidence_items, key_figures, words
from reports.views.navigation import step_id
from reports.views.render import render_bundle
from reports.model.unnamed import SHOWN_FROM, unnamed_note

BUNDLES = Path(__file__).resolve().parents[1] / "data" / "bundles"
ONE_MINUTE_MAX_BYTES = 250_000  # issue 23: a one-minute run's report


def test_keys_read_as_words_with_units():
    assert words("accounting_us_per_txn") == "accounting, µs per transaction"  # listed
    assert words("row_lock_time_ms_per_txn") == "row lock time ms per transaction"  # generic
    assert words("spin_rounds_us") == "spin rounds µs" and words("hit_pct") == "hit %"
    assert words("flushes_per_s") == "flushes per second"
    assert all("_" not in w for w, _ in evidence_items({"a_b_pct": 1.5, "c_us": 3, "d": "x"}))


def test_key_figures_prefer_shares_of_the_transaction():
    f = {"evidence": {"window": "w", "cpus": 2, "host_busy_pct": 99.5, "lock_share_of_txn_pct": 60.04,
                      "wall_us_per_txn": 382.0, "source": "s", "other_processes_cpu_cores": 1.5, "x_per_s": 3}}
    figs = key_figures(f)
    assert len(figs) == 4 and figs[0] == ("lock waits, % of transaction time", "60.0")
    assert figs[1] == ("mean transaction time, µs", "382.0")
    assert all(not w.startswith("measured window") for w, _ in figs)  # text evidence is not a figure


def test_because_is_the_reason_and_the_rest_the_advice():
    b, a = because_and_advice("Every statement is parsed again. Use prepared statements.")
    assert (b, a) == ("Every statement is parsed again.", "Use prepared statements.")
    b, a = because_and_advice("WAL reaches max_wal_size within the step, so checkpoints run back to back: each "
                              "one writes every dirty buffer. Raise max_wal_size.")
    assert b == "WAL reaches max_wal_size within the step, so checkpoints run back to back."
    assert a.startswith("Each one writes") and a.endswith("Raise max_wal_size.")
    assert because_and_advice("Make the buffer pool hold the working set.") == (
        "", "Make the buffer pool hold the working set.")  # an instruction alone has no "because"


def test_long_series_keep_their_stall_and_spike():
    pts: list[tuple[float, float | None]] = [(float(t), 1000.0 + (t % 7)) for t in range(3600)]
    pts[1800] = (1800.0, 0.0)  # a one-second stall
    pts[2500] = (2500.0, 5000.0)  # a spike
    pts[3000] = (3000.0, None)  # a gap
    red = reduce_series(pts, 640)
    assert len(red) <= 2 * 640 + 64
    assert (1800.0, 0.0) in red and (2500.0, 5000.0) in red
    assert any(y is None and 2990 <= x <= 3000 for x, y in red)  # the gap stays a break, in its pixel column
    assert red == sorted(red, key=lambda p: p[0])
    short = pts[:100]
    assert reduce_series(short, 640) == short
    svg = line_chart([("tps", pts)], x_label="s", y_label="tps")
    assert len(svg) < 40_000  # about two points per pixel column, not 3,600


def test_unnamed_share_says_why_and_what_names_it():
    stripped = {"unresolved_share": 0.21, "hint": "21% of samples have no symbol: /usr/sbin/mariadbd is stripped "
                "(no .symtab), so static functions do not resolve", "unwinder": "fp"}
    n = unnamed_note(stripped, {"engine": "mysql"})
    assert n and "stripped" in n["reason"] and "exported" in n["reason"]
    text = " ".join(n["remedies"])
    assert "mariadb-server-core-dbgsym" in text and "debuginfod" in text and "--call-graph dwarf" in text
    has_symtab = {"unresolved_share": 0.3, "hint": "30% of samples have no symbol, but /x has its symbol table",
                  "unwinder": "dwarf"}
    n = unnamed_note(has_symtab, {"engine": "postgres"})
    assert n and "JIT" in n["reason"]
    assert unnamed_note({"unresolved_share": SHOWN_FROM / 2, "hint": ""}, None) is None


def test_step_ids_are_fragments():
    sid = step_id("prof", "mysql@127.0.0.1:35561", "point-select", 4)
    assert re.fullmatch(r"[A-Za-z0-9-]+", sid) and sid == "prof-mysql-127-0-0-1-35561-point-select-4"
    assert step_id("acc", None, "insert", 1) == "acc-all-insert-1"


def test_one_minute_report_weight_and_links(tmp_path):
    """The saved two-target run: under the one-minute budget, every part a results row links to is on the
    page, the verdict comes before the findings."""
    shutil.copytree(BUNDLES / "point_select", tmp_path / "b")
    html = render_bundle(tmp_path / "b").read_text(encoding="utf-8")
    assert len(html.encode()) <= ONE_MINUTE_MAX_BYTES, len(html.encode())
    links = re.findall(r'<td class="steplinks">(.*?)</td>', html)
    hrefs = [h for cell in links for h in re.findall(r'href="#([^"]+)"', cell)]
    assert links and hrefs and all(f'id="{h}"' in html for h in hrefs)
    assert any(h.startswith("prof-") for h in hrefs) and any(h.startswith("acc-") for h in hrefs)
    assert html.index('id="summary"') < html.index('id="findings"') < html.index('id="results"')
    assert "<script" not in html and "position: sticky" in html
    assert not re.search(r'(src|href)="(https?:)?//', html) and "<link" not in html  # one file, readable offline
    assert "mariadb-server-core-dbgsym" in html  # the stripped mariadbd's [unknown] share is explained


def test_compare_pages_lead_with_the_verdict(tmp_path):
    """The pair page: the verdict first, then the explanation and the statements A vs B; the sets page (--vs):
    a verdict line per step with the change and its interval."""
    from diag.core.bundle import load_bundle
    from reports.model.compare import compare
    from reports.views.compare_report import render_comparison, render_sets
    from reports.model.compare_sets import compare_sets

    shutil.copytree(BUNDLES / "repeat_insert_pg_noisy", tmp_path / "b")
    b = load_bundle(tmp_path / "b")
    items = compare(b)
    page = render_comparison([b], items)
    assert page.index('id="summary"') < page.index('id="comparison"') < page.index('id="statements-versus"')
    assert items[0]["sentences"][0] in page.replace("&#39;", "'") and "position: sticky" in page
    sets = render_sets([b], [b], compare_sets([b], [b]))
    verdict = sets.split('id="summary"', 1)[1].split("</section>", 1)[0]
    assert verdict.count('class="verdict"') == 2 and "+0.0%" in verdict and "within noise" in verdict
