"""The run bundle's records, defined once: what the writer stores and what the loader reads back.

Each record is a frozen dataclass with ``to_dict()`` (the JSON stored in the
bundle) and ``from_dict(d, where)`` (tolerant of keys it does not know, which it
keeps in ``extra`` so nothing is lost on a round trip; a value of the wrong type
raises :class:`BundleFormatError` naming the file and field).

Format history (run.json ``format``; a bundle without it is format 1):

1. everything before the key existed: no metric declarations in run.json.
2. run.json carries ``format`` and ``metrics`` = ``{SERIES: [MetricDecl...]}``,
   the collectors' declared metrics, keyed by series name
   (``<collector>--<target label>``), so reports know counter from gauge.
3. result rows carry ``interval_tps`` and ``tps_ci`` (the median throughput and its
   interval) and, under ``dbdiag run --repeat N``, ``repeats[]`` (one row per step built
   from its N repeats, :mod:`diag.core.schema.repeats`). Older rows have none: a step run
   once, its per-interval throughput read from the workload series by the reports.
4. a result row states the seconds it measured once, as ``measured_s``; rows before
   it also carried them as ``duration_s`` (the same number, and the only one in rows
   older than ``measured_s``). The planned ``-T`` is run.json's ``options.duration_s``.

The loader (:func:`diag.core.bundle.load_bundle`) migrates older formats in memory;
a bundle of a newer format than :data:`FORMAT` is refused with one line.
"""

from diag.core.schema.base import FORMAT, FORMAT_KEY, BundleFormatError, safe_name
from diag.core.schema.flush import FLUSH_METHOD, FlushCapabilityInfo, FlushDevice, FlushTarget
from diag.core.schema.metrics import METRIC_KINDS, MetricDecl, MetricDeclarations
from diag.core.schema.records import FindingRecord, ResultRow, RunInfo, TargetInfo
from diag.core.schema.rowparts import UndeclaredPartError, with_part
from diag.core.schema.statements import PlanNode, StatementPlan, StatementStat, StepStatements, TableStat

__all__ = ["FLUSH_METHOD", "FORMAT", "FORMAT_KEY", "METRIC_KINDS", "BundleFormatError", "FindingRecord",
           "FlushCapabilityInfo", "FlushDevice", "FlushTarget", "MetricDecl", "MetricDeclarations", "PlanNode",
           "ResultRow", "RunInfo", "StatementPlan", "StatementStat", "StepStatements", "TableStat", "TargetInfo",
           "UndeclaredPartError", "safe_name", "with_part"]
