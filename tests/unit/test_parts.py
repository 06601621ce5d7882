"""collectors.parts.Parts: the one switch-off rule every engine collector uses."""

from __future__ import annotations

import pytest

from collectors.parts import TIMEOUTS_BEFORE_OFF, Parts
from collectors.sql import SqlUnavailable
from diag.core.errors import DbError


def _raise(err: Exception):
    def fn() -> None:
        raise err
    return fn


def _timeout() -> DbError:
    return DbError("canceling statement due to statement timeout", "57014", "timeout")


def test_timeouts_in_a_row_switch_a_part_off_and_a_success_resets_the_count() -> None:
    p = Parts()
    for _ in range(TIMEOUTS_BEFORE_OFF - 1):
        assert p.call("x", _raise(_timeout())) is None
    assert p.call("x", lambda: 7) == 7  # the run of timeouts is broken
    for _ in range(TIMEOUTS_BEFORE_OFF - 1):
        p.call("x", _raise(_timeout()))
    assert p.is_on("x")
    p.call("x", _raise(_timeout()))
    assert not p.is_on("x")
    assert p.unsaid() == {"x": f"x: {TIMEOUTS_BEFORE_OFF} statement timeouts in a row: "
                                "canceling statement due to statement timeout"}


@pytest.mark.parametrize("kind", ["privilege", "undefined", "unsupported"])
def test_a_permanent_error_switches_off_at_once(kind: str) -> None:
    p = Parts()
    assert p.call("x", _raise(DbError("no", "1", kind))) is None
    assert not p.is_on("x") and p.missing() == ("x: no",)


def test_other_errors_propagate_and_leave_the_part_on() -> None:
    p = Parts()
    with pytest.raises(DbError):
        p.call("x", _raise(DbError("server closed the connection", "", "lost")))
    assert p.is_on("x")


def test_no_sql_for_this_version_switches_off_without_a_grant_hint() -> None:
    p = Parts({"x": "GRANT PROCESS ON *.* TO {user}"}, privilege_hint="GRANT pg_monitor")
    p.call("x", _raise(SqlUnavailable("stat_io: needs PostgreSQL 16 or newer (server is 15.4)")))
    assert p.off == {"x": "x: stat_io: needs PostgreSQL 16 or newer (server is 15.4)"}
    assert p.hint() == ""


def test_privilege_hint_serves_parts_without_their_own() -> None:
    p = Parts({"own": "GRANT PROCESS ON *.* TO {user}"}, user="'u'@'%'", privilege_hint="GRANT pg_monitor TO u")
    denied = DbError("permission denied for view pg_stat_io", "42501", "privilege")
    p.call("own", _raise(denied))
    p.call("other", _raise(denied))
    p.call("absent", _raise(DbError("relation does not exist", "42P01", "undefined")))
    assert p.off["own"].endswith("(fix: GRANT PROCESS ON *.* TO 'u'@'%')")
    assert p.off["other"] == "other: permission denied for view pg_stat_io (fix: GRANT pg_monitor TO u)"
    assert p.off["absent"] == "absent: relation does not exist"
    assert p.hint() == "GRANT PROCESS ON *.* TO 'u'@'%'; GRANT pg_monitor TO u"


def test_a_hint_the_server_already_gave_is_not_repeated() -> None:
    p = Parts(privilege_hint="pg_monitor")
    p.call("x", _raise(DbError("must be a member of pg_monitor", "42501", "privilege")))
    assert p.off["x"] == "x: must be a member of pg_monitor"

