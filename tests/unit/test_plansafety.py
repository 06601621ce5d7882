"""Which statement texts dbdiag plans (one plain statement, read past strings and comments), and the report line
of a plan it did not make."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from collectors.plansafety import plan_refusal
from reports.views.render import render_bundle

SAVED = Path(__file__).resolve().parents[1] / "data" / "statements" / "planted_run"


@pytest.mark.parametrize("text,mysql", [
    ("SELECT c FROM t WHERE id = $1", False),
    ("  /* a comment; with a semicolon */ (SELECT 1) UNION (SELECT 2);  ", False),
    ("WITH x AS (SELECT 1) SELECT * FROM x", False),
    ("select ';' || $$ ; $$ || $tag$ ; $tag$ -- ; \n FROM t", False),
    ("SELECT E'it\\'s ; here', \"a;b\" FROM t", False),
    ("SELECT a$b, $1 FROM t$x WHERE c = $2", False),
    ("INSERT INTO t VALUES ('a;b', \"c;d\", 'e''f') -- trailing; comment", True),
    ("UPDATE `we;ird` SET v = ? # done;", True),
    ("DELETE FROM t WHERE id = ?;", True),
])
def test_one_plain_statement_is_planned(text: str, mysql: bool) -> None:
    assert plan_refusal(text, mysql) == ""


@pytest.mark.parametrize("text,mysql,why", [
    ("SELECT 1; SELECT pg_sleep(10)", False, "more than one statement"),
    ("SELECT 'a'; DROP TABLE t", False, "more than one statement"),
    ("SELECT $x$ ; $x$; VACUUM", False, "more than one statement"),
    ("SELECT 1 /* nested /* ; */ still a comment */; COPY t TO PROGRAM 'x'", False, "more than one statement"),
    ("SELECT 'it''s'; CALL p()", True, "more than one statement"),
    ("SELECT 1 /*!50000 ; DROP TABLE t */", True, "executable comment"),
    # a name with a $ in it, not a dollar quote: the ; is outside
    ("SELECT foo$a$; DROP TABLE t; $a$", False, "more than one statement"),
    # read as the server reads it with standard_conforming_strings off / with NO_BACKSLASH_ESCAPES
    ("SELECT '\\'; DROP TABLE t; --'", False, "more than one statement"),
    ("SELECT '\\'; DROP TABLE t; -- '", True, "more than one statement"),
    ("SELECT \"a\\\"; DROP TABLE t; -- \"", True, "more than one statement"),
    # one statement with escapes, two without: the two readings differ, so it is refused (a plan lost, rarely)
    ("INSERT INTO t VALUES ('e\\';f')", True, "more than one statement"),
    ("SELECT 1 /*M! ; SET GLOBAL x = 1 */", True, "executable comment"),
    ("CALL p(1)", True, "not CALL"),
    ("/* SELECT */ DO $$ BEGIN END $$", False, "not DO"),
    ("TABLE t", False, "not TABLE"),
    ("REPLACE INTO t VALUES (1)", True, "not REPLACE"),
])
def test_anything_else_is_refused_with_a_reason(text: str, mysql: bool, why: str) -> None:
    assert why in plan_refusal(text, mysql)


def test_the_report_says_which_plan_was_not_made_and_why(tmp_path: Path) -> None:
    bundle = tmp_path / "run"
    shutil.copytree(SAVED, bundle)
    doc = json.loads((bundle / "results.json").read_text())
    stmt = next(r for r in doc["results"] if r["target"] == "pg")["statements"]["statements"][0]
    stmt["plan"] = {"method": "", "nodes": [], "artifact": "", "error": "",
                    "not_made": "statement of role app_user; run with --plan-others to plan it as app_user"}
    (bundle / "results.json").write_text(json.dumps(doc))
    html = render_bundle(bundle).read_text()
    assert ("plan not made: statement of role app_user; run with --plan-others to plan it as app_user"
            in html.split('<h2 id="statements">', 1)[1])
