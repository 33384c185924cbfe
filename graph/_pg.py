"""PostgreSQL's bulk paths: appends go out with COPY, a reopen streams the events.

Each row of an ``executemany`` is a round trip on PostgreSQL, and a multi-row ``VALUES`` of
1,000 rows made the driver parse its 7,000 placeholders every time (most of a batch's
time: 11k nodes/s). ``COPY … FROM STDIN`` on the transaction's own psycopg connection has
nothing to parse; it runs inside the same transaction, so an append is exactly as durable
as before and a refused row fails its block as an INSERT would.

A plain psycopg cursor holds its whole result client-side: a reopen held every tool output
and layer at once. The events come through a server-side cursor instead, a chunk at a time.
Other drivers (no COPY) keep the multi-row ``VALUES`` and plain cursors.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from ._pending import Row

ROWS_PER_VALUES = 1000
"""Rows per multi-row ``VALUES`` when COPY is not available."""
FETCH_ROWS = 16_384
"""Rows per round trip of a server-side cursor (a few dozen trips for a long session)."""


def is_psycopg(connection: Connection) -> bool:
    return connection.dialect.driver == "psycopg" and (
        connection.connection.driver_connection is not None
    )


@functools.lru_cache(maxsize=16)
def _copy_sql(insert: str) -> str:
    """``COPY table (columns) FROM STDIN`` for an ``INSERT INTO table (columns) VALUES …``."""
    return f"COPY {insert.partition(' VALUES ')[0].removeprefix('INSERT INTO ')} FROM STDIN"


@functools.lru_cache(maxsize=64)
def _multi_row(insert: str, count: int) -> str:
    """``INSERT … VALUES (%s, …)`` repeated for ``count`` rows."""
    head, _, values = insert.partition(" VALUES ")
    return f"{head} VALUES {', '.join([values] * count)}"


def insert_rows(connection: Connection, insert: str, rows: list[Row]) -> None:
    """Send ``rows`` for the driver-SQL ``insert`` (``%s`` placeholders) in bulk."""
    if is_psycopg(connection):
        _copy(connection, _copy_sql(insert), rows)
        return
    for start in range(0, len(rows), ROWS_PER_VALUES):
        chunk = rows[start : start + ROWS_PER_VALUES]
        params = tuple(value for row in chunk for value in row)
        connection.exec_driver_sql(_multi_row(insert, len(chunk)), params)


def _copy(connection: Connection, sql: str, rows: list[Row]) -> None:
    dbapi = connection.dialect.loaded_dbapi
    driver: Any = connection.connection.driver_connection
    try:
        with driver.cursor() as cursor, cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)
    except dbapi.Error as error:  # as SQLAlchemy raises a failed INSERT (a StoreError above)
        raise DBAPIError.instance(sql, None, error, dbapi.Error) from error


def streamed(connection: Connection, sql: str, key: dict[str, Any]) -> Iterator[Any]:
    """The rows of ``sql`` through a server-side cursor in this transaction."""
    driver: Any = connection.connection.driver_connection
    with driver.cursor(name="graph_load_stream") as cursor:
        cursor.itersize = FETCH_ROWS
        cursor.execute(sql, key)
        while chunk := cursor.fetchmany(FETCH_ROWS):
            yield from chunk
