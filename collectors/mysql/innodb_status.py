"""Parse MySQL / MariaDB ``SHOW ENGINE INNODB STATUS`` text into numbers.

Public API: :func:`parse_innodb_status` returns an :class:`InnodbStatus` whose
``fields`` maps flat, stable names (``<section>.<metric>``, declared once in
:data:`FIELD_SPECS` with unit and counter/gauge kind) to floats, and whose
``errors`` maps a section name (the field prefix: ``header``, ``semaphores``,
``transactions``, ``file_io``, ``log``, ``buffer_pool``, ``row_operations``)
to one line saying why that section gave nothing or less than it should.
Parsing never raises on odd text (only :class:`TypeError` for a non-str);
each section is parsed on its own so one bad section does not lose the rest.
A field that the server did not print is absent, never zero.

Parsing needs nothing; producing the text needs the ``PROCESS`` privilege.

This module finds the sections and runs their parsers; the field declarations
are in :mod:`collectors.mysql.innodb_fields`, the line rules in
:mod:`collectors.mysql.innodb_lines` and one parser per section in
:mod:`collectors.mysql.innodb_sections`.

What each version prints, read from the saved outputs in
``tests/data/innodb_status/`` (``SOURCES.md`` says where each came from).
"x" = printed, "-" = not printed, so the field is absent:

=====================================  ====  ====  ====  =====  =====  =====
field (group)                          My    My    My    Maria  Maria  Maria
                                       5.7   8.0   8.4   10.5   10.6   10.11
                                       [1]   [2]   [3]                 11.1
=====================================  ====  ====  ====  =====  =====  =====
header.per_second_averages_seconds     x     x     x     x      x      x
semaphores.os_wait_array_*,            x     x     x     x      -      -
rw_{shared,excl,sx}_*,
spin_rounds_per_wait_rw_*
semaphores.mutex_*,                    x     -     -     -      -      -
spin_rounds_per_wait_mutex
transactions.*                         x     x     x     x      x      x
file_io.pending_fsyncs_buffer_pool,    x     x     x     x      x      x
os_*, *_per_sec, avg_bytes_per_read
file_io.pending_fsyncs_log             x     x     x     x      x      -
log.lsn, flushed_up_to,                x     x     x     x      x      x
pages_flushed_up_to, last_checkpoint,
checkpoint_age
log.buffer_assigned_up_to,             -     x     x     -      -      -
buffer_completed_up_to, written_up_to,
added_dirty_pages_up_to
log.min_file_id, max_file_id           -     x     -     -      -      -
log.pending_log_flushes,               x     -     -     x      x      -
pending_chkp_writes
log.log_ios_done, log_ios_per_sec      x     x     x     x      x      -
buffer_pool.* (sizes, pages, pending,  x     x     x     x      x      x
young, rates, hit_rate [4])
buffer_pool.pending_writes_single_page x     x     x     -      -      -
buffer_pool.dirty_pages_percent        -     -     -     x      x      x
row_operations.read_views_open         x     x     x     x      x      x
row_operations.queries_inside_innodb,  x     x     x     -      -      -
queries_in_queue
row_operations.rows_*, *_per_sec       x     x     x     x      x      -
row_operations.system_rows_*,          -     x     -     x      x      -
system_*_per_sec
=====================================  ====  ====  ====  =====  =====  =====

[1] The 5.7 Reference Manual example (a 2014 5.7.5 development build; the
    manual wraps long lines). Its "Mutex spin waits" line comes from 5.6-era
    code: the 8.0 source prints only the RW-lock lines, so MySQL did not drop
    the spin lines in 8.0, only the mutex one.
[2] A real 8.0.30+ capture: 8.0.30 added "Log minimum/maximum file id is"
    when the redo log became ``#innodb_redo/`` files; there are no other
    redo-capacity lines in this output.
[3] No genuine 8.4 capture was found; the saved file is the example the 8.4
    Reference Manual prints, which dates from 2018 (pre-8.0.30) and so lacks
    the file id and system-row lines that real 8.4 servers print.
[4] ``buffer_pool.hit_rate`` is absent when the server says "No buffer pool
    page gets since the last printout" (an idle window).

MariaDB 10.6 prints the SEMAPHORES heading with no counters under it.
Between 10.6 and 10.11 (the 10.8 redo log rewrite) LOG lost "pending log
flushes" and "log i/o's", FILE I/O merged its fsync counts into one
"Pending flushes (fsync): N", and ROW OPERATIONS kept only the read views. "Total large memory allocated" is
0 on MySQL 8.0, where the counter is no longer kept.

Notes on the numbers:

* ``buffer_pool.hit_rate`` is the server's own "hit rate X / 1000" over the
  ``header.per_second_averages_seconds`` window, as a fraction.
* ``*_per_sec`` values are averages over that same window, which is the time
  since the previous printout by *anyone* (monitor thread or another client),
  so take rates from your own counter deltas when you can.
* ``semaphores.os_wait_array_*`` are summed over all sync arrays
  (``innodb_sync_array_size`` > 1 prints one line per array).
* ``file_io.pending_fsyncs_buffer_pool`` is the tablespace (data file) flush
  count: MariaDB 10.8+ prints it alone as "Pending flushes (fsync): N".
* The server cuts output over 1 MB by removing the middle of the transaction
  list (it writes ``...truncated...``); the sections we read survive that.
  Text cut at its end (no ``END OF INNODB MONITOR OUTPUT``) keeps the complete
  lines of the last section and names that section in ``errors``.
* The TRANSACTIONS and deadlock sections quote users' SQL, which could forge a
  section heading; a heading seen twice makes that section an error rather
  than trusting either copy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from collectors.mysql.innodb_fields import FIELD_NAMES, FIELD_SPECS, SECTIONS, FieldSpec
from collectors.mysql.innodb_lines import Reader
from collectors.mysql.innodb_sections import PARSERS

__all__ = [
    "FIELD_NAMES",
    "FIELD_SPECS",
    "SECTIONS",
    "FieldSpec",
    "InnodbStatus",
    "parse_innodb_status",
]


@dataclass(frozen=True)
class InnodbStatus:
    """Numbers read from one ``SHOW ENGINE INNODB STATUS`` text.

    ``fields``: field name -> value, in the unit given by :data:`FIELD_SPECS`.
    ``errors``: section name -> one-line reason it is missing or incomplete.
    """

    fields: dict[str, float]
    errors: dict[str, str]


_END = "END OF INNODB MONITOR OUTPUT"
# Every heading any supported version prints, so that sections we do not read
# (deadlock, insert buffer, per-instance pools) still end the one before them.
_HEADINGS = frozenset({
    "BACKGROUND THREAD", "LATEST FOREIGN KEY ERROR", "LATEST DETECTED DEADLOCK",
    "INSERT BUFFER AND ADAPTIVE HASH INDEX", "INDIVIDUAL BUFFER POOL INFO", _END,
    *(title for key, title in SECTIONS.items() if key != "header"),
})



@dataclass(frozen=True)
class _Layout:
    """Where each section's body lies in the text."""

    bodies: dict[str, list[str]]  # section key -> stripped lines under its heading
    duplicated: dict[str, int]  # section key -> times its heading appeared (if > 1)
    cut: str | None  # heading of the section the text ends inside, if no END marker
    headings: int  # headings recognised (0: this is not monitor output at all)


