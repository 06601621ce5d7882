"""Render ``report.html`` from a run bundle alone (never from live state).

``render_bundle(path)`` derives findings (pure functions of the bundle), writes
findings.json, and renders one self-contained HTML file with jinja2 (autoescape
on: query texts, settings and server messages are untrusted). Rendering the same
bundle twice gives the same bytes.
"""

from __future__ import annotations

import datetime as _dt
import functools
from pathlib import Path
from typing import Any

import jinja2

from diag.core.bundle import Bundle, BundleWriter, gc_paused, load_bundle, safe_name
from reports.views.accounting_view import accounting_view, step_limit_finding
from reports.views.blocking_view import blocking_sections
from reports.views.causes_view import causes_checked
from reports.views.charts import fmt, line_chart
from reports.model.compare import compare
from reports.views.diff_view import with_diff_flames
from reports.model.durability_view import durability_rows
from reports.model.evidence import evidence_rows
from reports.views.evidence_words import because_and_advice, evidence_items, key_figures
from reports.rules.findings import derive_findings
from reports.views.navigation import step_id, step_links
from reports.model.significance import interval_text
from reports.model.resources import step_resources
from reports.model.observer import observer_rows
from reports.views.sections import profiles, settings_diff, step_profile, wait_profiles
from reports.views.statements_view import compare_statements, statement_sections
from reports.model.watch_view import watch_section
from reports.model.series import counter_series, group_series, host_cpu_pct
from reports.model.summary import scaling_knees, target_verdicts
from reports.model.unnamed import unnamed_note
from reports.views.verdict import pair_lines, target_lines

TEMPLATES = Path(__file__).parent / "templates"
# Findings shown open (besides every critical one): the few a reader acts on; the rest are folded, one click away.
FINDINGS_OPEN = 5


