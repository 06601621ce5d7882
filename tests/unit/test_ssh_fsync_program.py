"""The program the fsync test over ssh sends to ``python3 -`` there: self-contained, and no value it carries is code.

Run here by a real ``python3 -I -`` in an empty directory (isolated: it cannot import this repository), as
sshd would run it on the database host.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.diskstats import device_for_path
from collectors.fsync_test import _specs, best_flush_capability
from collectors.ssh_fsync import SHIPPED, _result, remote_program
from collectors.ssh_host import ssh_argv
from diag.core.errors import DiagError


# CentOS/RHEL 7's python3 is 3.6: one that pyenv installed here (its python3.6 shim may not be on the version path).
OLD_PYTHON3 = next(iter(sorted(Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")).glob(
    "versions/3.6*/bin/python3"))), Path("/nonexistent"))


def _remote(program: bytes, cwd: Path, python3: str = "python3") -> dict[str, object]:
    p = subprocess.run([python3, "-I", "-"], input=program, capture_output=True, cwd=str(cwd), timeout=60)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    out = json.loads(p.stdout.decode().strip().splitlines()[-1])
    assert isinstance(out, dict)
    return out


def test_the_shipped_modules_import_only_the_standard_library_and_each_other() -> None:
    names = {m.__name__ for m in SHIPPED}
    for m in SHIPPED:
        tree = ast.parse(Path(str(m.__file__)).read_text())
        for node in ast.walk(tree):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for mod in mods:
                assert mod in names or mod.split(".")[0] in sys.stdlib_module_names or mod == "__future__", (m, mod)


def test_the_program_runs_every_method_of_the_local_test(tmp_path: Path) -> None:
    (tmp_path / "cwd").mkdir()
    out = _remote(remote_program(str(tmp_path), 0.02), tmp_path / "cwd")
    res = _result(out, "root@db1")
    assert [(t.group, t.method) for t in res.tests] == [(s.group, s.method) for s in _specs()]
    assert all(t.ops > 0 for t in res.tests if t.supported)
    assert res.notes[0].startswith(f"run on {out['host']} over ssh root@db1 by python3 there")
    assert out["directory"] == str(tmp_path) and not list(tmp_path.glob(".dbdiag-fsync-*"))


def test_a_hostile_directory_name_stays_a_name(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    name = f"/nonexistent'\"$(touch {marker})\n\"\"\"; import os; os.system('touch {marker}') #"
    out = _remote(remote_program(name, 0.02), tmp_path)
    assert not marker.exists()
    assert str(out["error"]).startswith("cannot stat /nonexistent'"), out
    with pytest.raises(DiagError, match=r"^on .+: cannot stat /nonexistent"):
        _result(out, "root@db1")


@pytest.mark.parametrize("spec", ["-oProxyCommand=touch /tmp/x", "", "a b"])
def test_ssh_never_gets_a_destination_it_could_read_as_an_option(spec: str) -> None:
    with pytest.raises(DiagError, match="expected USER@HOST"):
        ssh_argv(spec, "true")
    assert ssh_argv("root@db1", "true")[-3:] == ["--", "root@db1", "true"]


def test_a_python3_older_than_3_7_runs_the_fdatasync_test_alone(tmp_path: Path) -> None:
    # This machine kind has pyenv's 3.6.15; as tests/conftest.py says of binaries, missing means fail, not skip.
    assert OLD_PYTHON3.exists(), f"no Python 3.6 at {OLD_PYTHON3} (pyenv's versions) for the old-python3 fallback"
    (tmp_path / "cwd").mkdir()
    out = _remote(remote_program(str(tmp_path), 0.05), tmp_path / "cwd", str(OLD_PYTHON3))
    assert out["fallback"] == "python3 3.6", out
    res = _result(out, "root@db1")
    (t,) = res.tests
    assert (t.group, t.method, t.supported) == ("one_8kB_write", "fdatasync", True) and t.ops > 0
    assert best_flush_capability(res) == t.ops_per_s and t.ops_per_s == pytest.approx(t.ops / t.seconds, rel=0.01)
    assert "older than 3.7: the fdatasync test only" in res.notes[0] and res.kernel == os.uname().release
    assert res.device.name == device_for_path(tmp_path).name  # the same disk the full test names
    assert not list(tmp_path.glob(".dbdiag-fsync-*"))
    hostile = _remote(remote_program(f"/nonexistent'$(touch {tmp_path}/x)", 0.05), tmp_path, str(OLD_PYTHON3))
    assert str(hostile["error"]).startswith("python3 3.6: cannot create a file in /nonexistent'") and \
        not (tmp_path / "x").exists()
