"""The kinds of dbdiag's own sessions that tests/integration/test_own_sessions.py opens are every kind the code
names: a new ``own_app_name("...")`` outside the collectors must be added there, or the samplers' rule goes
untested for it."""

from __future__ import annotations

import re
from pathlib import Path

from tests.integration.test_own_sessions import OTHER_KINDS

ROOT = Path(__file__).resolve().parents[2]


def test_every_own_session_kind_in_the_code_is_tested() -> None:
    used = {m for pkg in ("diag", "collectors", "workloads") for p in (ROOT / pkg).rglob("*.py")
            for m in re.findall(r'own_app_name\("([^"]+)"\)', p.read_text(encoding="utf-8"))}
    assert used and used == set(OTHER_KINDS), (sorted(used), OTHER_KINDS)
