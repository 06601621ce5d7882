"""``dbdiag server start ENGINE``: a throwaway server that lives until Ctrl-C (SIGTERM, SIGHUP)."""

from __future__ import annotations

import argparse
import sys

from diag.core.argtypes import key_values as _kv
from diag.core.engines import engine_for
from diag.core.procs import supervised
from diag.core.servers import ThrowawayServer, start_server


def main(a: argparse.Namespace, argv: list[str]) -> int:
    """Exit code 0 when stopped by the user, 1 when the server exited by itself."""
    dbms = engine_for(a.engine)  # an unknown name is a one-line error before anything starts
    settings = _kv(a.set)
    with supervised() as sup:  # removes the server should we be SIGKILLed
        return _serve(start_server(dbms, settings, a.port, supervisor=sup))


def _serve(srv: ThrowawayServer) -> int:
    """Wait for Ctrl-C (SIGTERM, SIGHUP), then stop and remove ``srv``."""
    try:
        print(srv.dsn(), flush=True)
        print(f"dbdiag: {srv.engine} server pid {srv.pid} in {srv.directory}; Ctrl-C stops and removes it",
              file=sys.stderr, flush=True)
        while srv.process is not None and srv.process.poll() is None:
            try:
                srv.process.wait(timeout=1.0)
            except Exception:  # subprocess.TimeoutExpired: keep waiting for Ctrl-C
                continue
        print(f"dbdiag: error: the server exited by itself: {srv.log_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dbdiag: stopping the server and removing its directory", file=sys.stderr)
        return 0
    finally:
        srv.stop()
