"""The report's results table shows TPC-C's NOPM and TPM (the figures HammerDB users compare), from the row."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from reports.views.render import render_bundle

SAVED = Path(__file__).resolve().parents[1] / "data" / "bundles" / "point_select"


def _render(tmp_path: Path, extra: dict[str, float]) -> str:
    b = tmp_path / "b"
    shutil.copytree(SAVED, b)
    res = b / "results.json"
    data = json.loads(res.read_text())
    rows = data if isinstance(data, list) else data["results"]
    rows[0].update(extra)
    res.write_text(json.dumps(data))
    return render_bundle(b).read_text()


def test_nopm_and_tpm_of_a_tpcc_row_are_in_its_throughput_cell(tmp_path: Path) -> None:
    html = _render(tmp_path, {"nopm": 1234.5, "tpm": 2741.0})
    # the row's own figures, in the row of the table they belong to (one result row in this bundle)
    assert '<div class="muted tpcc-rates">NOPM 1,234.5, TPM 2,741.0</div>' in html
    table = html.split('id="results-table"', 1)[1].split("</table>", 1)[0]
    assert table.count("tpcc-rates") == 1


def test_rows_without_tpcc_rates_show_none(tmp_path: Path) -> None:
    assert "tpcc-rates" not in _render(tmp_path, {})
