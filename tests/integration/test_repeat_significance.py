"""Numbers you can trust, on real servers (issue 16): --repeat interleaves targets, rows carry the median and its
interval, comparisons say significant or within noise, and the steady-state check sees a planted CHECKPOINT.

Three short runs of single-row inserts at 1 client (module-scoped, read by several tests):

* ``knob``: PostgreSQL with fsync=off ("off") against the session's default (durable) server ("on"),
  ``--repeat 3``, 1 s steps, 0.25 s intervals, no collectors (none of this is theirs): the order of
  events.jsonl, the intervals in the report, and a significant difference with the right sign in the report
  and in ``dbdiag compare``;
* ``same``: two labels on the one fsync=off server, ``--repeat 5`` of 0.3 s steps, interleaved: the same
  configuration twice, per-repeat Mann-Whitney U -> "within noise" (under the null the test says
  "significant" at most 2 x 2/252 = 3.2% of the time: only a complete or near-complete separation of
  five interleaved repeats reaches p < 0.05);
* ``ckpt``: one 1.5 s step on the durable server with a CHECKPOINT issued 0.6 s into the measured window:
  the unsteady_window finding names it and says how much it moves the figure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from diag.core import servers

REPO = Path(__file__).resolve().parents[2]
COMMON = ["-w", "insert", "-c", "1", "--no-profile", "--flush-capability", "1000"]


def _run(out: Path, *args: str) -> None:
    p = subprocess.run([sys.executable, "-m", "diag", "run", *args, *COMMON, "--out", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert p.returncode == 0, p.stderr[-3000:]


def _compare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "diag", "compare", *args], capture_output=True, text=True,
                          timeout=120, cwd=str(REPO))


def _events(bundle: Path, kind: str) -> list[dict[str, Any]]:
    out = []
    for line in (bundle / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        if e.get("kind") == kind or e.get("event") == kind:
            out.append(e)
    return out


def _results(bundle: Path) -> list[dict[str, Any]]:
    return json.loads((bundle / "results.json").read_text())["results"]


@pytest.fixture(scope="module")
def fsync_off(pg_fsync_off: servers.ThrowawayServer) -> servers.ThrowawayServer:
    """PostgreSQL with fsync=off: the session's (tests/conftest.py), shared with test_findings_planted."""
    return pg_fsync_off


@pytest.fixture(scope="module")
def knob(tmp_path_factory, fsync_off, pg_server) -> Path:
    out = tmp_path_factory.mktemp("knob") / "knob"
    # --no-collect: the order of steps, the intervals and the significance are the driver's figures; with the
    # collectors on, each of the six steps ran on 1.1 s after its measured part for the flush-call count
    # (collectors.flush_tail), which nothing here reads
    _run(out, f"off={fsync_off.dsn()}", f"on={pg_server.dsn()}", "--repeat", "3", "-T", "1", "--warmup", "0.2",
         "--report-interval", "0.25", "--no-collect")
    return out


@pytest.fixture(scope="module")
def same(tmp_path_factory, fsync_off) -> Path:
    out = tmp_path_factory.mktemp("same") / "same"
    _run(out, f"a={fsync_off.dsn()}", f"b={fsync_off.dsn()}", "--repeat", "5", "-T", "0.3", "--warmup", "0.1",
         "--report-interval", "0.1", "--no-collect")
    return out


def test_repeat_interleaves_targets(knob: Path) -> None:
    started = [(e["target"], e["repeat"]) for e in _events(knob, "step_started")]
    assert started == [("off", 1), ("on", 1), ("off", 2), ("on", 2), ("off", 3), ("on", 3)], started
    rows = _results(knob)
    assert [r["target"] for r in rows] == ["off", "on"]  # one row per step, built from its repeats
    for r in rows:
        reps = [x["tps"] for x in r["repeats"]]
        assert [x["repeat"] for x in r["repeats"]] == [1, 2, 3] and r["repeat_count"] == 3
        assert r["tps"] == pytest.approx(sorted(reps)[1], abs=0.01)  # the median repeat
        ci = r["tps_ci"]
        assert ci["basis"] == "intervals" and ci["n"] == len(r["interval_tps"]) >= 9
        assert ci["low"] <= ci["median"] <= ci["high"] and ci["level"] >= 0.95
        # the representative repeat's window is the row's window
        rep = next(x for x in r["repeats"] if x["repeat"] == r["representative_repeat"])
        assert (rep["t_start"], rep["t_end"]) == (r["t_start"], r["t_end"])


def test_report_shows_the_intervals(knob: Path) -> None:
    html = (knob / "report.html").read_text()
    rows = _results(knob)
    for r in rows:
        ci = r["tps_ci"]
        assert f"[{ci['low']:,.1f} .. {ci['high']:,.1f}]" in html  # the results table
    assert html.count('<g class="interval"') == len(rows)  # an error bar per step on the scaling chart
    assert "median of 3 repeats" in html


