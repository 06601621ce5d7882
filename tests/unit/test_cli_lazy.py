"""``dbdiag --help`` and an argument error import none of reports, collectors or workloads.

Each case runs the real ``python -m diag`` in a fresh interpreter and lists, at
exit, the modules of those packages in ``sys.modules``; a command's modules load
only when that command runs (:data:`diag.cli.COMMANDS`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from diag import cli
from diag.core.engines import ENGINES
from workloads.tpcc.tpcc import MODES

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("reports", "collectors", "workloads")
# Runs diag's main as ``python -m diag`` does, then prints the heavy modules it loaded, whatever the exit.
PROBE = f"""
import atexit, runpy, sys
def _show():
    print("LOADED:" + ",".join(sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r})), file=sys.stderr)
atexit.register(_show)
sys.argv = ["diag", *sys.argv[1:]]
runpy.run_module("diag", run_name="__main__")
"""


def _loaded(*args: str) -> tuple[int, list[str], str]:
    p = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=str(ROOT), capture_output=True, text=True,
                       timeout=60)
    line = [ln for ln in p.stderr.splitlines() if ln.startswith("LOADED:")]
    assert line, p.stderr
    return p.returncode, [m for m in line[-1][len("LOADED:"):].split(",") if m], p.stderr


@pytest.mark.parametrize("args", [("--help",), ("run", "--help"), ("report", "--help"), ("compare", "--help"),
                                  ("durability", "--help"), ("fsync-test", "--help"), ("server", "start", "--help")])
def test_help_imports_no_command_module(args: tuple[str, ...]) -> None:
    rc, loaded, _ = _loaded(*args)
    assert rc == 0
    assert loaded == [], f"{' '.join(args)} imported {loaded}"


@pytest.mark.parametrize("args", [("run", "--clients", "x"), ("run", "--no-such-option"), ("no-such-command",),
                                  ("compare",), ("run", "-T", "-1")])
def test_an_argument_error_imports_no_command_module(args: tuple[str, ...]) -> None:
    rc, loaded, err = _loaded(*args)
    assert rc == 2, err
    assert "error:" in err and "Traceback" not in err
    assert loaded == [], f"{' '.join(args)} imported {loaded}"


def test_the_probe_sees_what_a_command_imports() -> None:
    """The probe would notice: a command that runs loads its modules (here the report renderer)."""
    rc, loaded, err = _loaded("report", "/nonexistent/bundle")
    assert rc != 0 and "Traceback" not in err, err
    assert "reports.views.render" in loaded


def test_parser_choices_match_their_owners() -> None:
    """The parser writes these down so as not to import their owners; they must stay equal."""
    assert cli.TPCC_MODES == MODES
    for e in ENGINES:
        for name in (e.name, *e.aliases):
            assert name in cli.ENGINE_HELP, name
