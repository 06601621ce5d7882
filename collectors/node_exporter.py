"""Host evidence of a database host elsewhere, read from its Prometheus node_exporter (``--host-metrics``).

node_exporter (Debian: prometheus-node-exporter) serves the host's /proc and
/sys counters over HTTP. This source scrapes ``LABEL=http://HOST:9100/metrics``
once per second and writes the records the local host collector
(:mod:`collectors.host`) writes, with the same keys and units, to the series
``host--<label>``, so every report section that reads the host (CPU busy, context
switches, the CPU limit, device flushes for the durability checks) reads it
for that target exactly as it reads /proc for this machine. Each record says
where it came from (``source``). What node_exporter cannot give: per-process
rows (``procs.*``), so a remote server's own CPU share stays unmeasured.

Metric -> record key (node_exporter 1.x names; collectors cpu, stat, meminfo,
diskstats, loadavg, filesystem, all on by default):

=================================================  ==============================================
``node_cpu_seconds_total{cpu,mode}`` (s)           ``cpu.<i>.<mode>``, ``cpu.all.<mode>``, ``ncpu``
``node_context_switches_total``                    ``ctx_switches``
``node_intr_total``                                ``interrupts``
``node_memory_{MemTotal,MemFree,Buffers,Cached,    ``mem.used`` (as psutil: total - free - buffers
SReclaimable,MemAvailable}_bytes``                 - cached - SReclaimable), ``mem.available``
``node_disk_{reads,writes}_completed_total``       ``disk.<dev>.reads`` / ``.writes``
``node_disk_{read,written}_bytes_total``           ``disk.<dev>.read_bytes`` / ``.write_bytes``
``node_disk_io_time_seconds_total`` (s)            ``disk.<dev>.busy_ms`` (ms)
``node_disk_flush_requests_total`` (Linux 5.5+)    ``disk.<dev>.flushes``
``node_disk_flush_requests_time_seconds_total``    ``disk.<dev>.flush_ms`` (ms)
``node_load1``                                     ``load1``
=================================================  ==============================================

The data directory's device comes from ``node_filesystem_size_bytes`` (the
mount point that is the longest prefix of the path the server reports):
:func:`storage_from_metrics` gives the same facts :func:`collectors.hostinfo.storage_facts`
gives for a local path, so D (device flushes/s) is read from that disk's counter.
"""

from __future__ import annotations

import base64
import re
import time
import urllib.error
import urllib.request
from typing import Any

from collectors.base import Collector, Metric, Probe
from collectors.host import CPU_FIELDS, HostCollector
from collectors.promtext import Sample, parse_metrics
from diag.core.errors import DiagError, ParseError, SourceStopped
from diag.core.redact import redact_url, url_credentials

SCRAPE_TIMEOUT_S = 2.0
MAX_FAILED_SCRAPES = 5  # in a row: a slow moment skips a record; a node_exporter gone switches the source off
HINT = ("start node_exporter on the database host (Debian: apt-get install prometheus-node-exporter; it listens "
        "on :9100) and let this machine reach it")
_SKIP_DEVICES = ("loop", "ram")  # as the local host collector
_DISK_FIELDS = (("node_disk_reads_completed_total", "reads", 1.0), ("node_disk_writes_completed_total", "writes", 1.0),
                ("node_disk_read_bytes_total", "read_bytes", 1.0), ("node_disk_written_bytes_total", "write_bytes", 1.0),
                ("node_disk_io_time_seconds_total", "busy_ms", 1000.0),
                ("node_disk_flush_requests_total", "flushes", 1.0),
                ("node_disk_flush_requests_time_seconds_total", "flush_ms", 1000.0))
FLUSH_METRIC = "node_disk_flush_requests_total"
_PARTITION = (re.compile(r"^((?:nvme\d+n\d+)|(?:mmcblk\d+))p\d+$"), re.compile(r"^([a-z]+)\d+$"))


