"""With sources off, a limit claims nothing it has no evidence for (issue 26): saved real bundles, both ways.

A ``--no-collect`` run has no host series and no wait samples: its limit is ``unobserved`` and says what
was not observed, never "nothing saturated" (a host whose CPUs were saturated once read "Round trips: 0.3%
of transaction time ... nothing saturated"). With the sources on, the same rules still name the limit; with
the host series alone missing, the round trips are named but CPU saturation is said not observed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from diag.core.bundle import Bundle, load_bundle
from reports.rules.findings import derive_findings
from reports.rules import limit
from reports.model.cpu import cpu_use
from reports.model.steps import steps

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"
NOTHING = ("nothing saturated", "nothing is saturated", "no resource is saturated")


def _texts(b: Bundle) -> list[str]:
    """Every finding's title, advice and evidence values, lower case."""
    out = []
    for f in derive_findings(b):
        out += [f["title"].lower(), f["advice"].lower(), *(str(v).lower() for v in f["evidence"].values())]
    return out


def _without_host(tmp: Path, name: str) -> Bundle:
    """A saved bundle with its host series removed (the host source off, the wait sampler on)."""
    dst = tmp / name
    shutil.copytree(DATA / name, dst)
    for p in (dst / "series").glob("host*.jsonl"):
        p.unlink()
    return load_bundle(dst)


def test_no_collect_names_no_limit_and_says_what_was_not_observed() -> None:
    b = load_bundle(DATA / "point_select_pg_no_collect")
    found = limit.step_limit(b)
    assert len(found) == 1
    f = found[0]
    assert f.extra["kind"] == "unobserved" and f.extra["saturated"] is False
    assert f.title.startswith("Limit not observed: no host CPU and no server waits evidence"), f.title
    assert "host CPU" in f.evidence["not_observed"] and "server waits" in f.evidence["not_observed"]
    assert "round trips" not in f.title.lower()  # the round trips were not measured: not named as the limit
    assert f.impact == 0.0
    texts = _texts(b)
    assert not [t for t in texts if any(n in t for n in NOTHING)], texts


def test_sources_on_still_name_the_limit_nothing_saturated() -> None:
    """With the host series and the waits (repeat_insert_pg_noisy's first step): nothing saturated is a finding."""
    found = [f for f in limit.step_limit(load_bundle(DATA / "repeat_insert_pg_noisy"))
             if f.extra["kind"] == "round_trips"]
    assert found
    for f in found:
        assert f.title.endswith("nothing saturated"), f.title
        assert "not_observed" not in f.evidence


def test_sources_on_saturated_device_is_the_limit() -> None:
    found = limit.step_limit(load_bundle(DATA / "insert_flush_cap_120"))
    assert found and all(f.extra["kind"] == "commit_flush" and f.extra["saturated"] for f in found)
    assert all("not_observed" not in f.evidence for f in found)


def test_host_series_missing_round_trips_named_cpu_saturation_not_observed(tmp_path: Path) -> None:
    b = _without_host(tmp_path, "point_select")
    found = limit.step_limit(b)
    assert len(found) == 4
    for f in found:
        assert f.extra["kind"] == "round_trips"
        assert "CPU saturation not observed (host CPU missing)" in f.title, f.title
        assert f.evidence["not_observed"] == "host CPU (no host sample over the step)"
    assert not [t for t in _texts(b) if any(n in t for n in NOTHING)]


def test_host_series_missing_lock_symptoms_do_not_claim_nothing_saturated(tmp_path: Path) -> None:
    """A measured wait (the hot row's lock) is still named; no wait finding under it says nothing is saturated."""
    b = _without_host(tmp_path, "hot_row_pg_c4")
    found = limit.step_limit(b)
    assert [f.extra["kind"] for f in found] == ["lock"]
    assert not [t for t in _texts(b) if any(n in t for n in NOTHING)]


def test_a_stalled_host_source_is_no_evidence_of_the_step() -> None:
    """200 clients on 2 CPUs starved the host source: no sample from 1.4 s before to 6.3 s after the 4 s step.
    What it saw is the time around the step (the server's CPU read 0.005 cores at 6,700 tps, so "other
    processes used 1.98 of 2 CPUs" and "nothing saturated"): now no CPU claim is made from it."""
    b = load_bundle(DATA / "many_clients_pg_c200_host_stalled")
    (step,) = steps(b)
    assert cpu_use(b, step) is None
    (f,) = limit.step_limit(b)
    assert "CPU saturation not observed" in f.title and f.evidence["not_observed"].startswith("host CPU"), f.title
    found = derive_findings(b)
    assert not [x for x in found if x["category"] == "host_contention"], found
    assert not [t for t in _texts(b) if any(n in t for n in NOTHING)]


def test_a_host_source_at_its_cadence_is_evidence() -> None:
    b = load_bundle(DATA / "point_select")
    assert all(cpu_use(b, s) is not None for s in steps(b))
