"""Issue 26: where the machine's time goes per committed transaction under dbdiag's multiplexed point-select and
under pgbench at N clients on one throwaway PostgreSQL, measured in the middle of each run (not its start-up).

    python3 -m bench.pg_cpu_split [--clients 200] [--rounds 3] [--variants JSON] [--wakeups] [--batch]
                                  [--out FILE]

Each side runs 10 s; from its 4th to its 8th second: /proc/stat's user / system / softirq / idle split, the
machine's context switches, rescheduling and other interrupts (/proc/interrupts), TCP segments (/proc/net/snmp),
and every task's CPU by command name (/proc/*/task/*/stat: "pg" the backends, "python3" our clients and the
orchestrator), all over the server's own commit count in the same span (pg_stat_database.xact_commit).
``--variants '{"b0": {"DBDIAG_MUX_EAGER": "0"}}'``: ours again with these environment variables (e.g. the early
look off, DBDIAG_MUX_PROCS=8). ``--wakeups``: ``perf record -a -e sched:sched_wakeup`` for 1 s of that span and
the share of the backends' wake-ups that landed on another CPU than their waker's. Per command, also the
context switches per transaction its tasks made asleep ("vcs.": voluntary) and preempted ("ics.": involuntary).
``--stacks``: ``perf record -g`` of the side's process tree for 1 s of the span, and the shares of its samples
taken while the kernel switched it out and back in on returning from a send ("stacks.preempted_after_send")
and while a send woke a backend ("stacks.waking_in_send"). ``--batch``: ours once more with every one of its processes moved to SCHED_BATCH (unprivileged) a second before
the span: whether our clients' preemptions by the backends they wake can be declined that way.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench import many_clients as mc
from bench.pg_many_events import OURS, commits
from collectors.procfs import ProcReader
from diag.core import servers

HZ = os.sysconf("SC_CLK_TCK")
STAT = ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
RUN_S, FROM_S, SPAN_S = 10, 4.0, 4.0


def _stat() -> dict[str, int]:
    """/proc/stat's CPU line (ticks) and context switches."""
    lines = Path("/proc/stat").read_text().splitlines()
    out = dict(zip(STAT, (int(x) for x in lines[0].split()[1:9])))
    out.update({"ctxt": int(ln.split()[1]) for ln in lines if ln.startswith("ctxt")})
    return out


def _counters() -> dict[str, int]:
    """Interrupts by kind (both CPUs) and TCP segments."""
    out: dict[str, int] = {}
    for ln in Path("/proc/interrupts").read_text().splitlines()[1:]:
        f = ln.split()
        if len(f) > 3 and f[0].rstrip(":").isalpha() and f[1].isdigit() and f[2].isdigit():
            out["irq." + f[0].rstrip(":")] = int(f[1]) + int(f[2])
    snmp = Path("/proc/net/snmp").read_text().splitlines()
    for h, v in zip(snmp[::2], snmp[1::2]):
        if h.startswith("Tcp:"):
            for k, x in zip(h.split()[1:], v.split()[1:]):
                if k in ("InSegs", "OutSegs"):
                    out["tcp." + k] = int(x)
    return out


Task = tuple[str, int, int, int]  # command, utime + stime ticks, voluntary and involuntary context switches


def _tasks() -> dict[str, Task]:
    """{task stat path: :data:`Task`} of every task."""
    out = {}
    for t in Path("/proc").glob("[0-9]*/task/[0-9]*/stat"):
        try:
            raw = t.read_text()
            status = (t.parent / "status").read_text()
        except OSError:
            continue
        f = raw.rsplit(")", 1)[1].split()
        cs = dict(re.findall(r"^(\w+)_ctxt_switches:\s+(\d+)", status, re.M))
        out[str(t)] = (raw[raw.index("(") + 1:raw.rindex(")")], int(f[11]) + int(f[12]),
                       int(cs.get("voluntary", 0)), int(cs.get("nonvoluntary", 0)))
    return out


def _by_command(a: dict[str, Task], b: dict[str, Task], n: int) -> dict[str, float]:
    """Per command: CPU µs ("task."), voluntary and involuntary context switches ("vcs.", "ics.") per transaction."""
    acc: defaultdict[str, float] = defaultdict(float)
    for k, (comm, v, vol, invol) in b.items():
        key = "pg" if comm.startswith("postgres") else comm[:10]
        _, v0, vol0, invol0 = a.get(k, (comm, 0, 0, 0))
        acc["task." + key] += (v - v0) / HZ * 1e6
        acc["vcs." + key] += vol - vol0
        acc["ics." + key] += invol - invol0
    return {k: round(v / n, 3) for k, v in acc.items() if v / n >= (0.2 if k.startswith("task.") else 0.005)}


def _to_batch(pid: int) -> int:
    """Moves every task of ``pid``'s process tree to SCHED_BATCH; how many."""
    done = 0
    for p in ProcReader().tree(pid):
        for t in Path(f"/proc/{p}/task").glob("[0-9]*"):
            try:
                os.sched_setscheduler(int(t.name), os.SCHED_BATCH, os.sched_param(0))
                done += 1
            except OSError:
                continue
    return done


