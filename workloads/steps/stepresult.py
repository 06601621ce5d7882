"""What a step writes: one series record and console line per interval, the result row, its summary.

Pure formatting of :mod:`workloads.steps.merge`'s figures; the step (:mod:`workloads.steps.step`)
does the writing. ``ncpu`` is the machine's CPU count: client CPU is shown as a
share of all of them (100% = every core busy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diag.core.schema import ResultRow
from workloads import hist
from workloads.steps.merge import Merged, Totals
from workloads.steps.options import DriverOptions

SATURATED_PCT = 90.0    # a client process busier than this (% of one core) limits the load


@dataclass(frozen=True)
class StepKey:
    """Which step: target label, engine product, workload name, client count."""

    target: str
    product: str
    workload: str
    clients: int
    repeat: int = 0  # which repeat (1..N) under --repeat N > 1; 0 for a step run once


@dataclass(frozen=True)
class WallClock:
    """``perf_counter_ns`` -> unix seconds: ``offset_ns`` is ``time_ns() - perf_counter_ns()`` read once."""

    offset_ns: int

    def unix(self, t_ns: int) -> float:
        return round((t_ns + self.offset_ns) / 1e9, 6)


@dataclass(frozen=True)
class Startup:
    """The clients' start-up, before the measured window (the plan is sent once every client is ready):
    ``seconds`` from the first fork to the last client ready, ``ready`` clients of ``clients``, and each
    ready client's own connect-and-prepare time (s), summed up as p50 and max (ms)."""

    clients: int
    ready: int
    seconds: float
    connect_p50_ms: float
    connect_max_ms: float

    @classmethod
    def of(cls, clients: int, connect_s: list[float], t0_ns: int, t1_ns: int) -> Startup:
        xs = sorted(connect_s)
        p50 = xs[(len(xs) - 1) // 2] if xs else 0.0
        return cls(clients, len(xs), max((t1_ns - t0_ns) / 1e9, 1e-9), round(1000 * p50, 2),
                   round(1000 * (xs[-1] if xs else 0.0), 2))

    @property
    def per_s(self) -> float:
        """Clients started and connected per second (forks and connections, as the driver got them)."""
        return self.ready / self.seconds

    def to_row(self) -> dict[str, Any]:
        return {"startup_s": round(self.seconds, 3), "connects_per_s": round(self.per_s, 1),
                "connect_ms": {"p50": self.connect_p50_ms, "max": self.connect_max_ms}}

    def line(self) -> str:
        return (f"{self.ready} client{'s' if self.ready != 1 else ''} started and connected in {self.seconds:.2f} s "
                f"({self.per_s:.0f}/s; each connect p50 {self.connect_p50_ms:g} ms, max {self.connect_max_ms:g} ms), "
                "before the measured window")


def cpu_pct(cpu_s: float, seconds: float, ncpu: int) -> float:
    """CPU seconds over ``seconds`` as a percentage of ``ncpu`` cores, one decimal."""
    return round(cpu_s / (seconds * ncpu) * 100, 1)


def series_record(key: StepKey, m: Merged, clock: WallClock, ncpu: int) -> dict[str, Any]:
    """The ``series/workload--<target>.jsonl`` record of one merged interval (``t``: its end, unix s)."""
    return {
        "t": clock.unix(m.end_ns), "workload": key.workload, "clients": key.clients,
        "interval_s": round(m.seconds, 3), "transactions": m.transactions, "queries": m.queries,
        "errors": m.errors, "retries": m.retries, "reconnects": m.reconnects, "latency_ms": m.latency_ms,
        "client_cpu_pct": cpu_pct(m.cpu_s, m.seconds, ncpu), **({"repeat": key.repeat} if key.repeat else {}),
        **({"connect_ms_per_txn": round(m.connect_ns / 1e6 / m.transactions, 3)} if m.connect_ns and m.transactions
           else {}),
    }


def interval_line(key: StepKey, m: Merged, measure_ns: int, ncpu: int) -> str:
    """The sysbench-like console line of one interval; time since the measured part began."""
    secs = m.seconds
    t_rel = (m.end_ns - measure_ns) / 1e9
    rep = f" r{key.repeat}" if key.repeat else ""
    return (f"  [{t_rel:5.1f}s] {key.workload} c={key.clients}{rep}: tps {m.transactions / secs:9.1f}  "
            f"qps {m.queries / secs:9.1f}  p95 {m.latency_ms['p95']:8.3f} ms  "
            f"err/s {m.errors / secs:6.1f}  retries {m.retries}  reconnects {m.reconnects}  "
            f"client cpu {cpu_pct(m.cpu_s, secs, ncpu):5.1f}%")


def result_row(key: StepKey, t: Totals, opts: DriverOptions, driver: str, t_start: float, t_end: float,
               duration_s: float, ncpu: int) -> dict[str, Any]:
    """The step's result row (run.json ``results``), before the workload's own fields.

    ``t_start`` / ``t_end``: the measured part in unix seconds; ``duration_s`` its length (> 0), written as
    ``measured_s``, the row's one form of it (a cut step has less than ``-T``, which is the plan's). The
    caller sets ``complete`` False for a cut step. The step's window adds its repeat (under ``--repeat``) and
    ``interval_tps``, transactions/s of each full report interval of the measured part (the samples of
    significance tests and intervals): :meth:`workloads.steps.window.StepWindow.finish`."""
    return {
        "target": key.target, "engine": key.product, "workload": key.workload, "clients": key.clients,
        "transactions": t.transactions,
        "tps": round(t.transactions / duration_s, 2), "qps": round(t.queries / duration_s, 2),
        "latency_ms": hist.summary_ms(t.latency), "errors": dict(t.errors), "retries": t.retries,
        "reconnects": t.reconnects, "complete": True, "measured_s": round(duration_s, 3),
        "driver": driver, "protocol": opts.protocol, "isolation": opts.isolation,
        "client_cpu_pct": cpu_pct(t.cpu_s, duration_s, ncpu), "t_start": t_start, "t_end": t_end,
        "client_cpu_s": round(t.cpu_s, 3), "error_samples": t.samples, "scale": opts.scale,
        **({"statement_latency_ms": {stmt: {**hist.summary_ms(h), "count": h.get_total_count()}
                                     for stmt, h in sorted(t.statements.items())}} if t.statements else {}),
        **(connect_fields(t, duration_s) if opts.connect_per_txn else {}),
    }


def connect_fields(t: Totals, duration_s: float) -> dict[str, Any]:
    """``--connect-per-transaction``: the mean connect time per transaction (ms, inside its latency), its
    share of the mean transaction's latency (from the step's histogram) and connections opened per second."""
    per_txn_ms = t.connect_ns / 1e6 / t.transactions if t.transactions else 0.0
    mean_ms = t.latency.get_mean_value() / 1000.0 if t.transactions else 0.0
    return {"connect_per_transaction": True, "connect_ms_per_txn": round(per_txn_ms, 3),
            **({"connect_share_of_latency": round(per_txn_ms / mean_ms, 4)} if mean_ms > 0 else {}),
            "connects_per_s_measured": round(t.transactions / duration_s, 1)}


def summary_line(key: StepKey, row: ResultRow, ncpu: int) -> str:
    """The step's last console line, from its result row."""
    lat = row.latency_ms
    return (f"  => {key.workload} c={key.clients}: {row.tps or 0:.1f} tps, {row.qps or 0:.1f} qps, "
            f"p95 {lat['p95']:.3f} ms, p99 {lat['p99']:.3f} ms, errors {sum(row.errors.values())}, "
            f"retries {row.retries}, reconnects {row.reconnects or 0}, "
            f"client cpu {row.client_cpu_pct}% of {ncpu} cpus"
            + (f", connect {row.connect_ms_per_txn:.3f} ms/txn" if row.connect_ms_per_txn is not None else "")
            + ("" if row.complete is not False else f" (cut short: {row.measured_s:g} s measured)"))


def busiest_client_pct(t: Totals, duration_s: float) -> float:
    """The busiest client process's CPU over the measured part, % of one core (0 with no client done)."""
    return max(t.cpu_by_client.values(), default=0.0) / duration_s * 100


def saturation_message(key: StepKey, busiest_pct: float) -> str | None:
    """A warning when a client process was busy enough to be the limit itself, else None."""
    if busiest_pct < SATURATED_PCT:
        return None
    return (f"{key.target}: {key.workload} c={key.clients}: a client process was busy {busiest_pct:.0f}% of a "
            "core: the load generator, not the server, may be the limit")
