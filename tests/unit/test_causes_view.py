"""Causes checked / not checked per target (reports.views.causes_view), from saved real bundles' run.json probes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from diag.core.bundle import load_bundle
from reports.views.causes_view import causes_checked

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"


def _by_cause(name_or_path: str | Path) -> dict[str, object]:
    (tc,) = causes_checked(load_bundle(DATA / name_or_path if isinstance(name_or_path, str) else name_or_path))
    return {c.cause: c for c in tc.checks}


def test_no_collect_checks_nothing_and_says_what_would() -> None:
    checks = _by_cause("point_select_pg_no_collect")
    assert checks and not any(c.checked for c in checks.values())
    for c in checks.values():
        assert c.why and c.shows_it, c
    assert "--no-collect" in checks["connection churn"].why


def test_sources_that_ran_check_their_causes_and_the_others_say_why(tmp_path: Path) -> None:
    checks = _by_cause("connect_churn_pg")  # pg_stats, pg_waits, pg_blocking, statements ran; pg_tables did not
    assert checks["connection churn"].checked and checks["statement costs (Statements, A vs B)"].checked
    assert checks["lock holders and queues"].checked
    assert not checks["full and large scans"].checked and "pg_stat_user_tables" in checks["full and large scans"].why
    # A statements source whose probe failed: the cause is not checked, with the probe's reason and hint.
    dst = tmp_path / "b"
    shutil.copytree(DATA / "connect_churn_pg", dst)
    run = json.loads((dst / "run.json").read_text())
    run["collectors"]["statements--churn"] = {"ok": False, "reason": "pg_stat_statements is not loaded",
                                              "hint": "shared_preload_libraries = 'pg_stat_statements'",
                                              "missing": []}
    run["targets"][0]["version_num"], run["targets"][0]["version"] = 130016, "13.16"
    (dst / "run.json").write_text(json.dumps(run))
    checks = _by_cause(dst)
    st = checks["statement costs (Statements, A vs B)"]
    assert not st.checked and st.why.endswith("pg_stat_statements is not loaded")
    assert st.shows_it == "shared_preload_libraries = 'pg_stat_statements'"
    assert checks["sorts and hashes spilling to disk"].checked
    assert "named only with statement digests" in checks["sorts and hashes spilling to disk"].note
    churn = checks["connection churn"]  # PostgreSQL 13 counts no sessions
    assert not churn.checked and "13.16 does not count connections" in churn.why and "log_connections" in churn.shows_it


def test_mariadb_without_performance_schema() -> None:
    checks = _by_cause("hot_row_mariadb_c4")
    assert checks["connection churn"].checked and checks["sorts and hashes spilling to disk"].checked
    st = checks["statement costs (Statements, A vs B)"]
    assert not st.checked and "performance_schema=ON" in st.shows_it


def test_the_report_shows_the_causes_section(tmp_path: Path) -> None:
    from reports.views.render import render_bundle

    dst = tmp_path / "b"
    shutil.copytree(DATA / "point_select_pg_no_collect", dst)
    html = render_bundle(dst).read_text()
    assert 'id="causes"' in html and "0 of 11 causes checked" in html and "would show it:" in html