def test_durability_knob_is_significant_with_the_right_sign(knob: Path) -> None:
    p = _compare(str(knob), "--json")
    assert p.returncode == 0, p.stderr
    (e,) = json.loads(p.stdout)["comparisons"]
    sig = e["significance"]
    assert e["fast"] == "off" and e["slow"] == "on", (e["fast_tps"], e["slow_tps"])
    assert sig["verdict"] == "significant" and sig["p"] < 0.05 and sig["change"] > 0 and sig["low"] > 0, sig
    assert sig["unit"] == "per-interval" and sig["n_a"] >= 9 and sig["n_b"] >= 9
    text = _compare(str(knob)).stdout
    assert "off against on: significant: " in text and "Mann-Whitney U over per-interval throughput" in text
    html = (knob / "report.html").read_text()  # the report's own A vs B says the same
    assert "off against on: significant: " in html


def test_same_configuration_is_within_noise(same: Path) -> None:
    rows = _results(same)
    assert [r["repeat_count"] for r in rows] == [5, 5]
    p = _compare(str(same), "--json")
    (e,) = json.loads(p.stdout)["comparisons"]
    sig = e["significance"]
    assert sig["unit"] == "per-repeat" and (sig["n_a"], sig["n_b"]) == (5, 5), sig
    assert sig["verdict"] == "within noise", sig
    assert sig["low"] <= 0 <= sig["high"]  # the interval of the change holds no change
    text = _compare(str(same)).stdout
    assert "(within noise)" in text.splitlines()[0] and "are within noise of each other" in text


def test_sets_and_run_names(knob: Path, tmp_path: Path) -> None:
    """Two bundles with the same labels are named by run; a baseline set against a contender set."""
    twin = tmp_path / "knob-again"
    shutil.copytree(knob, twin)
    p = _compare(str(knob), "--vs", str(twin))
    assert p.returncode == 0, p.stderr
    *lines, page_line = p.stdout.splitlines()
    assert len(lines) == 2 and all("baseline (knob) " in ln and "contender (knob-again) " in ln for ln in lines)
    assert all("within noise: +0.0%" in ln for ln in lines)  # the same measurements: no change at all
    page = knob / "compare-vs-knob-again.html"  # the sets' page, beside the first baseline run
    assert page_line == f"comparison page: {page}" and "within noise" in page.read_text(encoding="utf-8")
    p = _compare(str(knob), str(twin), str(knob))
    assert p.returncode == 2 and "--vs" in p.stderr


def _plant_checkpoint(bundle: Path, dsn: str, after_s: float, done: list[str]) -> None:
    """CHECKPOINT ``after_s`` into the first measured window (its step_started event)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ev = bundle / "events.jsonl"
        if ev.exists() and '"step_started"' in ev.read_text():
            time.sleep(after_s)
            with psycopg.connect(dsn, autocommit=True) as c:
                c.execute("CHECKPOINT")
            done.append(time.strftime("%H:%M:%S"))
            return
        time.sleep(0.02)


def test_steady_state_check_sees_a_planted_checkpoint(tmp_path: Path, pg_server) -> None:
    out = tmp_path / "ckpt"
    done: list[str] = []
    th = threading.Thread(target=_plant_checkpoint, args=(out, pg_server.dsn(), 0.6, done), daemon=True)
    th.start()
    # 3 s: the checkpoint's span is placed between two statistics records a second apart, and a checkpoint that
    # crosses one (CI: -0.28 .. 1.72 s) touched every interval of a 1.5 s window, leaving none to compare with.
    _run(out, f"pg={pg_server.dsn()}", "-T", "3", "--warmup", "0.2", "--report-interval", "0.25")
    th.join(10)
    assert done, "the CHECKPOINT was not issued"
    found = json.loads((out / "findings.json").read_text())["findings"]
    unsteady = [f for f in found if f["category"] == "unsteady_window"]
    assert unsteady, [f["category"] for f in found]
    ckpt = [c for c in unsteady[0]["extra"]["causes"] if c["cause"] == "checkpoint"]
    assert ckpt and ckpt[0]["intervals_touched"] >= 1, unsteady[0]["evidence"]
    assert "checkpoint between " in unsteady[0]["evidence"]["causes"]  # the report's words
    # how much it moves the figure: the window's rate against the intervals it did not touch
    assert "moves_figure_pct" in ckpt[0] and ckpt[0]["against"] == "the intervals it did not touch"
    assert -1.0 < ckpt[0]["between_s"][0] < 1.5  # from the stats sample before it, in the window
