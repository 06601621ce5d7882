"""A text-protocol result read straight off a PyMySQL connection: rows as tuples of ``str`` / None.

Why: the MySQL / MariaDB samplers read a few statements many times a second (SHOW PROCESSLIST at 10 Hz,
SHOW GLOBAL STATUS every second) and use every value as text. A PyMySQL cursor parses every column
description into a ``FieldDescriptorPacket`` (a dozen fields, a description tuple, a converter lookup) and
runs a converter on every value, all in Python; here the column descriptions are read and skipped, and each
row's length-coded values are cut out of the packet and decoded. Same statement, same bytes from the server,
same values as text (what the cursor would return before its converters: ``'12'``, not ``12``).

It uses PyMySQL's connection internals (``_execute_command``, ``_read_packet``), stable since PyMySQL 0.7;
:func:`usable` says whether a connection has them, and the caller uses a cursor otherwise. Errors are the
driver's own (``_read_packet`` raises an error packet as PyMySQL's exception), so the engine maps them as it
maps a cursor's. The protocol: https://mariadb.com/kb/en/result-set-packets/ (text protocol, without
CLIENT_DEPRECATE_EOF, which PyMySQL does not ask for: column count, column definitions, EOF, rows, EOF).
"""

from __future__ import annotations

from typing import Any

COM_QUERY = 3
_NULL = 0xFB
_EOF = 0xFE
_OK = 0x00


def usable(conn: Any) -> bool:
    """Whether ``conn`` is a PyMySQL connection with the internals :func:`text_rows` uses."""
    return all(hasattr(conn, a) for a in ("_execute_command", "_read_packet", "_result", "encoding"))


def _is_eof(data: bytes) -> bool:
    return data[0] == _EOF and len(data) < 9


def row_values(data: bytes, ncols: int, encoding: str) -> tuple[str | None, ...]:
    """The ``ncols`` length-coded values of one text-protocol row packet (NULL -> None)."""
    out: list[str | None] = []
    pos = 0
    for _ in range(ncols):
        if pos >= len(data):  # fewer values than columns (a server bug PyMySQL tolerates too)
            break
        b = data[pos]
        if b < 251:
            n, pos = b, pos + 1
        elif b == _NULL:
            out.append(None)
            pos += 1
            continue
        elif b == 0xFC:
            n, pos = int.from_bytes(data[pos + 1:pos + 3], "little"), pos + 3
        elif b == 0xFD:
            n, pos = int.from_bytes(data[pos + 1:pos + 4], "little"), pos + 4
        else:
            n, pos = int.from_bytes(data[pos + 1:pos + 9], "little"), pos + 9
        out.append(data[pos:pos + n].decode(encoding, "replace"))
        pos += n
    return tuple(out)


def text_rows(conn: Any, sql: str) -> list[tuple[str | None, ...]]:
    """Run one statement on a PyMySQL connection; its rows as tuples of text (empty for a statement without a
    result set). Raises what PyMySQL raises (an error packet, a lost connection)."""
    conn._execute_command(COM_QUERY, sql)  # finishes a previous result PyMySQL left open, as a cursor would
    first = conn._read_packet().get_all_data()
    if first[0] == _OK or first[0] == 0xFB:  # no result set (0xFB: LOAD DATA LOCAL, never sent by dbdiag)
        return []
    ncols = _lenenc(first)
    read = conn._read_packet
    for _ in range(ncols):  # column definitions: not needed, every value is read as text
        read()
    if not _is_eof(read().get_all_data()):
        raise _protocol_error()
    rows: list[tuple[str | None, ...]] = []
    enc = conn.encoding
    while True:
        data = read().get_all_data()
        if _is_eof(data):
            return rows
        rows.append(row_values(data, ncols, enc))


def _lenenc(data: bytes) -> int:
    b = data[0]
    if b < 251:
        return b
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}[b]
    return int.from_bytes(data[1:1 + width], "little")


def _protocol_error() -> Exception:
    import pymysql  # only reached on a PyMySQL connection

    return pymysql.err.InternalError(0, "protocol error: no EOF after the column definitions")
