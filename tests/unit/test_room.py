"""Room for the clients (workloads.steps.room, the engines' connection_limit kind): the arithmetic, the one line,
the driver's own file limit, and the refusal texts the servers send (saved from real refusals)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from diag.core.engines import MYSQL, POSTGRES
from diag.core.engines.base import ConnectionRoom, tightest
from workloads.steps.room import too_many_line

REPO = Path(__file__).resolve().parents[2]


def test_room_counts_reserved_and_used_slots_and_the_tightest_limit_binds() -> None:
    pg = ConnectionRoom("max_connections", 50, 3, 4)
    assert pg.free == 43
    assert pg.text() == "max_connections is 50 (3 reserved for superusers, 4 in use by other sessions)"
    assert ConnectionRoom("max_connections", 10, 3, 12).free == 0  # over: none, never negative
    user = ConnectionRoom("max_user_connections", 12, 0, 2)
    assert tightest([ConnectionRoom("max_connections", 30, 0, 5), user]) is user
    line = too_many_line("pg", 60, pg)
    assert line == ("pg: 60 clients do not fit: max_connections is 50 (3 reserved for superusers, 4 in use by "
                    "other sessions), so 43 clients fit; run -c 43 or fewer, or raise max_connections")


class _Refusal(Exception):
    """A driver exception carrying a real server's refusal text (and errno, as the MySQL drivers do)."""


def test_refusals_map_to_one_kind() -> None:
    # libpq's text of a refusal at max_connections (PostgreSQL 18, throwaway server with max_connections=50)
    pg = 'connection to server at "127.0.0.1", port 36797 failed: FATAL:  sorry, too many clients already'
    assert POSTGRES.error_kind(_Refusal(pg))[2] == "connection_limit"
    assert POSTGRES.error_kind(_Refusal("FATAL:  too many connections for role \"lim\""))[2] == "connection_limit"
    assert POSTGRES.error_kind(_Refusal("connection refused"))[2] == "connect"  # not at a limit: unchanged
    assert MYSQL.error_kind(_Refusal(1040, "Too many connections"))[2] == "connection_limit"
    assert MYSQL.error_kind(_Refusal(1203, "User lim already has more than 'max_user_connections' active "
                                           "connections"))[2] == "connection_limit"


def test_the_driver_raises_its_own_file_limit_or_says_it_cannot() -> None:
    code = ("import resource, sys\n"
            "from workloads.steps.room import ensure_fds, TooManyClients\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 4096))\n"
            "ensure_fds(1000)\n"
            "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
            "try:\n    ensure_fds(2000)\nexcept TooManyClients as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    soft, line = out.stdout.splitlines()
    assert int(soft) >= 3 * 1000 and "(ulimit -Hn): run -c 1280 or fewer" in line, out.stdout + out.stderr
