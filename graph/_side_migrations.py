"""Side-data migrations: another package's change to what it keeps per session, applied
through the side-data API instead of SQL of its own against graph's tables.

A package that once kept rows in tables of its own (``context`` did, before side data)
moves them with a :class:`SideMigration`: its function gets a :class:`SideImport`, reads
its old table, writes values and log entries, and drops the table. The SQL store runs it
once per database, recorded with the schema migrations; a memory store has nothing from
before and applies none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from sqlalchemy import Connection, inspect

from ._errors import MigrationError
from ._migrations import Migration

if TYPE_CHECKING:
    from ._sql_side import SideTables

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class SideImport(Protocol):
    """What a side-data migration may do: read and drop a table of its own package (never
    one of graph's), and write side values and log entries in the migration's transaction."""

    def tables(self) -> set[str]:
        """The tables the database holds now."""
        ...

    def rows(
        self, table: str, columns: Sequence[str], order_by: str | None = None
    ) -> list[tuple[Any, ...]]:
        """Every row of ``table``, as the ``columns`` named."""
        ...

    def put_values(self, rows: Iterable[tuple[str, str, str, str]]) -> None:
        """Side values as (session, namespace, key, value)."""
        ...

    def append_logs(self, rows: Iterable[tuple[str, str, str, int, str]]) -> None:
        """Log entries as (session, namespace, key, seq, body), in order."""
        ...

    def drop(self, table: str) -> None:
        """Drop a table the migration has moved."""
        ...


class SideMigration(NamedTuple):
    """One change to side data: a unique name (recorded with the schema migrations) and
    the function that applies it."""

    name: str
    apply: Callable[[SideImport], None]


class _SQLImport:
    """A :class:`SideImport` on one migration's connection."""

    def __init__(self, connection: Connection, store: SideTables) -> None:
        self.connection = connection
        self.store = store

    def tables(self) -> set[str]:
        return set(inspect(self.connection).get_table_names())

    def rows(
        self, table: str, columns: Sequence[str], order_by: str | None = None
    ) -> list[tuple[Any, ...]]:
        names = [_name(table, table=True), *(_name(c) for c in columns)]
        sql = f"SELECT {', '.join(names[1:])} FROM {names[0]}"
        if order_by is not None:
            sql += f" ORDER BY {_name(order_by)}"
        return [tuple(row) for row in self.connection.exec_driver_sql(sql)]

    def put_values(self, rows: Iterable[tuple[str, str, str, str]]) -> None:
        found = [{"session": s, "namespace": n, "key": k, "value": v} for s, n, k, v in rows]
        if found:
            self.connection.execute(self.store.upsert("values"), found)

    def append_logs(self, rows: Iterable[tuple[str, str, str, int, str]]) -> None:
        found = [
            {"session": s, "namespace": n, "key": k, "seq": q, "body": b} for s, n, k, q, b in rows
        ]
        if found:
            self.connection.execute(self.store.upsert("logs"), found)

    def drop(self, table: str) -> None:
        self.connection.exec_driver_sql(f"DROP TABLE {_name(table, table=True)}")


def _name(name: str, *, table: bool = False) -> str:
    """A plain identifier (a migration names its own tables and columns, never graph's)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise MigrationError(f"{name!r} is not a plain table or column name")
    if table and name.startswith("graph_"):
        raise MigrationError(f"table {name} is graph's own; a side-data migration cannot touch it")
    return name


def as_schema_migrations(migrations: Sequence[SideMigration], store: SideTables) -> list[Migration]:
    """The SQL store's form of side-data migrations: each a schema migration of the same
    name whose connection is handed to the function as a :class:`SideImport`."""

    def run(item: SideMigration) -> Callable[[Connection], None]:
        return lambda connection: item.apply(_SQLImport(connection, store))

    return [Migration(item.name, run(item)) for item in migrations]
