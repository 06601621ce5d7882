"""reports.rules.cpu on saved real bundles: parse/plan, CPU-bound, busy host, context switch storm.

The machine these bundles come from was shared: other processes used 1.3-1.9 of its 2 CPUs during
every step, which host_contention reports. cpu_bound's planted case moves that CPU time to the server
(the host totals stay as measured).
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from diag.core.bundle import Bundle, load_bundle
from diag.core.engines import ENGINES, MYSQL
from reports.model.cpu import cpu_use
from reports.model.steps import steps
from reports.rules import cpu

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"
PG = "postgres@127.0.0.1:53339"
MY = "mysql@127.0.0.1:35561"


def load(name: str) -> Bundle:
    return load_bundle(DATA / name)


def give_server_cpu(b: Bundle, label: str, cores: float) -> Bundle:
    """A copy where one server process of ``label`` used ``cores`` more CPU all along (user time)."""
    b = copy.deepcopy(b)
    recs = b.series["host"]
    t_first = recs[0]["t"]
    pid = None
    for r in recs:
        procs = r["procs.server"].get(label) or {}
        if pid is None and procs:
            pid = min(procs, key=int)  # the postmaster / mariadbd: alive the whole run
        if pid in procs:
            procs[pid][0] += cores * (r["t"] - t_first)
    return b


def by_step(findings: list) -> dict[tuple[str, int], object]:
    return {(f.target, f.clients): f for f in findings}


# --------------------------------------------------------------------------- parse / plan


def test_parse_plan_fires_on_mariadb_point_selects() -> None:
    found = by_step(cpu.cpu_parse_plan(load("point_select")))
    assert set(found) == {(MY, 1), (MY, 2)}  # PostgreSQL with prepared statements: not a sample
    f = found[(MY, 1)]
    assert f.severity == "warning"
    assert f.evidence["profile_samples"] == 256
    assert f.evidence["parse_plan_pct_of_server_cpu"] == pytest.approx(26.2)
    assert f.evidence["parse_plan_pct_of_user_cpu"] == pytest.approx(37.6)
    assert f.evidence["parse_pct_of_server_cpu"] == pytest.approx(7.0)
    assert f.evidence["parse_plan_frames"].startswith("JOIN::optimize")
    assert f.evidence["prepared_executions_per_txn"] > 0.9  # PREPARE/EXECUTE in SQL: still parsed each time
    assert f.impact == pytest.approx(0.2617, abs=1e-4)
    assert "MariaDB still optimize" in f.advice


def test_parse_plan_fires_on_postgres_simple_protocol() -> None:
    (f,) = cpu.cpu_parse_plan(load("point_select_pg_simple"))
    assert f.evidence["protocol"] == "simple"
    assert f.evidence["parse_plan_pct_of_user_cpu"] == pytest.approx(14.4)
    assert "base_yyparse" in f.evidence["parse_plan_frames"]
    assert "prepared" in f.advice


def test_parse_plan_excludes_const_table_reads_under_the_optimizer() -> None:
    folded = {
        "connection;mariadbd;do_command;mysql_parse;parse_sql;MYSQLparse": 10,
        "connection;mariadbd;do_command;mysql_execute_command;JOIN::optimize;JOIN::optimize_inner;choose_plan": 10,
        "connection;mariadbd;do_command;mysql_execute_command;JOIN::optimize;JOIN::optimize_inner;"
        "handler::ha_index_read_idx_map;handler::index_read_idx_map": 30,
        "connection;mariadbd;do_command;net_write;tcp_sendmsg_[k]": 50,
    }
    pp = cpu.parse_plan_samples(folded, MYSQL)
    assert (pp.total, pp.user, pp.hit) == (100, 50, 20)
    assert pp.by_frame == {"parse_sql": 10, "JOIN::optimize": 10}


def test_every_engine_has_parse_plan_frames() -> None:
    for e in ENGINES:
        assert e.parse_plan_frames and e.parse_plan_advice, e.name


def test_parse_plan_quiet_without_a_profile() -> None:
    b = copy.deepcopy(load("point_select"))
    for r in b.results:  # a profile without stacks says why (diag.core.schema.profile): here, that perf failed
        r["profile"] = {"error": "perf record failed"}
    assert cpu.cpu_parse_plan(b) == []


STACK = {"mariadb": "connection;mariadbd;mysql_parse;parse_sql;MYSQLparse",
         "postgresql": "backend;postgres;base_yyparse"}


def test_parse_plan_quiet_on_small_profiles(tmp_path: Path) -> None:
    """60 samples, all of them in the parser: too few to tell a share from noise."""
    b = copy.deepcopy(load("point_select"))
    b.path = tmp_path
    for r in b.results:
        rel = r["profile"]["folded"]
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(STACK[r["engine"]] + " 60\n")
    assert cpu.cpu_parse_plan(b) == []
    for r in b.results:
        (tmp_path / r["profile"]["folded"]).write_text(STACK[r["engine"]] + " 100\n")
    assert len(cpu.cpu_parse_plan(b)) == 4  # at 100 samples it fires (both engines, both steps)


# --------------------------------------------------------------------------- cpu_bound / host_contention


def test_cpu_bound_quiet_when_the_server_used_little_cpu() -> None:
    # 0.17-0.27 of 2 CPUs: the machine was busy, but with other processes
    for name in ("point_select", "insert_flush_cap_120", "hot_row_pg_c4"):
        assert cpu.cpu_bound(load(name)) == []


def test_cpu_bound_fires_when_the_server_takes_the_busy_cpu() -> None:
    b = give_server_cpu(load("point_select"), PG, 1.5)
    found = by_step(cpu.cpu_bound(b))
    assert set(found) == {(PG, 1), (PG, 2)}
    f = found[(PG, 2)]
    assert f.severity == "info"
    assert f.evidence["server_cpu_cores"] == pytest.approx(1.69, abs=0.02)
    assert f.evidence["server_cpu_of_usable_pct"] > 80
    assert "_bt_compare" in f.evidence["top_symbols"] or "hash_search" in f.evidence["top_symbols"]
    assert f.impact <= cpu.CONDITION_WEIGHT


def test_host_contention_fires_on_a_shared_machine() -> None:
    found = by_step(cpu.host_contention(load("point_select")))
    assert set(found) == {(PG, 1), (PG, 2), (MY, 1), (MY, 2)}
    f = found[(PG, 1)]
    assert f.evidence["host_busy_pct"] > 99
    assert f.evidence["other_processes_cpu_cores"] == pytest.approx(1.74, abs=0.01)
    assert f.impact == pytest.approx(0.5 * 1.74 / 2, abs=0.01)


def test_host_contention_quiet_when_the_busy_cpu_is_the_servers() -> None:
    b = give_server_cpu(load("point_select"), PG, 1.5)
    assert {(f.target, f.clients) for f in cpu.host_contention(b)} == {(MY, 1), (MY, 2)}


# --------------------------------------------------------------------------- context_switch_storm


def test_storm_fires_on_32_clients_queued_on_one_row() -> None:
    (f,) = cpu.context_switch_storm(load("hot_row_pg_c32"))
    assert f.evidence["server_ctx_per_statement"] == pytest.approx(13.56, abs=0.01)
    assert f.evidence["server_ctx_per_cpu_ms"] == pytest.approx(53.4, abs=0.1)
    assert f.evidence["statements_per_txn"] == 4
    assert f.impact == pytest.approx(4 * 53.4 / 1000, abs=0.001)  # 4 µs per switch
    assert "voluntary" in f.advice.lower()


@pytest.mark.parametrize("name", [
    "hot_row_pg_c4",  # 3.3 per statement: a short queue explains them
    "insert_flush_cap_120",  # commits waiting on the WAL flush: up to 4 per statement
    "point_select",  # 0.75-0.9 per statement
    "wal_heavy_pg_max_wal_32mb",  # 25 per statement, but 7.5 per ms of CPU: heavy statements
    "big_result_pg",  # 11.6 per statement, 7.2 per ms of CPU
])
def test_storm_quiet_where_switches_are_explained(name: str) -> None:
    assert cpu.context_switch_storm(load(name)) == []


def test_storm_is_not_judged_for_threaded_servers() -> None:
    """mariadbd's per-process counters are its main thread's: no evidence about connection threads."""
    b = copy.deepcopy(load("hot_row_mariadb_c4"))
    for r in b.series["host"]:
        for row in (r["procs.server"].get("hot-mysql") or {}).values():
            row[2] += 1e6 * (r["t"] - b.series["host"][0]["t"])
    assert cpu.context_switch_storm(b) == []


def test_cpu_use_weighs_host_intervals_by_overlap() -> None:
    """A 3 s step is 3 s of CPU accounting, whatever the phase of the host collector's 1 s clock."""
    b = load("point_select")
    for s in steps(b):
        u = cpu_use(b, s)
        assert u is not None and u.span_s == pytest.approx(s.duration, abs=0.01)
        # the driver's own client CPU (getrusage of its processes) agrees with the host collector's
        assert u.client_cores == pytest.approx((s.row.client_cpu_s or 0.0) / s.duration, abs=0.03)
