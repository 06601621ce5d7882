"""Cost of ``dbdiag watch`` on the server it watches: a saturated point select with and without a watch.

    python3 -m bench.watch_cost [--engine postgres|mariadb] [--rounds 5] [--duration 6] [--clients 4]
                                [--window 10] [--old DIR] [--out bench/results/NAME.json]

One throwaway server (diag.core.servers.start_postgres / start_mysql). PostgreSQL: pgbench scale 1 in its postgres
database, ``pgbench -n -S -c N -j 2 -T D``; MariaDB: sysbench ``oltp_point_select`` (1 table of 10,000 rows),
``--threads=N --time=D``. Each round runs the load twice, once alone (OFF) and once under ``dbdiag watch
--no-profile --window W`` (ON: every other source a watch starts by default; W defaults to the watch's own
default, 10 s), the order flipped every round so a drift of the machine hits both alike. The watch is started
first and the load only once its sources write (host series and two more series with records). Reported: the
load tool's own tps each side, the median of per-round ON/OFF ratios and its range, and the server CPU of
dbdiag's own sessions during the ON runs (utime + stime from /proc) as a share of one core: PostgreSQL, every
backend whose application_name starts with ``dbdiag:``; MariaDB, the OS thread (performance_schema.threads
THREAD_OS_ID, /proc/PID/task/TID) of every session whose program_name connection attribute does; and the CPU of
the watch's own processes (the command and its collector processes) over the same time: on this 2-vCPU host
they take CPU from the load and the server alike. ``--old DIR``: a third side, the watch run from another code
tree (``git archive`` of a base commit), so old and new code are compared in the same rounds; the three sides
rotate, and reverse every third round.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diag.core import servers  # noqa: E402
from diag.core.db import Session  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _run_s(path: str) -> float:
    """Seconds on CPU of the process or thread whose stat file is ``path``, from its schedstat (ns, exact); the
    tick-sampled utime + stime where the kernel keeps no schedstat. utime + stime are charged in whole 10 ms
    ticks to whichever thread runs when the tick comes: for short bursts (a sampler's statement takes 15-700 us
    of server CPU) over a few seconds that is one or two ticks either way, 0.2-0.3% of a core per 6 s run."""
    try:
        return int(Path(path[:-len("stat")] + "schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return _cpu_s(path)


def _cpu_s(path: str) -> float:
    """utime + stime (s) of /proc/PID/stat or /proc/PID/task/TID/stat; 0 for one that is gone."""
    try:
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


class Engine:
    """What the bench does on one engine: prepare, run the load (its tps), find dbdiag's own sessions."""

    name = ""

    def __init__(self, srv: Any) -> None:
        self.srv = srv

    def prepare(self) -> None: ...

    def load(self, clients: int, seconds: float) -> float:
        raise NotImplementedError

    def own_stat_paths(self) -> list[str]:
        raise NotImplementedError


class Postgres(Engine):
    name = "postgres"

    def _conn(self) -> list[str]:
        return ["-h", "127.0.0.1", "-p", str(self.srv.port), "-U", "postgres"]

    def prepare(self) -> None:
        subprocess.run(["pgbench", *self._conn(), "-i", "-s", "1", "-q", "postgres"], check=True,
                       capture_output=True, timeout=300)

    def load(self, clients: int, seconds: float) -> float:
        p = subprocess.run(["pgbench", *self._conn(), "-n", "-S", "-c", str(clients), "-j", "2", "-T",
                            str(int(seconds)), "postgres"], capture_output=True, text=True, timeout=seconds + 60,
                           check=True)
        return float(re.search(r"^tps = ([\d.]+)", p.stdout, re.M)[1])

    def own_stat_paths(self) -> list[str]:
        with Session(self.srv.target()) as s:
            rows = s.query("SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'dbdiag:%'")
        return [f"/proc/{int(r['pid'])}/stat" for r in rows]