class _BestEffortCache(jinja2.FileSystemBytecodeCache):
    """jinja2's per-user cache of compiled templates (a private folder under the temporary directory, checked
    against each template's source), kept only where it can be: a cache that cannot be written (a full or
    read-only disk) leaves the render as it was, compiling."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    try:
        return _BestEffortCache()
    except (OSError, RuntimeError):  # no private cache folder can be made: compile each time
        return None


@functools.lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    """One environment per process: it keeps the compiled templates. A ``dbdiag report`` is a process of its
    own, so the compiled code is also kept on disk between processes (compiling the templates took ~0.3 s of
    a one-hour bundle's 2.4 s render)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             autoescape=jinja2.select_autoescape(default=True, default_for_string=True),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             bytecode_cache=_bytecode_cache())
    env.filters["num"] = _num
    env.filters["ts"] = _ts
    env.filters["human"] = fmt
    env.filters["figures"] = key_figures
    env.filters["evidence_words"] = evidence_items
    env.filters["because"] = because_and_advice
    env.globals["step_id"] = step_id
    return env


def _num(v: Any, digits: int = 1) -> str:
    """Numbers with thousands separators and fixed rounding; '-' for missing."""
    if v is None or v == "":
        return "-"
    if isinstance(v, (int, float)):
        if isinstance(v, float) and abs(v) < 10 and digits < 2:
            return f"{v:,.2f}"
        return f"{v:,.{digits}f}" if isinstance(v, float) else f"{v:,}"
    return str(v)


def _ts(v: Any) -> str:
    if not isinstance(v, (int, float)):
        return "-"
    return _dt.datetime.fromtimestamp(v, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _intervals(records: list[dict[str, Any]]) -> dict[float, float]:
    """Length (s) of the sampling interval that ends at each record's ``t`` (the first: 1.0), built once:
    looking each point up by a scan of the series was quadratic (1.3 s of a 51-minute bundle's report)."""
    out: dict[float, float] = {}
    prev = None
    for r in records:
        out.setdefault(r["t"], max(1e-3, r["t"] - prev) if prev is not None else 1.0)
        prev = r["t"]
    return out


def _label_of(b: Bundle) -> dict[str, str]:
    """Target label by the safe name its series files carry."""
    return {safe_name(str(t.get("label"))): str(t.get("label")) for t in b.run.get("targets", [])}


def _time_charts(b: Bundle, t_origin: float, bands: list[tuple[float, float, str]]) -> dict[str, Any]:
    """Host CPU, throughput and p95 latency over time (x: seconds since ``t_origin``)."""
    charts: dict[str, Any] = {}
    host = b.series.get("host", [])
    label_of = _label_of(b)
    # A target's own host read through node_exporter (--host-metrics): series host--<label>, same keys.
    own_hosts = [(label_of.get(n.split("--", 1)[1], n.split("--", 1)[1]), recs)
                 for n, recs in sorted(b.series_for("host--").items())]
    cpu_lines = ([("host CPU busy %", [(t - t_origin, v) for t, v in host_cpu_pct(host)])] if host else []) + [
        (f"{lab} host CPU busy % (node_exporter)", [(t - t_origin, v) for t, v in host_cpu_pct(recs)])
        for lab, recs in own_hosts]
    if cpu_lines:
        charts["host_cpu"] = line_chart(cpu_lines, x_label="seconds since start", y_label="CPU busy (%)")
    tps_series, p95_series = [], []
    for name, recs in sorted(b.series_for("workload--").items()):
        label = label_of.get(name.split("--", 1)[1], name.split("--", 1)[1])
        tps_series.append((label, [(r["t"] - t_origin, r["transactions"] / r["interval_s"]) for r in recs
                                   if r.get("interval_s")]))
        p95_series.append((label, [(r["t"] - t_origin, (r.get("latency_ms") or {}).get("p95")) for r in recs]))
    if tps_series:
        charts["tps_time"] = line_chart(tps_series, x_label="seconds since start", y_label="transactions/s",
                                        bands=bands)
        charts["p95_time"] = line_chart(p95_series, x_label="seconds since start", y_label="p95 latency (ms)",
                                        bands=bands)
    return charts


def _process_charts(b: Bundle, t_origin: float, bands: list[tuple[float, float, str]]) -> dict[str, Any]:
    """CPU of the server, client and collector process groups, and the machine's context switches, over time."""
    charts: dict[str, Any] = {}
    host = b.series.get("host", [])
    dt_of = _intervals(host)
    cpu_series = []
    for t in b.run.get("targets", []):
        lab = str(t.get("label"))
        srv = group_series(b, "server", lab)
        if any(v[0] + v[1] for _, v in srv):
            cpu_series.append((f"{lab} server", [(ts - t_origin, 100.0 * (v[0] + v[1]) / dt_of.get(ts, 1.0))
                                                 for ts, v in srv]))
    for group, name in (("client", "clients (driver)"), ("collector", "dbdiag collectors")):
        grp = group_series(b, group)
        if any(v[0] + v[1] for _, v in grp):
            cpu_series.append((name, [(ts - t_origin, 100.0 * (v[0] + v[1]) / dt_of.get(ts, 1.0)) for ts, v in grp]))
    if cpu_series:
        charts["proc_cpu"] = line_chart(cpu_series, x_label="seconds since start",
                                        y_label="CPU (% of one core)", bands=bands)
    label_of = _label_of(b)
    ctx_lines = ([("context switches/s, whole machine",
                   [(t - t_origin, v) for t, v in counter_series(host, "ctx_switches")])] if host else []) + [
        (f"context switches/s, {label_of.get(n.split('--', 1)[1], n.split('--', 1)[1])} host (node_exporter)",
         [(t - t_origin, v) for t, v in counter_series(recs, "ctx_switches")])
        for n, recs in sorted(b.series_for("host--").items())]
    if ctx_lines:
        charts["ctx"] = line_chart(ctx_lines, x_label="seconds since start", y_label="context switches/s", bands=bands)
    return charts


def _scaling_charts(b: Bundle) -> dict[str, Any]:
    """Throughput and p95 latency against the client count, one line per target and workload."""
    scaling: dict[str, list[tuple[float, float | None]]] = {}
    p95s: dict[str, list[tuple[float, float | None]]] = {}
    bars: dict[str, list[tuple[float, float, float, str]]] = {}  # each step's interval of its median tps
    for r in b.rows:
        key = f"{r.target} {r.workload}"
        clients = r.clients or 0
        scaling.setdefault(key, []).append((clients, r.tps))
        ci = r.interval
        if ci is not None:
            bars.setdefault(key, []).append((clients, ci.low, ci.high, interval_text(r)))
        p95s.setdefault(key, []).append((clients, r.latency_ms.get("p95")))
    if not scaling:
        return {}
    return {
        "scaling": line_chart([(k, sorted(v)) for k, v in sorted(scaling.items())], x_label="clients",
                              y_label="transactions/s", log_x=True, markers=True, intervals=bars),
        "scaling_p95": line_chart([(k, sorted(v)) for k, v in sorted(p95s.items())], x_label="clients",
                                  y_label="p95 latency (ms)", log_x=True, markers=True),
    }


def _flush_charts(b: Bundle, t_origin: float, bands: list[tuple[float, float, str]]) -> dict[str, Any]:
    """File syncs, fsync/fdatasync calls and device flushes per second over time, from flush tracing."""
    label_of = _label_of(b)
    flush_lines = []
    for name, recs in sorted(b.series_for("flush--").items()):
        label = label_of.get(name.split("--", 1)[1], name.split("--", 1)[1])
        for key, what in (("fs.sync_file", "file syncs"), ("syscalls.fdatasync", "fdatasync"),
                          ("syscalls.fsync", "fsync")):
            pts = [(t - t_origin, v) for t, v in counter_series(recs, key)]
            if any(v for _, v in pts):
                flush_lines.append((f"{label} {what}/s", pts))
        devs = sorted({k for r in recs for k in r if k.startswith("device.") and k.endswith(".flushes")})
        for key in devs:
            flush_lines.append((f"{label} device {key.split('.')[1]} flushes/s",
                                [(t - t_origin, v) for t, v in counter_series(recs, key)]))
    if not flush_lines:
        return {}
    return {"flushes": line_chart(flush_lines, x_label="seconds since start", y_label="flushes/s", bands=bands)}


def build_charts(b: Bundle) -> dict[str, Any]:
    """Every chart of the report (SVG markup by name); time axes start at the run's first record."""
    host = b.series.get("host", [])
    rows = b.rows
    t_origin = min([r["t"] for r in host[:1]] + [r.t_start if r.t_start is not None else 1e20 for r in rows]
                   + [b.run.get("started", 1e20)])
    bands = [(w[0] - t_origin, w[1] - t_origin, "perf profile window")
             for w in ((r.profile or {}).get("window") for r in rows) if w]
    return {**_time_charts(b, t_origin, bands), **_process_charts(b, t_origin, bands), **_scaling_charts(b),
            **_flush_charts(b, t_origin, bands)}


def build_view(b: Bundle, findings: list[dict[str, Any]]) -> dict[str, Any]:
    """Everything the template shows, computed from the bundle."""
    run = b.run
    targets = run.get("targets", [])
    collectors = [{"name": k, **v} for k, v in sorted(run.get("collectors", {}).items())]
    durability = list(durability_rows(b))
    verdicts = _with_limits(target_verdicts(b, findings, durability, scaling_knees(b.rows)), findings)
    comparisons = _comparisons(b)
    by_label = {str(t.get("label")): t for t in targets}
    profs = [{**p, "unnamed": unnamed_note(p, by_label.get(str(p.get("target"))))} for p in profiles(b)]
    view = {
        "run": run, "partial": b.partial, "targets": targets, "results": b.rows, "findings": findings,
        "charts": build_charts(b), "collectors": collectors, "events": b.events[-200:], "resources": step_resources(b),
        "waits": wait_profiles(b), "blocking": blocking_sections(b), "profiles": profs,
        "settings_diff": settings_diff(b),
        "durability": durability,
        "verdicts": verdicts, "verdict_targets": target_lines(verdicts, b.rows, findings), "verdict_pairs": pair_lines(comparisons),
        "accounting": accounting_view(b), "observer": observer_rows(b),
        "evidence": evidence_rows(b),
        "comparisons": comparisons,
        "statements": statement_sections(b), "statement_compare": compare_statements(b),
        "watch": watch_section(b, findings),
        "causes": causes_checked(b),
        "title": f"dbdiag report: {', '.join(run.get('workloads', []))} on "
                 f"{', '.join(t.get('label', '?') for t in targets)}",
    }
    view["step_links"] = step_links(view)
    numbered = list(enumerate(findings, 1))
    view["findings_open"] = [(i, f) for i, f in numbered if i <= FINDINGS_OPEN or f.get("severity") == "critical"]
    view["findings_more"] = [(i, f) for i, f in numbered if not (i <= FINDINGS_OPEN or f.get("severity") == "critical")]
    return view


def _with_limits(verdicts: list[dict[str, Any]], findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """"What limits it" of each target's best step is that step's ``limit`` finding (every step has one)."""
    for v in verdicts:
        best = v.get("best")
        if best:
            f = step_limit_finding(findings, v["label"], best.workload, best.clients or 1)
            if f is not None:
                v["limit"] = f
    return verdicts


def _comparisons(b: Bundle) -> list[dict[str, Any]]:
    """Pairs of targets that ran the same step, with per-transaction differences and top symbols."""
    items = compare(b)
    by_step = {r.key: r for r in b.rows}
    for e in items:
        for side in ("fast", "slow"):
            row = by_step.get((e[side], e["workload"], e["clients"]))
            prof = step_profile(b, row, with_flame=False) if row else None
            syms = []
            for k in (prof or {}).get("kinds", [])[:1]:  # the busiest process kind: the backends/connections
                syms = [(s.symbol, s.percent) for s in k["rows"][:8]]
            e[f"{side}_symbols"] = syms
    return with_diff_flames([b], items)


def render_bundle(path: Path) -> Path:
    """Derive findings, write findings.json and report.html; returns the report path.

    The cyclic garbage collector waits until the page is written and the bundle is freed: the loaded series are
    most of the objects alive, and each of its passes over them cost about 0.1 s (an hour's bundle) without freeing
    any, the first one as it is enabled again too."""
    with gc_paused():
        return _render(Path(path))


def _render(path: Path) -> Path:
    """:func:`render_bundle`'s work, whose locals (the bundle) are freed by their reference counts on return."""
    b = load_bundle(path)
    findings = derive_findings(b)
    w = BundleWriter(path)
    w.write_json("findings.json", {"findings": findings})
    html = _env().get_template("report.html.j2").render(**build_view(b, findings))
    return w.write_text("report.html", html)
