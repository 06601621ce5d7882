"""Anchors that tie a step's row in the results table to its parts further down (time accounting, waits,
statements, profile): one id per part and step, and the links a row shows for the parts that exist.

Pure functions of the view the report already built; ids are ASCII (labels hold ``@``, ``:`` and dots).
"""

from __future__ import annotations

import re
from typing import Any

# The parts of a step, in the page's order (the same for every target), with the link text a row shows.
PARTS = (("acc", "time"), ("waits", "waits"), ("stmt", "statements"), ("prof", "profile"))


def step_id(part: str, target: Any, workload: Any, clients: Any) -> str:
    """``part-target-workload-clients`` with every run of other characters as one ``-`` (a valid fragment).
    ``target`` None: a part shared by all targets of a step (the accounting chart)."""
    raw = "-".join(str(x) for x in (part, target if target is not None else "all", workload, clients))
    return re.sub(r"[^A-Za-z0-9]+", "-", raw).strip("-")


def _present(view: dict[str, Any]) -> set[str]:
    """The ids the page will carry, from the sections' own lists."""
    ids = {step_id("acc", None, g["workload"], g["clients"]) for g in view.get("accounting", [])}
    ids |= {step_id("waits", w["target"], w["workload"], w["clients"]) for w in view.get("waits", [])}
    ids |= {step_id("stmt", t["target"], s["workload"], s["clients"])
            for t in view.get("statements", []) for s in t.get("steps", [])}
    ids |= {step_id("prof", p["target"], p["workload"], p["clients"]) for p in view.get("profiles", [])}
    return ids


def step_links(view: dict[str, Any]) -> list[list[tuple[str, str]]]:
    """Per results row (``view["results"]``: :class:`ResultRow` records, same order): [(link text, fragment)] of the
    parts recorded for that step."""
    present = _present(view)
    out = []
    for r in view.get("results", []):
        links = []
        for part, text in PARTS:
            sid = step_id(part, None if part == "acc" else r.target, r.workload, r.clients)
            if sid in present:
                links.append((text, sid))
        out.append(links)
    return out
