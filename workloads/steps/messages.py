"""The pipe protocol between the driver and its client processes, one named message per kind.

Each client has one duplex pipe (:mod:`workloads.steps.pool`). The parent sends one
:class:`Go`; a client sends :class:`Ready` or :class:`Fatal`, then one
:class:`IntervalCounts` per report interval it took part in, a
:class:`Reconnected` each time it got its connection back, maybe a
:class:`Lost` or an :class:`Aborted`, and :class:`Done` last (or
:class:`Fatal` if a bug ends it). Trailing fields with a default may be left
off the wire (older senders, hand-made tuples in tests).

Messages are NamedTuples: fields by name, frozen, and as cheap to build, pickle
and read as plain tuples (a client sends one per interval, off its query loop);
both sides send them built by keyword. Each class has a wire tag (:data:`TAGS`):
:func:`decode` also accepts a tagged plain tuple (``("iv", k, ...)``), as hand-made
stand-in clients in tests send, and :meth:`Go.wire` is that form of the plan.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Union


class Go(NamedTuple):
    """Parent -> client: the step's plan, in ``perf_counter_ns`` (CLOCK_MONOTONIC, the same in every process).

    Clients connect and prepare before this; they start at ``start_ns``, count
    nothing before ``measure_ns`` (warmup), report per ``interval_ns`` from
    ``measure_ns`` and stop at ``end_ns``.
    """

    start_ns: int
    measure_ns: int
    end_ns: int
    interval_ns: int

    @classmethod
    def plan(cls, now_ns: int, warmup_s: float, duration_s: float, interval_s: float) -> Go:
        """Start 50 ms after ``now_ns`` (time for the go messages to arrive); intervals of at least 1 ms."""
        start = now_ns + 50_000_000
        measure = start + int(warmup_s * 1e9)
        return cls(start, measure, measure + int(duration_s * 1e9), max(int(interval_s * 1e9), 1_000_000))

    def wire(self) -> tuple[Any, ...]:
        """The tagged tuple :func:`workloads.steps.loop.client_main` reads."""
        return (TAGS[Go], *self)


class Ready(NamedTuple):
    """Connected and prepared; ``c_loop``: this client will run its transactions in C, ``loop`` the name of
    what runs them (the native executor of :mod:`workloads.native.native`; "" for the Python loop, or from an
    older sender); ``session``: the server's id of its connection (0: unknown), to name what a stuck
    statement waits for; ``connect_s``: seconds its connection and preparing took (0.0 from an older sender)."""

    pid: int
    c_loop: bool
    loop: str = ""
    session: int = 0
    connect_s: float = 0.0


class Fatal(NamedTuple):
    """This client is out: it could not start, or a bug ended it. ``code``: SQLSTATE, errno or a kind;
    ``kind``: the DbError kind ("connect", "lost"...; "" when not a database error)."""

    code: str
    message: str
    kind: str = ""


class IntervalCounts(NamedTuple):
    """One client's figures for report interval ``k`` (0-based from ``Go.measure_ns``).

    A client sends it at its first tick in a later interval, so ``k`` only grows;
    a client that sends ``k`` has nothing more for any earlier interval.
    """

    k: int
    transactions: int
    queries: int
    errors: dict[str, int]      # {code: count} of failed transactions
    retries: int
    # {µs: count}, folded by workloads.hist.fold: this client's transactions' latencies; in a process of many
    # clients (workloads.steps.mux) the whole process's, on the first of its clients' reports of the interval
    latency_us: dict[int, int]
    cpu_s: float                # this process's user + system CPU over the interval
    extra: dict[str, int]       # workload counters (TPC-C new orders, rollbacks)
    reconnects: int = 0         # connections re-established in the interval
    # {statement text: {µs: count}}: per-statement latencies (the native executor's; {} from the Python loop)
    statement_latency_us: dict[str, dict[int, int]] = {}
    connect_ns: int = 0         # spent opening connections (--connect-per-transaction), part of the latencies
    # How long the statement in flight when it reported had been running (ns; 0: between transactions). A
    # process of many clients reports a client inside a long statement too (what it completed in the
    # interval), so the parent takes its silence from this, not from the report's arrival.
    in_statement_ns: int = 0


class Lost(NamedTuple):
    """The connection was lost and not re-established (the back-off gave up, the step ended, or
    ``--on-error abort``); a :class:`Done` follows. ``t_ns``: when it was lost (``perf_counter_ns``,
    0: not known); ``kind``: the DbError kind of the last failure ("lost", "connect")."""

    code: str
    message: str
    t_ns: int = 0
    kind: str = "lost"


class Reconnected(NamedTuple):
    """The connection was lost at ``t_ns`` (``perf_counter_ns``) and is back after ``waited_s`` seconds;
    ``code``/``message``: how it was lost. Counted in the interval's ``reconnects`` too."""

    code: str
    message: str
    t_ns: int
    waited_s: float


class Aborted(NamedTuple):
    """``--on-error abort``: the first error that is not a retried serialization failure or deadlock,
    at ``t_ns`` (``perf_counter_ns``); the step ends. A :class:`Done` follows."""

    code: str
    message: str
    t_ns: int
    kind: str = "other"


class Done(NamedTuple):
    """The client's end: its CPU seconds over the measured part and up to 3 sample messages per error code."""

    cpu_s: float
    samples: dict[str, list[str]]


FromClient = Union[Ready, Fatal, IntervalCounts, Lost, Reconnected, Aborted, Done]
# Each message's wire tag (kept out of the classes: a NamedTuple's body holds its fields only).
TAGS: dict[type, str] = {Go: "go", Ready: "ready", Fatal: "fatal", IntervalCounts: "iv", Lost: "lost",
                         Reconnected: "reconnected", Aborted: "abort", Done: "done"}
_BY_TAG: dict[str, Any] = {TAGS[m]: m for m in (Ready, Fatal, IntervalCounts, Lost, Reconnected, Aborted, Done)}
_KINDS = frozenset(_BY_TAG.values())


def decode(raw: Any) -> FromClient:
    """A message received from a client: a tagged plain tuple becomes its class; a message passes as is.

    Raises ValueError for anything else (a bug on the client side)."""
    if type(raw) is tuple:  # exactly tuple: a NamedTuple is a tuple too, and passes below
        cls = _BY_TAG.get(raw[0]) if raw else None
        if cls is None or not len(cls._fields) - len(cls._field_defaults) < len(raw) <= len(cls._fields) + 1:
            raise ValueError(f"unknown client message {raw[:1]!r} with {len(raw)} fields")
        return cls(*raw[1:])
    if type(raw) in _KINDS:
        return raw
    raise ValueError(f"unknown client message of type {type(raw).__name__}")

