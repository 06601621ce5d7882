"""Per target: which evidence came from where, and what is missing and why (the report's Environment section).

From the bundle alone: run.json's targets (``local``, ``host_metrics``, ``ssh``,
``storage``), its collectors' probes (ok, reason) and which series and result
fields exist. Each row is ``{"evidence", "source", "missing"}``: ``source`` says
where the figures came from (this machine's /proc, node_exporter at a URL, perf
over ssh ...), ``missing`` why there are none ("" when there are).
"""

from __future__ import annotations

from typing import Any

from diag.core.bundle import Bundle, safe_name
from reports.model.durability_view import flush_capability
from reports.model.series import source_stopped

_REMOTE = "the server is on another host"


def _probe(b: Bundle, key: str) -> dict[str, Any]:
    return dict((b.run.get("collectors") or {}).get(key) or {})


def _why(probe: dict[str, Any], default: str) -> str:
    return str(probe.get("reason") or default) if probe and not probe.get("ok") else default


def _cut(b: Bundle, label: str) -> str:
    """Why a target's node_exporter series ends before the run did ("" when it did not)."""
    st = source_stopped(b, safe_name(f"host--{label}"))
    return "" if st is None else (f"none after {st.text(b.run.get('started'))}: node_exporter stopped answering; "
                                  "steps after that have no host figures")


def _host_rows(b: Bundle, t: dict[str, Any]) -> list[dict[str, str]]:
    label, local = str(t.get("label")), bool(t.get("local"))
    own = b.series.get(safe_name(f"host--{label}"))
    rows = []
    if own:
        src = str(own[-1].get("source") or f"node_exporter {t.get('host_metrics')}")
        rows.append({"evidence": "host CPU, context switches, disk I/O", "source": src, "missing": _cut(b, label)})
    elif t.get("host_metrics"):
        rows.append({"evidence": "host CPU, context switches, disk I/O", "source": "",
                     "missing": _why(_probe(b, f"host--{label}"), "node_exporter gave no records")})
    elif local and b.series.get("host"):
        rows.append({"evidence": "host CPU, context switches, disk I/O", "source": "this machine (/proc, psutil)",
                     "missing": ""})
    else:
        rows.append({"evidence": "host CPU, context switches, disk I/O", "source": "",
                     "missing": _why(_probe(b, "host"), f"{_REMOTE}: give --host-metrics {label}=http://HOST:9100/metrics")})
    has_procs = any((r.get("procs.server") or {}).get(label) for r in b.series.get("host", [])[:50])
    rows.append({"evidence": "server process CPU", "source": "this machine (/proc)" if has_procs else "",
                 "missing": "" if has_procs else (f"{_REMOTE}: node_exporter has no per-process rows" if not local
                                                  else "the server's process was not found")})
    return rows


def _flush_rows(b: Bundle, t: dict[str, Any]) -> list[dict[str, str]]:
    label = str(t.get("label"))
    storage = t.get("storage") or {}
    flush = _probe(b, f"flush--{label}")
    rows = []
    if t.get("host_metrics"):
        devs = ", ".join(str(d) for d in storage.get("stat_devices") or [])
        rows.append({"evidence": "device flushes (D)",
                     "source": f"node_exporter {t['host_metrics']}: {devs}" if devs else "",
                     "missing": _cut(b, label) if devs else
                     str(storage.get("reason") or storage.get("error") or "device unknown")})
    elif flush.get("ok") and any(s.startswith("diskstats:") for s in
                                 (b.series.get(safe_name(f"flush--{label}")) or [{}])[-1].get("sources", [])):
        rows.append({"evidence": "device flushes (D)", "source": "this machine (/proc/diskstats)", "missing": ""})
    elif t.get("ssh"):  # perf over ssh counts the server's calls, not the device's completions, reachable or not
        rows.append({"evidence": "device flushes (D)", "source": "", "missing": "not read over ssh: give "
                     f"--host-metrics {label}=http://HOST:9100/metrics (node_exporter on the database host)"})
    else:
        rows.append({"evidence": "device flushes (D)", "source": "", "missing": _why(flush, "not counted")})
    counted_by = f"perf over ssh {t['ssh']}" if t.get("ssh") else "perf on this machine"
    if flush.get("ok") and not t.get("ssh") and "perf:" not in str(flush.get("reason")):  # the devices only
        note = [str(m) for m in flush.get("missing") or [] if str(m).startswith("flush calls: ")]
        flush = {"ok": False, "reason": note[0].split(": ", 1)[1] if note else "not counted"}
    tail = _probe(b, "flush_tail")
    if tail and t.get("local") and not t.get("ssh"):  # dbdiag run: counted in each step's tail (collectors.flush_tail)
        off = [m.split(": ", 1)[1] for m in tail.get("missing") or [] if str(m).startswith(f"{label}: perf cannot")]
        flush = {"ok": False, "reason": off[0]} if off else tail
        counted_by = "perf on this machine, in each step's tail after its measured part"
    rows.append({"evidence": "server flush calls (S)", "source": counted_by if flush.get("ok") else "",
                 "missing": "" if flush.get("ok") else _why(flush, "not counted") +
                 " (the engine's own flush counter stands in where it has one)"})
    fc = flush_capability(b.run, label)
    rows.append({"evidence": "flush capability (F)", "source": fc.source if fc.ops_per_s else "",
                 "missing": "" if fc.ops_per_s else fc.source})
    return rows


def _profile_row(b: Bundle, t: dict[str, Any]) -> dict[str, str]:
    label = str(t.get("label"))
    profs = [r.profile or {} for r in b.rows if r.target == label]
    done = [p for p in profs if p.get("folded")]
    if done:
        return {"evidence": "server CPU profiles", "source": str(done[0].get("source") or "perf on this machine"),
                "missing": ""}
    errors = [str(p["error"]) for p in profs if p.get("error")]
    probe = _probe(b, f"ssh_profile--{label}") if t.get("ssh") else _probe(b, "profile")
    why = errors[0] if errors else _why(probe, "not recorded (--no-profile)" if not probe else
                                        f"{_REMOTE}: give --ssh {label}=USER@HOST" if not t.get("local") else
                                        "no step was profiled")
    return {"evidence": "server CPU profiles", "source": "", "missing": why}


def evidence_rows(b: Bundle) -> dict[str, list[dict[str, str]]]:
    """Per target label, where each kind of host-level evidence came from (see the module docstring)."""
    out: dict[str, list[dict[str, str]]] = {}
    for t in b.run.get("targets") or []:
        if isinstance(t, dict) and t.get("label"):
            out[str(t["label"])] = [*_host_rows(b, t), *_flush_rows(b, t), _profile_row(b, t)]
    return out
