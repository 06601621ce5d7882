"""``--connect-per-transaction`` (pgbench ``-C``): each transaction on a new connection.

:func:`per_transaction` turns a client's ``connect()`` into one whose runner opens a
fresh connection (and prepares the workload's statements on it, as an
application without a pool must) before every transaction and closes the old
one first. The connect is timed on its own (``Runner.connect_ns``: nanoseconds
spent connecting since the last call, sent with each interval's counts) and is
part of the transaction's latency: the client waits for it as it waits for the
statements. The transactions run one at a time through the Python closed loop
(no C batch: the connect is between them); on the native executor the
connection, its preparing and the transaction are still the C side's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from workloads.base import Runner
from workloads.clients.clientbase import Client

Connect = Callable[[], "tuple[Client, Runner]"]


class ChurnClient:
    """Stands in for the client of a churning process: the connection of the transaction now running."""

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        self.inner, self.inner_runner = connect()
        self.connect_ns = 0   # spent connecting since the last take()
        self.connects = 1

    def renew(self) -> Runner:
        """Close the connection, open a new one (timed); the new connection's runner."""
        self.inner.close()
        t0 = time.perf_counter_ns()
        try:
            self.inner, self.inner_runner = self._connect()
        finally:
            self.connect_ns += time.perf_counter_ns() - t0
        self.connects += 1
        return self.inner_runner

    def take(self) -> int:
        n, self.connect_ns = self.connect_ns, 0
        return n

    def after_error(self) -> None:
        self.inner.after_error()

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:  # product, driver... of the connection now open
        return getattr(self.inner, name)


def per_transaction(connect: Connect) -> Connect:
    """A ``connect()`` whose runner renews its connection before each transaction (the first transaction
    uses the connection opened by the call itself, so its connect is the client's start-up)."""

    def churning() -> tuple[Client, Runner]:
        cc = ChurnClient(connect)
        first = [True]
        extra = cc.inner_runner.extra

        def txn() -> int:
            r = cc.inner_runner
            if first[0]:
                first[0] = False
            else:
                r = cc.renew()
            try:
                return r.txn()
            finally:
                if r.extra is not extra and r.extra:  # each connection's runner counts its own outcomes
                    extra.update(r.extra)
                    r.extra.clear()

        runner = Runner(txn, extra, pause_ns=cc.inner_runner.pause_ns, statements=cc.inner_runner.statements,
                        connect_ns=cc.take)
        return cc, runner  # type: ignore[return-value]
    return churning