def scrape(url: str, timeout_s: float = SCRAPE_TIMEOUT_S) -> str:
    """The text of one scrape of ``url``; DiagError with the reason when it cannot be read.

    ``http://user:pw@host:9100/metrics`` logs in with HTTP basic auth (node_exporter's web config); urllib
    would take the userinfo for part of the host name. Messages name the URL without its password."""
    shown = redact_url(url)
    if not url.startswith(("http://", "https://")):
        raise DiagError(f"{shown}: node_exporter's address must be http://HOST:PORT/metrics")
    bare, user, password = url_credentials(url)
    headers = {"Accept": "text/plain;version=0.0.4"}
    if user is not None:
        token = base64.b64encode(f"{user}:{password or ''}".encode()).decode("ascii")
        headers["Authorization"] = f"Basic {token}"
    req = urllib.request.Request(bare, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 (the scheme is checked above)
            return resp.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as e:
        raise DiagError(f"cannot read {shown}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise DiagError(f"cannot read {shown}: {reason}") from None


def scrape_reason(e: DiagError) -> str:
    """Why a scrape failed, in a few words for the report ("connection refused", "timed out", "HTTP 503 ...")."""
    text = str(e)
    for needle, why in (("refused", "connection refused"), ("timed out", "timed out"),
                        ("Name or service not known", "host name not known"), ("unreachable", "host unreachable"),
                        ("reset by peer", "connection reset")):
        if needle in text:
            return why
    return text.split(": ", 1)[1] if text.startswith("cannot read ") and ": " in text else text


def _one(samples: dict[str, list[Sample]], name: str) -> float | None:
    vals = samples.get(name) or []
    return vals[0].value if vals else None


def _cpu(samples: dict[str, list[Sample]], rec: dict[str, Any]) -> None:
    per: dict[int, dict[str, float]] = {}
    for s in samples.get("node_cpu_seconds_total", []):
        try:
            per.setdefault(int(s.label("cpu")), {})[s.label("mode")] = s.value
        except ValueError:
            continue  # a cpu label that is not a number: not one of node_exporter's
    for i in sorted(per):
        for f in CPU_FIELDS:
            rec[f"cpu.{i}.{f}"] = round(per[i].get(f, 0.0), 3)
    for f in CPU_FIELDS:
        rec[f"cpu.all.{f}"] = round(sum(m.get(f, 0.0) for m in per.values()), 3)
    rec["ncpu"] = len(per)


def _memory(samples: dict[str, list[Sample]], rec: dict[str, Any]) -> None:
    total, free = _one(samples, "node_memory_MemTotal_bytes"), _one(samples, "node_memory_MemFree_bytes")
    if total is not None and free is not None:
        cached = sum(_one(samples, f"node_memory_{k}_bytes") or 0.0 for k in ("Buffers", "Cached", "SReclaimable"))
        used = total - free - cached
        rec["mem.used"] = int(used if used >= 0 else total - free)  # psutil's rule for the same fields
    avail = _one(samples, "node_memory_MemAvailable_bytes")
    if avail is not None:
        rec["mem.available"] = int(avail)


def _disks(samples: dict[str, list[Sample]], rec: dict[str, Any]) -> None:
    for metric, key, scale in _DISK_FIELDS:
        for s in samples.get(metric, []):
            dev = s.label("device")
            if dev and not dev.startswith(_SKIP_DEVICES):
                v = s.value * scale
                rec[f"disk.{dev}.{key}"] = round(v, 3) if scale != 1.0 else int(v)


def host_record(samples: dict[str, list[Sample]], source: str) -> dict[str, Any]:
    """The local host collector's record (keys and units) from one parsed scrape, marked with ``source``."""
    rec: dict[str, Any] = {"source": source}
    _cpu(samples, rec)
    for name, key in (("node_context_switches_total", "ctx_switches"), ("node_intr_total", "interrupts")):
        v = _one(samples, name)
        if v is not None:
            rec[key] = int(v)
    _memory(samples, rec)
    _disks(samples, rec)
    load = _one(samples, "node_load1")
    if load is not None:
        rec["load1"] = load
    return rec


def missing_parts(samples: dict[str, list[Sample]]) -> list[str]:
    """What a scrape lacks that the host sections use, each with the node_exporter collector that gives it."""
    out = []
    for metric, what, collector in (("node_context_switches_total", "context switches", "stat"),
                                    ("node_disk_reads_completed_total", "disk I/O", "diskstats"),
                                    ("node_memory_MemAvailable_bytes", "memory", "meminfo")):
        if metric not in samples:
            out.append(f"{what}: no {metric} (node_exporter's {collector} collector is off)")
    if "node_disk_reads_completed_total" in samples and FLUSH_METRIC not in samples:
        out.append(f"device flushes: no {FLUSH_METRIC} (needs node_exporter 1.1+ on Linux 5.5+)")
    return out


def _disk_of(dev: str, disks: set[str]) -> tuple[str | None, str | None]:
    """(whole disk, partition) of a kernel device name as node_exporter's diskstats lists disks."""
    if dev in disks:
        return dev, None
    for pat in _PARTITION:
        m = pat.match(dev)
        if m and m.group(1) in disks:
            return m.group(1), dev
    return None, None


def storage_from_metrics(samples: dict[str, list[Sample]], path: str | None, source: str) -> dict[str, Any]:
    """The run.json ``storage`` facts of a remote server's data directory ``path`` (empty dict without a path).

    Same keys as for a local path (``name``, ``partition``, ``fs_type``, ``mount_point``,
    ``mount_source``, ``stat_devices``), plus ``source``; ``name`` is None with a
    ``reason`` when no disk of the scrape holds the path. Symlinks on that host
    cannot be followed from here: the path is taken as the server reports it.
    """
    if not path:
        return {}
    base: dict[str, Any] = {"path": path, "source": source}
    best: Sample | None = None
    for s in samples.get("node_filesystem_size_bytes", []):
        mp = s.label("mountpoint")
        if mp and (path == mp or path.startswith(mp.rstrip("/") + "/")):
            if best is None or len(mp) > len(best.label("mountpoint")):
                best = s
    if best is None:
        return {**base, "name": None, "reason": "no filesystem of node_exporter's (node_filesystem_size_bytes) "
                                                 "holds this path"}
    base.update(fs_type=best.label("fstype"), mount_point=best.label("mountpoint"), mount_source=best.label("device"))
    src = best.label("device")
    if not src.startswith("/dev/"):
        return {**base, "name": None, "reason": f"{best.label('fstype')} at {best.label('mountpoint')}: "
                                                 "no block device"}
    dev = src[len("/dev/"):]
    if dev.startswith("mapper/") or dev.startswith("dm-"):
        return {**base, "name": None, "reason": f"{src} is a device-mapper volume: node_exporter does not say "
                                                 "which disks are under it, whose counters count its flushes"}
    disks = {s.label("device") for s in samples.get("node_disk_reads_completed_total", [])}
    disk, part = _disk_of(dev, disks)
    if disk is None:
        return {**base, "name": None, "reason": f"{src} is not among node_exporter's disks ({', '.join(sorted(disks))})"}
    return {**base, "name": disk, "partition": part, "stat_devices": [disk]}


def remote_storage_facts(url: str, path: str | None) -> dict[str, Any]:
    """:func:`storage_from_metrics` of one scrape of ``url``; an ``error`` entry when it cannot be read."""
    if not path:
        return {}
    try:
        return storage_from_metrics(parse_metrics(scrape(url)), path, f"node_exporter {redact_url(url)}")
    except DiagError as e:
        return {"path": path, "source": f"node_exporter {redact_url(url)}", "error": str(e)}


HOST_METRICS: tuple[Metric, ...] = tuple(m for m in HostCollector.metrics if not m.name.startswith("procs."))


class NodeExporterHost(Collector):
    """A target's host counters from node_exporter, as series ``host--<label>`` (see the module docstring)."""

    name = "host"
    title = "host metrics (node_exporter)"
    metrics = HOST_METRICS
    interval_s = 1.0

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.url = str(ctx.options.get("host_metrics") or "")  # with its credentials, for scraping only
        self.shown = redact_url(self.url)
        self.source = f"node_exporter {self.shown}"
        self._failed = 0
        self._last_t: float | None = None  # Unix s of the last record: where the series ends if node_exporter goes

    def probe(self) -> Probe:
        try:
            samples = parse_metrics(scrape(self.url))
        except ParseError as e:
            return Probe(False, f"{self.shown} is not node_exporter's metrics page: {e}", HINT)
        except DiagError as e:
            return Probe(False, str(e), HINT)
        if "node_cpu_seconds_total" not in samples:
            return Probe(False, f"{self.shown} has no node_cpu_seconds_total (node_exporter's cpu collector is off)",
                         HINT)
        return Probe(True, f"source: {self.source}", "", tuple(missing_parts(samples)))

    def sample(self) -> dict[str, Any] | None:
        try:
            rec = self._record()
        except DiagError as e:
            self._failed += 1
            if self._failed >= MAX_FAILED_SCRAPES:
                raise self._stopped(e, f"{MAX_FAILED_SCRAPES} scrapes in a row failed") from None
            return None  # one slow or lost scrape: the rates span the gap
        self._failed = 0
        return rec

    def stop(self) -> list[dict[str, Any]] | None:
        """One last scrape: the target's sweep has just ended, so its last step's window is covered to its end
        (with one-second sampling a step would otherwise lose up to its last second). When it fails, the
        series ends at the last record: raised as :class:`SourceStopped`, so the bundle says when and why."""
        try:
            return [self._record()]
        except DiagError as e:
            raise self._stopped(e, "the last scrape failed" if self._failed == 0 else
                                f"the last {self._failed + 1} scrapes failed") from None

    def _record(self) -> dict[str, Any]:
        rec = host_record(parse_metrics(scrape(self.url)), self.source)
        rec["t"] = self._last_t = time.time()  # stamped here: the time the scrape answered
        return rec

    def _stopped(self, e: DiagError, what: str) -> SourceStopped:
        when = (time.strftime("%H:%M:%S UTC", time.gmtime(self._last_t)) if self._last_t is not None
                else "before its first record")
        return SourceStopped(f"{self.source} stopped answering: {what} (last: {e}); host evidence ends at {when}",
                             self._last_t, scrape_reason(e))
