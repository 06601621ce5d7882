"""What reports derive from a loaded bundle is computed once per bundle; a copy that is edited derives afresh."""

from __future__ import annotations

import copy
from pathlib import Path

from diag.core.bundle import load_bundle
from reports.model import cpu
from reports.model.series import group_series, process_group_series
from reports.model.steps import steps

DATA = Path(__file__).resolve().parents[1] / "data" / "bundles"


def test_cpu_use_once_per_step_and_afresh_for_an_edited_copy() -> None:
    b = load_bundle(DATA / "point_select")
    step = next(s for s in steps(b) if s.target.startswith("postgres"))
    first = cpu.cpu_use(b, step)
    assert first is not None and cpu.cpu_use(b, step) is first   # the second ask reads the memo
    c = copy.deepcopy(b)
    assert not c.derived   # a copy starts empty: its series may be edited
    label = step.target
    for r in c.series["host"]:
        procs = (r.get("procs.server") or {}).get(label) or {}
        for row in procs.values():
            row[0] += 0.5 * (r["t"] - c.series["host"][0]["t"])   # every server process: half a core more
    edited = cpu.cpu_use(c, step)
    assert edited is not None and first.server_cores is not None and edited.server_cores is not None
    assert edited.server_cores > first.server_cores + 1.0   # several processes, 0.5 each
    assert cpu.cpu_use(b, step) is first


def test_group_series_is_process_group_series_of_the_host_series() -> None:
    b = load_bundle(DATA / "hot_row_pg_c4")
    host = b.series["host"]
    for group, label in (("client", None), ("collector", None),
                         ("server", next(iter(host[-1]["procs.server"])))):
        got = group_series(b, group, label)
        assert got == process_group_series(host, group, label) and got
        assert group_series(b, group, label) is got
