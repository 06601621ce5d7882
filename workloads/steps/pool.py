"""The client pool: one forked process per client, each with its own duplex pipe; or, with ``groups``, the
clients spread over that many processes (:mod:`workloads.mux`), each client still with its own pipe.

Each process runs :func:`workloads.steps.loop.client_main` (its own connection, no GIL
between clients; it ignores SIGINT, so Ctrl-C reaches only the parent, which
tells the clients to stop through a shared flag). The pool forks them, waits for
them to be ready, sends the plan (:class:`~workloads.steps.messages.Go`) and hands the
caller each client's messages with its index, as named messages. A client that
vanishes (its pipe closes) comes out as a :class:`~workloads.steps.messages.Fatal`, so
the caller has one path for a client that is out. ``close()`` ends any process
still running: terminate, then kill. A client dies with the run however the run
dies (:func:`diag.core.procs.guard_child`, first thing in the child).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import selectors
import time
from collections.abc import Callable, Iterator
from typing import Any

from diag.core.procs import guard_child
from workloads.steps.loop import ClientSpec, client_main
from workloads.steps.messages import Done, Fatal, FromClient, Go, Ready, decode

_FORK = mp.get_context("fork")
JOIN_S = 5.0   # per process, after terminate and again after kill


class ClientPool:
    """``n`` client processes for one step; use as a context manager (or call :meth:`close`).

    ``main`` is the child's entry point, ``main(index, spec, pipe, stop_flag)``:
    the real client unless a test gives another.
    """

    def __init__(self, spec: ClientSpec, n: int, main: Callable[..., None] = client_main, groups: int = 0,
                 group_main: Callable[..., None] | None = None) -> None:
        """``groups`` > 0: that many processes run ``group_main(indexes, spec, pipes, stop_flag)`` for
        contiguous shares of the clients."""
        self.spec, self.n, self._main = spec, n, main
        self._group_main: Callable[..., None] | None
        self.groups, self._group_main = (groups, group_main) if groups and group_main is not None else (0, None)
        self._stop = _FORK.RawValue("b", 0)
        self._procs: list[Any] = []
        self._pipes: dict[Any, int] = {}   # our end of each pipe -> client index
        self._ready: list[Any] = []
        self.live: dict[Any, int] = {}     # pipes of the clients started and not out yet -> client index
        # The live pipes, watched from start() on by one selector: multiprocessing.connection.wait builds a
        # poll set of every pipe on each call, which at 200 clients was a sixth of the orchestrator's CPU.
        self._sel: selectors.BaseSelector | None = None

    def __enter__(self) -> ClientPool:
        if self.groups:
            return self._enter_groups()
        try:
            for i in range(self.n):
                mine, theirs = _FORK.Pipe(duplex=True)
                p = _FORK.Process(target=_guarded, args=(os.getpid(), self._main, i, self.spec, theirs, self._stop),
                                  name=f"dbdiag-client-{i}", daemon=True)
                self._procs.append(p)  # before start: close() must see it even if start fails
                self._pipes[mine] = i
                try:
                    p.start()
                finally:
                    theirs.close()
        except BaseException:  # __exit__ is not called when __enter__ fails: end what was started
            self.close()
            raise
        return self

    def _enter_groups(self) -> ClientPool:
        try:
            for g in range(self.groups):
                idxs = list(range(g * self.n // self.groups, (g + 1) * self.n // self.groups))
                theirs = []
                for i in idxs:
                    mine, t = _FORK.Pipe(duplex=True)
                    self._pipes[mine] = i
                    theirs.append(t)
                p = _FORK.Process(target=_guarded, args=(os.getpid(), self._group_main, idxs, self.spec, theirs,
                                                         self._stop), name=f"dbdiag-clients-{g}", daemon=True)
                self._procs.append(p)
                try:
                    p.start()
                finally:
                    for t in theirs:
                        t.close()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_ready(self, timeout_s: float) -> Iterator[tuple[int, Ready | Fatal]]:
        """Each client's first message as it comes: Ready, or Fatal (it could not start, exited, or was not
        ready within ``timeout_s``; that client is out)."""
        pending = set(self._pipes)
        deadline = time.monotonic() + timeout_s
        # One selector, each pipe registered once: multiprocessing.connection.wait registers every pending pipe
        # on each call, and 1,000 clients becoming ready a few at a time made 67,000 registrations.
        sel = selectors.DefaultSelector()
        try:
            for c in pending:
                sel.register(c, selectors.EVENT_READ)
            while pending and time.monotonic() < deadline:
                for key, _ in sel.select(timeout=max(deadline - time.monotonic(), 0)):
                    c = key.fileobj
                    sel.unregister(c)
                    pending.discard(c)
                    msg = _recv(c, "client process exited before it was ready")
                    if isinstance(msg, Ready):
                        self._ready.append(c)
                        yield self._pipes[c], msg
                    else:
                        yield self._pipes[c], msg if isinstance(msg, Fatal) else _unexpected(msg)
        finally:
            sel.close()
        for c in pending:
            yield self._pipes[c], Fatal("timeout", f"client not ready within {timeout_s:.0f} s")

    def start(self, go: Go) -> None:
        """Send the plan to every ready client; they are live from now on."""
        for c in self._ready:
            c.send(go)
        self.live = {c: self._pipes[c] for c in self._ready}
        self._sel = selectors.DefaultSelector()
        for c in self.live:
            self._sel.register(c, selectors.EVENT_READ)

    def receive(self, timeout_s: float) -> list[tuple[int, FromClient]]:
        """The messages of live clients within ``timeout_s`` (none: an empty list). After a Done or a
        Fatal (also made up for a pipe that closed early) that client is no longer live."""
        out: list[tuple[int, FromClient]] = []
        if self._sel is None or not self.live:
            time.sleep(max(timeout_s, 0.0))
            return out
        for key, _ in self._sel.select(timeout=max(timeout_s, 0.0)):
            c = key.fileobj
            idx = self.live[c]
            msg = _recv(c, "client process ended without reporting")
            if type(msg) is Done or type(msg) is Fatal:
                del self.live[c]
                self._sel.unregister(c)
            out.append((idx, msg))
        return out

    def abandon(self) -> list[int]:
        """Give up on the live clients (still busy long after the end): their indexes; close() ends them."""
        gone = list(self.live.values())
        self.live = {}
        if self._sel is not None:
            self._sel.close()
            self._sel = None
        return gone

    def stop(self) -> None:
        """Tell every client to stop at its next tick (Ctrl-C)."""
        self._stop.value = 1

    def close(self) -> None:
        if self._sel is not None:
            self._sel.close()
            self._sel = None
        for p in self._procs:
            if p.is_alive():
                p.terminate()
        for p in self._procs:
            if p.pid is None:  # never started
                continue
            p.join(timeout=JOIN_S)
            if p.is_alive():
                p.kill()
                p.join(timeout=JOIN_S)
        for c in self._pipes:
            c.close()


def _guarded(parent: int, main: Callable[..., None], *args: Any) -> None:
    """A client process: guarded against outliving ``parent`` (the run's PID before the fork), then ``main``."""
    # No watch thread: the native executor holds the GIL through each batch, and a thread waking to take it
    # would cost the measured loop; the pool forks from the run's main thread, so PDEATHSIG covers it.
    guard_child(parent, watch=False)
    main(*args)


def _recv(c: Any, closed: str) -> FromClient:
    """One message from pipe ``c``; a Fatal saying ``closed`` when the client's end is closed."""
    try:
        return decode(c.recv())
    except (EOFError, OSError):
        return Fatal("internal", closed)
    except ValueError as e:  # a client-side bug: that client is out
        return Fatal("internal", str(e))


def _unexpected(msg: FromClient) -> Fatal:
    return Fatal("internal", f"client sent {type(msg).__name__} before it was ready")
