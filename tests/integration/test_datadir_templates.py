"""Throwaway servers after the first of a kind start from a copy of its fresh data directory (diag.core.datadirs,
enabled for the test session by tests/conftest.py): each copy is a server of its own, started with its own
settings, owned by the user it runs as."""

from __future__ import annotations

import os

import pytest

from diag.core import datadirs, servers
from diag.core.db import Session

SETTING = {"postgres": ("work_mem", "7MB", "SHOW work_mem", "7MB"),
           "mysql": ("innodb_log_file_size", "4M", "SELECT @@innodb_log_file_size AS v", str(4 * 2**20))}
TABLE = {"postgres": "public.tpl_mark", "mysql": "mysql.tpl_mark"}


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_servers_copied_from_a_template_are_their_own(engine: str) -> None:
    key, value, show, shown = SETTING[engine]
    a = servers.start_server(engine)
    try:
        with Session(a.target(), statement_timeout_ms=0) as s:
            s.execute(f"CREATE TABLE {TABLE[engine]} (x int)")
        assert any(k.startswith(engine) for k in datadirs._templates), datadirs._templates  # kept after the first
        b = servers.start_server(engine, {key: value})
        try:
            with Session(b.target(), statement_timeout_ms=0) as s:
                got = next(iter(s.query(show)[0].values()))
                assert str(got) == shown  # the copy's own settings
                s.execute(f"CREATE TABLE {TABLE[engine]} (x int)")  # a's table is not in b
            st = os.stat(b.data_dir)
            user = servers.run_user()
            assert st.st_uid == (user.pw_uid if user is not None else os.getuid())
        finally:
            b.stop()
    finally:
        a.stop()
    assert not a.directory.exists() and not b.directory.exists()
