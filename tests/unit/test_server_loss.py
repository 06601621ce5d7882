"""Pieces of a lost server that need no server: exit status words, the cut record, the probe of a closed
port, the new pipe messages, and the server_lost rule on a bundle written the way a run writes it."""

from __future__ import annotations

import signal
from pathlib import Path

from diag.core.bundle import BundleWriter, load_bundle
from diag.core.schema import ResultRow
from diag.serverloss import exit_status, loss_line
from diag.core.servers import free_port
from diag.core.targets import parse_target
from reports.rules.findings import derive_findings
from reports.model.steps import steps
from workloads.steps.messages import Aborted, Fatal, Lost, Reconnected, decode
from workloads.steps.stepend import StepCut, server_gone

S = 1_000_000_000


def test_exit_status_words() -> None:
    assert exit_status(-signal.SIGKILL) == "killed by signal 9 (SIGKILL)"
    assert exit_status(1) == "exited with code 1"
    assert exit_status(None) == "still running"


def test_a_cut_keeps_the_earliest_loss_and_dates_itself_from_the_measured_start() -> None:
    cut = StepCut(1, "57P01", "terminating connection", 12 * S, "connection refused")
    assert cut.earlier(11 * S).t_ns == 11 * S and cut.earlier(13 * S) is cut and cut.earlier(0) is cut
    row = cut.to_row(1700000000.5, 10 * S)
    assert row == {"t": 1700000000.5, "after_s": 2.0, "client": 1, "code": "57P01",
                   "message": "terminating connection", "probe": "connection refused"}
    assert "probe" not in StepCut(0, "x", "y", 5).to_row(0.0, 0)


def test_nothing_listening_is_a_server_gone() -> None:
    for dsn in (f"postgresql://postgres@127.0.0.1:{free_port()}/postgres", f"mysql://root@127.0.0.1:{free_port()}/"):
        why = server_gone(parse_target(dsn), timeout_s=2)
        assert why and "\n" not in why, dsn


def test_new_messages_decode_and_short_senders_get_defaults() -> None:
    assert decode(("lost", "57P01", "gone", 5, "lost")) == Lost("57P01", "gone", 5, "lost")
    assert decode(("lost", "2013", "gone")) == Lost("2013", "gone", 0, "lost")
    assert decode(("reconnected", "57P01", "x", 7, 0.05)) == Reconnected("57P01", "x", 7, 0.05)
    assert decode(("abort", "23505", "dup", 9, "other")) == Aborted("23505", "dup", 9, "other")
    assert decode(("fatal", "", "refused", "connect")).kind == "connect"
    assert decode(("fatal", "internal", "bug")) == Fatal("internal", "bug", "")


def _bundle(tmp_path: Path, lost: bool) -> Path:
    w = BundleWriter(tmp_path / ("lost" if lost else "ok"))
    w.write_json("run.json", {"status": "server_lost" if lost else "complete", "options": {"duration_s": 10.0},
                              "targets": [{"label": "pg", "engine": "postgres",
                                           **({"lost": {"exit_status": "killed by signal 9 (SIGKILL)",
                                                        "log_tail": ["LOG:  database system is ready"]}}
                                              if lost else {})}]})
    row = {"target": "pg", "engine": "postgresql", "workload": "read-write", "clients": 2, "t_start": 100.0,
           "t_end": 101.3 if lost else 110.0, "duration_s": 1.3 if lost else 10.0, "tps": 50.0, "transactions": 65,
           "measured_s": 1.3 if lost else 10.0, "complete": not lost, "reconnects": 0}
    if lost:
        row["server_lost"] = {"t": 101.3, "after_s": 1.3, "client": 0, "code": "", "message": "server closed",
                              "probe": "connection refused"}
        w.event("steps_skipped", "pg: 1 step not run", target="pg", steps=["read-write c=4"])
    w.write_json("results.json", {"results": [row]})
    return w.path


def test_server_lost_rule_in_both_directions(tmp_path: Path) -> None:
    b = load_bundle(_bundle(tmp_path, lost=True))
    (f,) = [f for f in derive_findings(b) if f["category"] == "server_lost"]
    assert (f["severity"], f["target"], f["workload"], f["clients"], f["impact"]) == ("critical", "pg", "read-write",
                                                                                     2, 1.0)
    assert f["title"] == "The server went away 1.3 s into read-write, 2 clients"
    ev = f["evidence"]
    assert ev["exit_status"].endswith("(SIGKILL)") and ev["server_log"] and ev["steps_not_run"] == ["read-write c=4"]
    assert ev["seconds_into_step"] == 1.3 and ev["planned_s"] == 10.0 and ev["new_connection"] == "connection refused"
    assert list(steps(b)) == []                       # no other rule reads the cut step
    assert b.rows[0].is_complete is False and b.rows[0].server_lost is not None
    ok = load_bundle(_bundle(tmp_path, lost=False))
    assert not [f for f in derive_findings(ok) if f["category"] == "server_lost"]
    assert len(list(steps(ok))) == 1 and ok.rows[0].is_complete


def test_rows_without_the_new_fields_read_as_before() -> None:
    old = ResultRow.from_dict({"target": "a", "workload": "point-select", "clients": 1, "tps": 3.0})
    assert old.is_complete and old.reconnects is None and old.to_dict() == {"target": "a", "workload": "point-select",
                                                                           "clients": 1, "tps": 3.0, "engine": "",
                                                                           "driver": "", "protocol": "",
                                                                           "isolation": "", "latency_ms": {},
                                                                           "errors": {}, "error_samples": {}}
    assert not ResultRow.from_dict({"interrupted": True}).is_complete


def test_the_console_line_of_a_lost_server() -> None:
    row = ResultRow(workload="read-write", clients=2, server_lost={"after_s": 1.25})
    assert loss_line("pg", row, {"exit_status": "killed by signal 9 (SIGKILL)"}) == \
        "pg: the server went away (killed by signal 9 (SIGKILL)) 1.2 s into read-write with 2 clients"
