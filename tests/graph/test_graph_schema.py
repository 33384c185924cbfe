"""Frozen migrations (issue 23, item 4): migrating an empty database gives exactly the
schema today's sqlmodel tables make (each migration's own DDL: ``test_graph_internals``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _postgres import create_database, drop_database
from sqlalchemy import Engine, create_engine, inspect
from sqlmodel import SQLModel

from graph import GRAPH_MIGRATIONS, SQLStore, applied_migrations, engine_for


def schema(engine: Engine) -> dict[str, Any]:
    """Every table of the database: columns (type, nullability, default), primary key,
    indexes, unique constraints and foreign keys, as the database reports them."""
    found = inspect(engine)
    tables: dict[str, Any] = {}
    for table in sorted(found.get_table_names()):
        tables[table] = {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"], str(c.get("default")))
                for c in found.get_columns(table)
            ],
            "primary key": found.get_pk_constraint(table)["constrained_columns"],
            "indexes": sorted(
                (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                for i in found.get_indexes(table)
            ),
            "unique": sorted(tuple(u["column_names"]) for u in found.get_unique_constraints(table)),
            "foreign keys": found.get_foreign_keys(table),
        }
    return tables


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def two_urls(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Two empty databases of one kind: one to migrate, one for ``create_all``."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/migrated.db", f"sqlite:///{tmp_path}/created.db"
        return
    server: str = request.getfixturevalue("pg_url")
    other = create_database(server)
    try:
        yield request.getfixturevalue("pg_db_url"), other
    finally:
        drop_database(server, other)


def test_migrating_an_empty_database_gives_todays_schema(two_urls: tuple[str, str]) -> None:
    migrated_url, created_url = two_urls
    store = SQLStore(migrated_url)
    migrated = engine_for(store.url)
    assert applied_migrations(migrated) == [m.name for m in GRAPH_MIGRATIONS]
    created = create_engine(created_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        SQLModel.metadata.create_all(created)
        assert schema(migrated) == schema(created)
    finally:
        created.dispose()
