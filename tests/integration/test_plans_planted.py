"""Plan differences between A and B, said in the comparison: ``python -m diag run pg=... my=... myidx=... -w custom``.

The same custom statement (``SELECT n FROM plan_t WHERE k = :k`` on 20,000 rows) on the session's throwaway
PostgreSQL (pg_stat_statements) and MariaDB (performance_schema digests), both started by the tests, not by the
run. The plant: ``k`` has an index on PostgreSQL's table and none on MariaDB's (database ``plan_scan``, target
``my``), so PostgreSQL looks the row up by the index and MariaDB reads the whole table; the comparison of the
two (the verdict at the top of the report, the pair's sentences) and the report's "Statements, A vs B" must say
the plans differ, naming the table and the scan against the lookup. Without the plant (target ``myidx``: the same
MariaDB, database ``plan_idx``, the same index as PostgreSQL's) both look the row up, and the comparison of pg
with myidx says no plan difference. One run of three targets: one start of dbdiag instead of two.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from diag.core import servers
from diag.core.db import Session

REPO = Path(__file__).resolve().parents[2]
ROWS = 20000
SCRIPT = f"\\set k random(1, {ROWS})\nSELECT n FROM plan_t WHERE k = :k;\n"
TABLE = "CREATE TABLE plan_t (id int PRIMARY KEY, k int NOT NULL, n int NOT NULL)"
DATABASES = {"plan_scan": False, "plan_idx": True}  # MariaDB database -> index on k


@pytest.fixture(scope="module")
def tables(pg_server: servers.ThrowawayServer, my_server: servers.ThrowawayServer
           ) -> Iterator[tuple[servers.ThrowawayServer, servers.ThrowawayServer]]:
    """public.plan_t (id, k, n) with k = id and an index on k on PostgreSQL; the same table in two MariaDB
    databases, plan_scan without the index and plan_idx with it."""
    with Session(pg_server.target(), statement_timeout_ms=0) as s:
        s.execute("DROP TABLE IF EXISTS public.plan_t")
        s.execute(TABLE.replace("plan_t", "public.plan_t"))
        s.execute(f"INSERT INTO public.plan_t SELECT g, g, g % 100 FROM generate_series(1, {ROWS}) g")
        s.execute("CREATE INDEX plan_t_k ON public.plan_t (k)")
        s.execute("ANALYZE public.plan_t")
    with Session(my_server.target(), statement_timeout_ms=0) as s:
        for db, index in DATABASES.items():
            s.execute(f"DROP DATABASE IF EXISTS {db}")
            s.execute(f"CREATE DATABASE {db}")
            s.execute(TABLE.replace("plan_t", f"{db}.plan_t") + " ENGINE=InnoDB")
            s.execute(f"INSERT INTO {db}.plan_t SELECT seq, seq, seq % 100 FROM {db}.seq_1_to_{ROWS}")
            s.execute("COMMIT")
            if index:
                s.execute(f"CREATE INDEX plan_t_k ON {db}.plan_t (k)")
            s.execute(f"ANALYZE TABLE {db}.plan_t")
    yield pg_server, my_server
    with Session(pg_server.target(), statement_timeout_ms=0) as s:
        s.execute("DROP TABLE IF EXISTS public.plan_t")
    with Session(my_server.target(), statement_timeout_ms=0) as s:
        for db in DATABASES:
            s.execute(f"DROP DATABASE IF EXISTS {db}")


def _run(tmp_path: Path, pg: servers.ThrowawayServer, my: servers.ThrowawayServer) -> str:
    """``python -m diag run`` of the script on the three targets; the report (HTML, entities resolved)."""
    script = tmp_path / "lookup.sql"
    script.write_text(SCRIPT)
    out = tmp_path / "run"
    # --flush-capability: a custom script counts as writing, and the fsync test would only cost time here
    p = subprocess.run([sys.executable, "-m", "diag", "run", f"pg={pg.dsn()}", f"my={my.dsn()}plan_scan",
                        f"myidx={my.dsn()}plan_idx", "-w", "custom", "--script", str(script), "-c", "1", "-T", "2",
                        "--warmup", "0.5", "--no-profile", "--flush-capability", "1000", "-o", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert p.returncode == 0, p.stderr[-3000:] + p.stdout[-3000:]
    for row in json.loads((out / "results.json").read_text())["results"]:
        st = row.get("statements") or {}
        # MariaDB counts a prepared statement's calls per connection, gone when it closes: a digest snapshot
        # taken after the step's clients left (t1 past t_end) sees none (measured once at load 145-257)
        assert any("plan_t" in s["text"] and s["calls"] > 0 for s in st.get("statements") or []), (
            f"{row['target']}: no calls of the statement in the step's digests (window {st.get('t0')}.."
            f"{st.get('t1')}, step {row['t_start']}..{row['t_end']}, notes {st.get('notes')})")
    return html.unescape((out / "report.html").read_text(encoding="utf-8"))


def _verdicts(page: str) -> dict[frozenset[str], str]:
    """The report's verdict per compared pair of targets: its sentences."""
    return {frozenset((a, b)): text for a, b, text in
            re.findall(r'<div class="verdict pair"><p><b>(\w+) against (\w+)</b>, (.*?)</p>', page, re.S)}


def test_a_scan_against_a_lookup_is_said_and_the_same_plans_are_not(tables, tmp_path: Path) -> None:
    page = _run(tmp_path, *tables)
    said = "pg reads plan_t: index; my reads plan_t: full scan."
    # the report's Statements, A vs B (its first two targets: pg and my)
    versus = page.split('id="statements-versus"', 1)[1].split("<h2 ", 1)[0]
    (paragraph,) = re.findall(r'<p class="plan-difference">(.*?)</p>', versus, re.S)
    assert "plan_t WHERE k" in paragraph and paragraph.endswith(said), paragraph
    assert re.search(r"Index Scan on public\.plan_t using plan_t_k", versus) and "ALL on plan_t" in versus
    # the comparison: the verdict at the top (its first sentences) and the pair's full list of sentences
    verdicts = _verdicts(page)
    assert paragraph in verdicts[frozenset(("pg", "my"))], verdicts
    assert f"<li>{paragraph}</li>" in page
    # without the plant: the same statement looked up by the same index on both engines, nothing said
    assert "plans differ" not in verdicts[frozenset(("pg", "myidx"))], verdicts
    assert "ref on plan_t using plan_t_k" in page  # myidx's own plan, in its statements section
    # every plan difference said anywhere (verdicts, comparisons, A vs B) has the planted table scan on one side
    sides = re.findall(r"The plans differ for '[^']*': ([^<]*?)\.(?:<| )", page)
    assert sides and all(x.endswith("my reads plan_t: full scan") for x in sides), sides
