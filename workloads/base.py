"""What a workload is: a name, the dataset it needs, and a per-client transaction.

Shaped after locust's ``User``: the class declares its schema and data once
(:meth:`Workload.dataset`), and :meth:`Workload.client` builds, inside each client
process and on that client's own connection, a :class:`Runner` whose ``txn()``
runs one whole transaction and returns how many statements it sent. Statements
are prepared there, once; ``txn`` does nothing but draw its random values and
call them.
"""

from __future__ import annotations

import random
from collections import Counter
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

from diag.core.db import Session
from diag.core.errors import DbError
from workloads.clients.client import Client
from workloads.load import Dataset
from workloads.native.program import Program, Tally

# ``batch(t0_ns, until_ns, buf) -> (n, t_last_ns, error)``: transactions in C until the clock passes
# ``until_ns`` (or ``buf``, an ``array('q')``, is full), each one's latency in ns (from the previous one's
# end, the first from ``t0_ns``) in ``buf[:n]``; ``error`` None or the DbError of the failed transaction
# (not counted; ``t_last_ns`` is then when it started). The native executor's (workloads.native.native).
Batch = Callable[[int, int, array], tuple[int, int, DbError | None]]


@dataclass(frozen=True)
class ClientCtx:
    """Who this client is within its step."""

    index: int  # 0-based
    clients: int
    scale: float
    think: bool = False
    seed: int = 0

    def rng(self) -> random.Random:
        return random.Random(self.key_seed())

    def key_seed(self) -> int:
        """This client's seed (for generators outside Python: the native executor)."""
        return self.seed * 1_000_003 + self.index


@dataclass
class Runner:
    """One client's transaction and optional per-workload counters.

    ``txn()`` returns the number of statements sent. ``extra`` counts named
    outcomes (TPC-C new orders, intended rollbacks) that the driver reports per
    interval. ``pause_ns()``, when set and ``--think`` is on, gives the keying plus
    think time to wait before the next transaction (not part of its latency).
    ``batch``, when set, runs many of these transactions in C between two ticks.
    """

    txn: Callable[[], int]
    extra: Counter[str] = field(default_factory=Counter)
    pause_ns: Callable[[], int] | None = None
    # The same transaction run in C (workloads.native.native), used by the closed loop.
    batch: Batch | None = None
    # Statements each batched transaction sends (what txn() returns).
    statements: int = 1
    # {statement: {µs: count}} since the last call (the native executor's per-statement latencies).
    statement_latency: Callable[[], dict[str, dict[int, int]]] | None = None
    # Statements the batched transactions sent since the last call, when they differ between transactions
    # (a program with jumps); None: ``statements`` each.
    sent: Callable[[], int] | None = None
    # Nanoseconds spent opening connections since the last call (--connect-per-transaction, workloads.churn).
    connect_ns: Callable[[], int] | None = None


class Workload:
    """Base class; subclasses set ``name`` and implement ``dataset`` and ``client``."""

    name = ""
    description = ""
    needs_script = False

    def dataset(self, scale: float) -> Dataset | None:
        """The tables this workload reads and writes at ``scale`` (None: it brings none)."""
        return None

    def client(self, c: Client, ctx: ClientCtx) -> Runner:
        raise NotImplementedError

    def program(self, ctx: ClientCtx) -> Program | None:
        """This client's transaction as a program for the native executor (workloads.native.native), or None:
        the Python loop runs ``client()``'s transaction. May raise program.Unsupported (same meaning)."""
        return None

    def setup(self, s: Session) -> None:
        """Server-side objects the workload needs besides its dataset (TPC-C's routines), made before the steps
        on ``s`` (whether the data were loaded now or reused); UsageError when the server cannot have them."""

    def outcomes(self) -> Tally | None:
        """How the native executor counts this workload's named outcomes (``Runner.extra``) from the draws of its
        program (:func:`workloads.native.program.tallied`), or None: it has none."""
        return None

    def check(self, c: Client) -> None:
        """Prepare everything once before the run so mistakes surface early (custom scripts)."""

    def result_extra(self, totals: Counter[str], transactions: int, duration_s: float) -> dict[str, float]:
        """Workload-specific result fields (TPC-C NOPM/TPM)."""
        return {}
