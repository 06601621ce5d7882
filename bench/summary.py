"""Markdown tables from a ``bench/compare.py`` result file (medians over rounds).

    python3 -m bench.summary bench/results/2026-11-30-final.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any


def _med(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _range(rows: list[dict], key: str) -> str:
    vals = [r[key] for r in rows]
    return f"{min(vals):.2f}-{max(vals):.2f}"


def tps_table(sec: dict, tool: str, ours: list[tuple[str, str]], name: str = "", suffix: str = "") -> list[str]:
    """``tool`` prefixes the reference tool's keys; ratio keys are ``ratio_<ours key>{suffix}``."""
    name = name or tool
    out = [f"| clients | {name} TPS | {name} client µs/txn | {name} server µs/txn | ours | ours TPS | "
           "ours client µs/txn | ours server µs/txn | TPS ratio, median (range) | CPU-cost ratio, median |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for n in sorted({r["clients"] for r in sec["rounds"]}, reverse=True):
        rs = [r for r in sec["rounds"] if r["clients"] == n and f"{tool}_tps" in r]
        if not rs:
            continue
        for label, key in ours:
            out.append(f"| {n} | {_med(rs, f'{tool}_tps'):,.0f} | {_med(rs, f'{tool}_us_per_txn'):.1f} | "
                       f"{_med(rs, f'{tool}_server_us_per_txn'):.1f} | {label} | {_med(rs, f'{key}_tps'):,.0f} | "
                       f"{_med(rs, f'{key}_us_per_txn'):.1f} | {_med(rs, f'{key}_server_us_per_txn'):.1f} | "
                       f"**{_med(rs, 'ratio_' + key[5:] + suffix):.3f}** ({_range(rs, 'ratio_' + key[5:] + suffix)}) | "
                       f"{_med(rs, 'cpu_ratio_' + key[5:] + suffix):.3f} |")
    return out


def load_table(rounds: list[dict]) -> list[str]:
    keys = [k for k in rounds[0] if k != "round"]
    out = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for r in rounds:
        out.append("| " + " | ".join(f"{r[k]:.2f} s" for k in keys) + " |")
    return out


def driver_table(rows: list[dict]) -> list[str]:
    out = ["| driver API | TPS (median) | client µs/txn (median) |", "|---|---|---|"]
    for d in rows:
        if "tps_median" in d:
            out.append(f"| {d['variant']} | {d['tps_median']:,.0f} | {d['us_per_txn_median']:.1f} |")
        else:
            out.append(f"| {d['variant']} | {d.get('error', 'not measured')} | |")
    return out


def main(path: str) -> None:
    r: dict[str, Any] = json.loads(Path(path).read_text())
    lines = [f"Run started {r['started']}, {r['cpus']} CPUs, {r['rounds']} rounds of {r['duration_s']:g} s.", ""]
    if "pg_tps" in r:
        lines += ["PostgreSQL: `" + r["pg_tps"]["command"] + "`", ""]
        lines += tps_table(r["pg_tps"], "pgbench", [("point-select", "ours_point_select"),
                                                    ("pgbench -S script", "ours_pgbench_script"),
                                                    ("point-select, Python loop", "ours_python_loop")]) + [""]
        if "command_same_query" in r["pg_tps"]:
            lines += ["The same statement on the same table from both clients: `" + r["pg_tps"]["command_same_query"]
                      + "`, with point-select.sql = `" + r["pg_tps"]["point_select_script"].replace("\n", " ").strip()
                      + "`", ""]
            lines += tps_table(r["pg_tps"], "pgbench_f", [("point-select", "ours_point_select")],
                               name="pgbench -f", suffix="_same_query") + [""]
    if "my_tps" in r:
        lines += ["MariaDB: `" + r["my_tps"]["command"] + "`", ""]
        lines += tps_table(r["my_tps"], "sysbench", [("point-select", "ours_point_select"),
                                                     ("point-select, Python loop", "ours_python_loop")]) + [""]
    for key, what in (("pg_load", "PostgreSQL load"), ("my_load", "MariaDB load")):
        if r.get(key, {}).get("rounds"):
            lines += [f"{what}: `{r[key]['command']}`", ""]
            if r[key].get("sysbench_command"):
                lines += [f"and `{r[key]['sysbench_command']}`", ""]
            lines += load_table(r[key]["rounds"]) + [""]
    for key, what in (("pg_drivers", "PostgreSQL drivers"), ("my_drivers", "MariaDB drivers")):
        if key in r:
            lines += [f"{what} (bare point-select loop, {r[key][0].get('clients', '')} processes):", ""]
            lines += driver_table(r[key]) + [""]
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