class MariaDB(Engine):
    name = "mariadb"
    DB = "sbtest"

    def _sb(self) -> list[str]:
        return ["sysbench", "oltp_point_select", "--db-driver=mysql", "--mysql-host=127.0.0.1",
                f"--mysql-port={self.srv.port}", "--mysql-user=root", f"--mysql-db={self.DB}", "--tables=1",
                "--table-size=10000"]

    def prepare(self) -> None:
        with Session(self.srv.target()) as s:
            s.execute(f"CREATE DATABASE IF NOT EXISTS {self.DB}")
        subprocess.run([*self._sb(), "prepare"], check=True, capture_output=True, timeout=300)

    def load(self, clients: int, seconds: float) -> float:
        p = subprocess.run([*self._sb(), f"--threads={clients}", f"--time={int(seconds)}", "run"],
                           capture_output=True, text=True, timeout=seconds + 60, check=True)
        return float(re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", p.stdout)[1])

    def own_stat_paths(self) -> list[str]:
        with Session(self.srv.target()) as s:
            rows = s.query("SELECT t.THREAD_OS_ID AS tid FROM performance_schema.threads t "
                           "JOIN performance_schema.session_connect_attrs a ON a.PROCESSLIST_ID = t.PROCESSLIST_ID "
                           "WHERE a.ATTR_NAME = 'program_name' AND a.ATTR_VALUE LIKE 'dbdiag:%'")
        return [f"/proc/{self.srv.pid}/task/{int(r['tid'])}/stat" for r in rows if r.get("tid")]


def _sources_up(out: Path) -> bool:
    """The watch's sources write: the host series and two more have records."""
    series = out / "series"
    if not (series / "host.jsonl").exists():
        return False
    full = [f for f in series.glob("*.jsonl") if f.stat().st_size > 0]
    return len(full) >= 3


def _tree_cpu_s(pid: int) -> float:
    """utime + stime (s) of ``pid`` and every process under it (the watch and its collector processes)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    return sum(_run_s(f"/proc/{p.pid}/stat") for p in procs)


def _on(eng: Engine, clients: int, seconds: float, window: float, out: Path,
        tree: Path | None = None) -> tuple[float, float, float]:
    """The load's tps under a watch, the CPU seconds/s of dbdiag's own sessions on the server meanwhile, and
    of the watch's own processes (on this host they take CPU from the load and the server: 2 vCPUs here).
    ``tree``: run the watch from that code tree (its own PYTHONPATH and working directory)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    watch = subprocess.Popen([sys.executable, "-m", "diag", "watch", f"w={eng.srv.dsn()}", "--window", str(window),
                              "--no-profile", "--out", str(out)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env, cwd=str(tree or Path.cwd()))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _sources_up(out):
            time.sleep(0.2)
        time.sleep(1.0)  # the samplers' sessions connected
        paths = eng.own_stat_paths()
        before, tree0 = sum(_run_s(p) for p in paths), _tree_cpu_s(watch.pid)
        t0 = time.monotonic()
        tps = eng.load(clients, seconds)
        secs = time.monotonic() - t0
        cores = (sum(_run_s(p) for p in paths) - before) / secs
        client_cores = (_tree_cpu_s(watch.pid) - tree0) / secs
    finally:
        watch.send_signal(signal.SIGINT)
        try:
            watch.wait(300)  # its report is rendered after Ctrl-C: minutes at a load of 200 (seen)
        except subprocess.TimeoutExpired:
            watch.kill()  # no watch left polling the next round's server
            watch.wait(30)
    return tps, cores, client_cores


def _summary(rounds: list[dict[str, Any]], side: str) -> dict[str, Any]:
    ratios = [r[side]["tps"] / r["off"] for r in rounds]
    own = [r[side]["own_server_cores"] for r in rounds]
    return {"ratio_median": statistics.median(ratios), "ratio_range": [min(ratios), max(ratios)],
            "ratios": ratios, "on_tps_median": statistics.median(r[side]["tps"] for r in rounds),
            "own_server_core_share_median": statistics.median(own), "own_server_core_share_range": [min(own), max(own)],
            "watch_process_core_share_median": statistics.median(r[side]["watch_process_cores"] for r in rounds)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=("postgres", "mariadb"), default="postgres")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--window", type=float, default=10.0, help="the watch's --window (its default: 10 s)")
    ap.add_argument("--old", type=Path, default=None,
                    help="also watch with this code tree (ON-old beside ON-new; the three sides rotate each round)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    srv = servers.start_postgres() if a.engine == "postgres" else servers.start_mysql()
    eng: Engine = Postgres(srv) if a.engine == "postgres" else MariaDB(srv)
    sides = ["off", "on"] + (["old"] if a.old else [])
    trees = {"on": Path(__file__).resolve().parent.parent, "old": a.old.resolve() if a.old else None}
    try:
        eng.prepare()
        rounds = []
        with tempfile.TemporaryDirectory(prefix="dbdiag-watch-cost-") as tmp:
            for i in range(a.rounds):
                got: dict[str, Any] = {}
                order = sides[i % len(sides):] + sides[:i % len(sides)]
                if (i // len(sides)) % 2:
                    order.reverse()
                for side in order:
                    if side == "off":
                        got["off"] = eng.load(a.clients, a.duration)
                    else:
                        tps, own, proc = _on(eng, a.clients, a.duration, a.window, Path(tmp) / f"w{i}{side}",
                                             trees[side])
                        got[side] = {"tps": tps, "own_server_cores": own, "watch_process_cores": proc}
                got["order"] = order
                got["load1"] = os.getloadavg()[0]
                rounds.append(got)
                print(f"round {i + 1} ({' '.join(order)}): off {got['off']:.0f} tps; " + "; ".join(
                    f"{side} {got[side]['tps']:.0f} tps (x{got[side]['tps'] / got['off']:.3f}), dbdiag's sessions "
                    f"{100 * got[side]['own_server_cores']:.2f}% of a core, the watch's processes "
                    f"{100 * got[side]['watch_process_cores']:.2f}%" for side in sides if side != "off")
                    + f"; load {got['load1']:.1f}", flush=True)
        summary = {"engine": a.engine, "off_tps_median": statistics.median(r["off"] for r in rounds),
                   **{side: _summary(rounds, side) for side in sides if side != "off"},
                   "old_tree": str(a.old) if a.old else None, "rounds": rounds,
                   "clients": a.clients, "duration_s": a.duration, "window_s": a.window,
                   "load1": os.getloadavg()[0]}
        print(json.dumps({k: v for k, v in summary.items() if k != "rounds"}, indent=1))
        if a.out:
            a.out.write_text(json.dumps(summary, indent=1))
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
