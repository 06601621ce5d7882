"""``--help`` of the commands states each option's default (and says nothing where there is none)."""

from __future__ import annotations

import re

import pytest

from diag.cli import build_parser


def _help(*cmd: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args([*cmd, "--help"])
    return re.sub(r"\s+", " ", capsys.readouterr().out)


def test_run_help_shows_every_default(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help("run", capsys=capsys)
    for shown in ("(default: point-select)", "(default: 1,4)", "(default: 10.0)", "(default: 2.0)",
                  "(default: prepared)", "(default: read-committed)", "(default: 10)", "(default: 1.0)",
                  "(default: 3.0)", "(default: embedded servers available here)"):
        assert shown in text, shown
    assert "(default: None)" not in text and "(default: False)" not in text and "(default: )" not in text


def test_probe_commands_show_defaults_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert "(default: 0.5)" in _help("durability", capsys=capsys)
    assert "(default: 2.0)" in _help("fsync-test", capsys=capsys)
