"""The project's own exception types.

Anything a user can cause (bad DSN, wrong password, missing binary, perf not
allowed...) is raised as a :class:`DiagError`; the CLI prints ``str(error)`` as
one line and exits with ``error.exit_code``. Code below the CLI never calls
``sys.exit``.
"""

from __future__ import annotations


class DiagError(Exception):
    """A failure the user can cause or fix; shown as one line, exit code 2."""

    exit_code: int = 2


class UsageError(DiagError):
    """Bad command-line input (unknown scheme, bad option value)."""


class ParseError(DiagError):
    """Text from a server or tool could not be parsed (names the section/line)."""


class ToolUnavailable(DiagError):
    """An external program (perf, initdb, mariadbd...) is missing or not permitted."""


class SourceStopped(DiagError):
    """A sampled source lost what it reads mid-run (a node_exporter that stopped answering): its series ends
    at ``last_t`` (Unix s, None when it never gave a record) for ``reason`` ("connection refused",
    "timed out", ...). The run records it in the source's ``collector_off`` event, with these fields, so the
    report can say where the evidence stops and why, and the run goes on without that source."""

    def __init__(self, message: str, last_t: float | None, reason: str) -> None:
        super().__init__(message)
        self.last_t = last_t
        self.reason = reason

    def fields(self) -> dict[str, object]:
        """The event fields: ``stopped_at`` (the last record's time) and ``reason``."""
        return {"stopped_at": self.last_t, "reason": self.reason}


class RunIncomplete(DiagError):
    """The run ended and its report is rendered, but a step was cut short: the CLI says where the report is
    and exits non-zero with the subclass's code."""


class ServerLost(RunIncomplete):
    """A target's server went away during the run (the run went on with the other targets and kept what
    it measured); exit code 3, so scripts can tell a lost server from a usage problem."""

    exit_code = 3


class StepsAborted(RunIncomplete):
    """``--on-error abort`` ended one or more steps at their first error (the run went on with the next
    steps, as pgbench's other clients do after one aborts); exit code 4, as pgbench exits non-zero when a
    client aborted."""

    exit_code = 4


class StatementStuck(RunIncomplete):
    """A statement did not return within its bound (what it waited for is in the message and the row)."""

    exit_code = 5


class DbError(DiagError):
    """A database error, mapped from the driver's exception in one place per engine.

    ``code`` is the SQLSTATE (PostgreSQL) or the numeric error code as a string
    (MySQL); ``kind`` is one of: "connect", "auth", "privilege", "serialization",
    "deadlock", "lost", "timeout", "connection_limit" (the server refused it: max_connections,
    max_user_connections, a role's connection limit), "other".
    """

    def __init__(self, message: str, code: str = "", kind: str = "other") -> None:
        super().__init__(message)
        self.code = code
        self.kind = kind
