"""Schema migrations: named, ordered functions, each applied once and recorded.

Other packages register their own (``context`` adds records, layers and token caches)
without touching ``graph``::

    @migration("context_0001_records")
    def _create_records(connection): ...

Migrations run in registration order inside one transaction each, under a lock, so two
processes opening the same database at once apply each migration exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

from sqlalchemy import Connection, Engine, inspect, select, text

from ._errors import MigrationError
from ._schema import EDGES, EVENTS, MIGRATIONS, NODES, SESSIONS


class Migration(NamedTuple):
    name: str
    apply: Callable[[Connection], None]


_REGISTRY: list[Migration] = []


def register_migration(name: str, apply: Callable[[Connection], None]) -> None:
    """Add a migration after every one registered so far (re-registering a name is a no-op)."""
    if any(m.name == name for m in _REGISTRY):
        return
    _REGISTRY.append(Migration(name, apply))


def migration(name: str) -> Callable[[Callable[[Connection], None]], Callable[[Connection], None]]:
    """Decorator form of :func:`register_migration`."""

    def decorate(apply: Callable[[Connection], None]) -> Callable[[Connection], None]:
        register_migration(name, apply)
        return apply

    return decorate


def registered_migrations() -> list[str]:
    """The names of all registered migrations, in the order they apply."""
    return [m.name for m in _REGISTRY]


def applied_migrations(engine: Engine) -> list[str]:
    """The names recorded as applied in this database."""
    if not inspect(engine).has_table(MIGRATIONS.name):
        return []
    with engine.connect() as connection:
        rows = connection.execute(select(MIGRATIONS.c.name).order_by(MIGRATIONS.c.applied_us))
        return [row[0] for row in rows]


def migrate(engine: Engine) -> list[str]:
    """Apply every registered migration the database lacks; return the names applied."""
    MIGRATIONS.create(engine, checkfirst=True)
    done: list[str] = []
    for item in list(_REGISTRY):
        with engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(7212026)"))
            exists = connection.execute(
                select(MIGRATIONS.c.name).where(MIGRATIONS.c.name == item.name)
            ).first()
            if exists:
                continue
            try:
                item.apply(connection)
            except Exception as error:
                raise MigrationError(f"migration {item.name!r} failed: {error}") from error
            connection.execute(
                MIGRATIONS.insert().values(name=item.name, applied_us=time.time_ns() // 1000)
            )
            done.append(item.name)
    return done


@migration("graph_0001_initial")
def _initial(connection: Connection) -> None:
    for table in (SESSIONS, NODES, EDGES, EVENTS):
        table.create(connection, checkfirst=True)
