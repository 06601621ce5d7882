"""Record a custom-script run on a throwaway server (how the custom-script bundles here were made).

Usage::

    python tests/data/bundles/record_custom.py ENGINE OUT CLIENTS SCRIPT [--setup "SQL; SQL"] [--label L]
        [KEY=VALUE ...]

ENGINE is postgres or mysql; CLIENTS a comma list; KEY=VALUE are server settings.
The server gets a ``dbdiag`` schema / database, then the setup statements, then
``dbdiag run -w custom --script SCRIPT -T 3 --warmup 1`` against its DSN (the
custom workload brings no tables of its own). Trim the result with trim_bundle.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from diag.core import servers  # noqa: E402
from diag.core.db import Session  # noqa: E402
from diag.run import Run, RunOptions  # noqa: E402
from workloads.driver import DriverOptions  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("engine", choices=("postgres", "mysql"))
    p.add_argument("out", type=Path)
    p.add_argument("clients")
    p.add_argument("script")
    p.add_argument("--setup", default="")
    p.add_argument("--label", default="")
    p.add_argument("settings", nargs="*")
    a = p.parse_args()
    settings = dict(kv.split("=", 1) for kv in a.settings)
    srv = servers.start_postgres(settings) if a.engine == "postgres" else servers.start_mysql(settings)
    try:
        with Session(srv.target(), statement_timeout_ms=0) as s:
            s.execute("CREATE SCHEMA IF NOT EXISTS dbdiag" if a.engine == "postgres"
                      else "CREATE DATABASE IF NOT EXISTS dbdiag")
            for q in (x for x in a.setup.split(";") if x.strip()):
                s.execute(q)
            if a.engine != "postgres":
                s.execute("COMMIT")
        drv = DriverOptions(clients=tuple(int(c) for c in a.clients.split(",")), duration_s=3.0, warmup_s=1.0,
                            script=a.script)
        label = a.label or f"{a.engine}-custom"
        Run(RunOptions(targets=[f"{label}={srv.dsn()}"], workloads=["custom"], driver=drv, out=a.out,
                       argv=["record_custom"])).execute()
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