def _wakeups(data: str) -> dict[str, float]:
    """Share of the wake-ups of backends ("postgres") whose target CPU was not the waker's."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "cpu,trace"], capture_output=True, text=True).stdout
    same = other = 0
    for m in re.finditer(r"\[(\d+)\]\s+comm=(\S+).*?target_cpu=(\d+)", out):
        if m.group(2).startswith("postgres"):
            if m.group(1).lstrip("0") == m.group(3).lstrip("0"):
                same += 1
            else:
                other += 1
    return {"backend_wakeups_other_cpu": round(other / max(same + other, 1), 3)}


SEND_SYMBOLS = {"__send", "send", "__libc_send", "__sendto", "sendto", "__libc_sendto"}


def _stacks(data: str) -> dict[str, float]:
    """Shares of the recorded samples (kernel call chains, innermost first) in a reschedule on the way back
    from a send, and in the wake-up a send made."""
    out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"], capture_output=True, text=True).stdout
    total = preempted = waking = 0
    for block in out.split("\n\n"):
        syms = re.findall(r"^\s*[0-9a-f]+ (\S+)", block, re.M)
        if not syms:
            continue
        total += 1
        # on the way out of the system call only its user-space caller names it (libc's __send here)
        if SEND_SYMBOLS.intersection(syms) or "__sys_sendto" in syms:
            if "schedule" in syms and "exit_to_user_mode_loop" in syms:
                preempted += 1
            elif "sock_def_readable" in syms:
                waking += 1
    return {"stacks.samples": total, "stacks.preempted_after_send": round(preempted / max(total, 1), 3),
            "stacks.waking_in_send": round(waking / max(total, 1), 3)}


def one(srv: servers.ThrowawayServer, side: str, env: dict[str, str], clients: int, script: str,
        wakeups: bool, stacks: bool = False) -> dict[str, Any]:
    """One run of ``side`` ("pgbench", "batch": ours moved to SCHED_BATCH before the span, else ours)."""
    if side == "pgbench":
        cmd = mc.tool_cmd("pg", srv, script, clients, RUN_S)
    else:
        cmd = [sys.executable, "-c", OURS, str(srv.port), str(clients), str(RUN_S)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **env},
                         cwd=str(Path(__file__).resolve().parent.parent))
    try:
        moved = 0
        if side == "batch":
            time.sleep(FROM_S - 1)
            moved = _to_batch(p.pid)
            time.sleep(1)
        else:
            time.sleep(FROM_S)
        rec = None
        if wakeups:
            data = tempfile.mktemp(suffix=".perf")
            rec = subprocess.Popen(["perf", "record", "-q", "-a", "-e", "sched:sched_wakeup", "-o", data, "--",
                                    "sleep", "1"], stderr=subprocess.DEVNULL)
        rec_stacks = None
        if stacks:
            stack_data = tempfile.mktemp(suffix=".perf")
            rec_stacks = subprocess.Popen(["perf", "record", "-q", "-g", "-e", "cpu-clock", "-o", stack_data, "-p",
                                           ",".join(map(str, ProcReader().tree(p.pid))), "--", "sleep", "1"],
                                          stderr=subprocess.DEVNULL)
        ta, sa, ca, n0, t0 = _tasks(), _stat(), _counters(), commits(srv), time.time()
        time.sleep(SPAN_S)
        tb, sb, cb, n1, t1 = _tasks(), _stat(), _counters(), commits(srv), time.time()
    finally:
        p.wait()
    n = n1 - n0
    res: dict[str, Any] = {"side": side, "tps": round(n / (t1 - t0)), **({"batch_tasks": moved} if moved else {})}
    res.update({k: round((sb[k] - sa[k]) / HZ * 1e6 / n, 2) for k in STAT if sb[k] != sa[k]})
    res["ctxt"] = round((sb["ctxt"] - sa["ctxt"]) / n, 3)
    res.update({k: round((cb[k] - ca.get(k, 0)) / n, 3) for k in cb if (cb[k] - ca.get(k, 0)) / n >= 0.005})
    res.update(_by_command(ta, tb, n))
    if rec_stacks is not None:
        rec_stacks.wait()
        res.update(_stacks(stack_data))
        os.unlink(stack_data)
    if rec is not None:
        rec.wait()
        res.update(_wakeups(data))
        os.unlink(data)
    return res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default="{}", help="JSON {name: {ENV: value}}: ours again with these")
    ap.add_argument("--wakeups", action="store_true")
    ap.add_argument("--batch", action="store_true", help="ours once more, moved to SCHED_BATCH")
    ap.add_argument("--stacks", action="store_true", help="perf record -g of each side's processes")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    sides: dict[str, dict[str, str]] = {"ours": {}, "pgbench": {}, **({"batch": {}} if a.batch else {}),
                                        **json.loads(a.variants)}
    srv = servers.start_postgres({"max_connections": str(mc.MAX_CONNECTIONS)}, instrument=False)
    runs: list[dict[str, Any]] = []
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
            f.write(mc.SCRIPT)
        mc.ours(srv, 8, 1.0)  # loads the table, warms the cache
        names = list(sides)
        for r in range(a.rounds):
            for side in (names if r % 2 == 0 else names[::-1]):
                got = {"round": r + 1, **one(srv, side, sides[side], a.clients, f.name, a.wakeups, a.stacks)}
                runs.append(got)
                print(json.dumps(got), flush=True)
                time.sleep(1)
    finally:
        srv.stop()
    medians = {}
    for side in sides:
        mine = [x for x in runs if x["side"] == side]
        keys = sorted({k for x in mine for k in x if k not in ("side", "round")})
        medians[side] = {k: statistics.median(x.get(k, 0) for x in mine) for k in keys}
        print("median", side, json.dumps(medians[side]), flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"clients": a.clients, "runs": runs, "medians": medians}, indent=1))


if __name__ == "__main__":
    main()
