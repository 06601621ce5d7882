"""Copy a real run bundle into tests/data/bundles/, trimmed to what the findings rules read.

Usage: python tests/data/bundles/trim_bundle.py SRC_BUNDLE NAME [--no-profiles]

Kept: run.json, results.json, events.jsonl, the folded profiles the results
name; series records from 3 s before the first step to 3 s after the last,
with the fields the rules and the durability view read (pg_stat_io columns,
per-CPU and per-disk counters and the raw INNODB STATUS text are dropped).
findings.json is written empty: tests derive findings anew. ``--no-profiles``
drops the folded profiles and their reference in results.json (for bundles
whose tests do not read profiles).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

MARGIN_S = 3.0
KEEP_PREFIX = {
    "pg_stats": ("t", "db.", "checkpointer.", "wal.", "locks.waiting", "bgwriter."),
    "my_status": ("t", "status.Innodb_", "status.Com_stmt_execute", "status.Com_commit", "status.Questions",
                  "status.Uptime", "metrics.", "innodb.semaphores.", "innodb.log.", "log_fsync_"),
    "host": ("t", "cpu.all.", "ctx_switches", "interrupts", "ncpu", "load1", "mem.", "procs."),
}


def trim_record(name: str, rec: dict) -> dict:
    kind = name.split("--", 1)[0]
    keep = KEEP_PREFIX.get(kind)
    if keep is None:
        return rec
    return {k: v for k, v in rec.items() if k.startswith(keep)}


def main(src: Path, dest: Path, profiles: bool = True) -> None:
    results = json.loads((src / "results.json").read_text())["results"]
    t0 = min(r["t_start"] for r in results) - MARGIN_S
    t1 = max(r["t_end"] for r in results) + MARGIN_S
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "series").mkdir(parents=True)
    (dest / "artifacts").mkdir()
    for f in ("run.json", "events.jsonl"):
        shutil.copy(src / f, dest / f)
    if not profiles:
        for r in results:
            r.pop("profile", None)
    (dest / "results.json").write_text(json.dumps({"results": results}, indent=1, sort_keys=True) + "\n")
    (dest / "findings.json").write_text('{"findings": []}\n')
    for r in results:
        rel = (r.get("profile") or {}).get("folded")
        if rel:
            shutil.copy(src / rel, dest / rel)
    for p in sorted((src / "series").glob("*.jsonl")):
        out = []
        for line in p.read_text().splitlines():
            rec = json.loads(line)
            if not isinstance(rec.get("t"), (int, float)) or t0 <= rec["t"] <= t1 or "kind" in rec:
                out.append(json.dumps(trim_record(p.stem, rec), sort_keys=True))
        (dest / "series" / p.name).write_text("".join(x + "\n" for x in out))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(__file__).parent / sys.argv[2], profiles="--no-profiles" not in sys.argv[3:])