def _is_rule(line: str, char: str) -> bool:
    return len(line) >= 3 and line.strip(char) == ""


def _heading_at(lines: Sequence[str], index: int) -> str | None:
    """Return the heading title at ``index`` if it is framed as the server frames it."""
    title = lines[index]
    if title not in _HEADINGS or index == 0 or not _is_rule(lines[index - 1], "-"):
        return None
    if index + 1 == len(lines) or _is_rule(lines[index + 1], "-") or _is_rule(lines[index + 1], "="):
        return title
    return None


def _split(lines: list[str], ends_with_newline: bool) -> _Layout:
    """Cut the stripped lines into section bodies, noting duplicates and a cut end."""
    key_of = {title: key for key, title in SECTIONS.items() if key != "header"}
    starts: list[tuple[int, str]] = []
    ended = False
    for index in range(len(lines)):
        title = _heading_at(lines, index)
        if title == _END:
            starts.append((index, title))
            ended = True
            break
        if title is not None:
            starts.append((index, title))

    # A body runs from after a heading's lower rule to before the next heading's upper rule.
    stop = starts[0][0] - 1 if starts else len(lines)
    raw: list[tuple[str, list[str]]] = [("header", lines[:stop])]
    for (index, title), following in zip(starts, [*starts[1:], (len(lines) + 1, "")]):
        raw.append((title, lines[index + 2:following[0] - 1]))

    cut = None
    if not ended:
        cut, cut_body = raw[-1]
        if cut_body and not ends_with_newline:
            cut_body.pop()  # the last line stops mid-way; its number may be short

    bodies: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for title, body in raw:
        key = "header" if title == "header" else key_of.get(title)
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
            bodies.setdefault(key, body)
    duplicated = {key: n for key, n in counts.items() if n > 1}
    return _Layout(bodies, duplicated, cut, len(starts))


def _section_result(key: str, layout: _Layout) -> tuple[dict[str, int | float], str | None]:
    """Parse one section; return its values and the one-line error, if any."""
    heading = "header" if key == "header" else SECTIONS[key]  # as _Layout.cut names it
    title = "header (the text before the first section)" if key == "header" else SECTIONS[key]
    if key in layout.duplicated:
        return {}, (f"heading {title} appears {layout.duplicated[key]} times (quoted SQL can forge one); "
                    "section ignored")
    if layout.headings == 0:
        return {}, f"{title} not found: the text has no InnoDB monitor section headings"
    if key not in layout.bodies:
        if layout.cut is not None:
            return {}, f"section {title} not found: the text ends early, inside {layout.cut}"
        return {}, f"section {title} not found in the output"
    parser, required = PARSERS[key]
    reader = Reader()
    try:
        parser(layout.bodies[key], reader)
    except Exception as error:  # noqa: BLE001 - a parser bug must cost one section, not the whole sample
        return {}, f"internal error parsing {title}: {type(error).__name__}: {error}"
    if layout.cut == heading:
        return reader.values, f"section {title} is cut off (no {_END} marker); later lines are missing"
    if reader.problem is not None:
        return reader.values, f"{title}: {reader.problem}"
    if required is not None and required not in reader.values:
        return reader.values, f"section {title} is present but has no line giving {required}"
    return reader.values, None


def parse_innodb_status(text: str) -> InnodbStatus:
    """Parse the Status column of ``SHOW ENGINE INNODB STATUS`` into numbers.

    ``text`` may carry the mysql client's ``\\G`` frame or leading/trailing
    blank lines; both are ignored. Raises :class:`TypeError` if ``text`` is not
    a str, and nothing else: problems go to :attr:`InnodbStatus.errors`.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_innodb_status needs str, got {type(text).__name__}")
    lines = [line.strip() for line in text.splitlines()]
    layout = _split(lines, text.endswith(("\n", "\r")))
    fields: dict[str, float] = {}
    errors: dict[str, str] = {}
    for key in SECTIONS:
        values, error = _section_result(key, layout)
        for name, value in values.items():
            number = float(value)
            if math.isfinite(number):
                fields[name] = number
        if error is not None:
            errors[key] = error
    return InnodbStatus(fields=fields, errors=errors)
