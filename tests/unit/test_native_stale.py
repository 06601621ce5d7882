"""A compiled executor built from another _native.c than the checkout's is not called (workloads.native.nativelib)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

from workloads.native import nativelib

SOURCE = Path(nativelib.__file__).with_name("_native.c")


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16]


def test_this_checkouts_module_is_built_from_its_source() -> None:
    # pip install -e / build_ext --inplace ran before the tests: the module must be the source's
    assert nativelib._native is not None, nativelib.STALE or "workloads.native._native is not compiled"
    assert nativelib._native.SOURCE_DIGEST == _digest(SOURCE)
    assert nativelib.STALE == ""


def test_a_module_of_another_source_is_stale_and_says_how_to_rebuild(tmp_path: Path) -> None:
    src = tmp_path / "_native.c"
    src.write_text("int x;\n")
    assert nativelib.stale_reason(SimpleNamespace(SOURCE_DIGEST=_digest(src)), src) == ""
    src.write_text("int x, y;\n")
    why = nativelib.stale_reason(SimpleNamespace(SOURCE_DIGEST="0123456789abcdef"), src)
    assert "_native.c changed since workloads/native/_native was built" in why and "build_ext --inplace" in why


def test_unknown_digests_are_not_stale(tmp_path: Path) -> None:
    src = tmp_path / "_native.c"
    src.write_text("int x;\n")
    assert nativelib.stale_reason(SimpleNamespace(SOURCE_DIGEST=""), src) == ""  # built without setup.py's macro
    assert nativelib.stale_reason(SimpleNamespace(SOURCE_DIGEST="0123456789abcdef"), tmp_path / "none.c") == ""


def test_a_module_built_before_digests_were_recorded_is_stale(tmp_path: Path) -> None:
    src = tmp_path / "_native.c"
    src.write_text("int x;\n")
    why = nativelib.stale_reason(SimpleNamespace(), src)
    assert "predates _native.c's build check" in why and "build_ext --inplace" in why
