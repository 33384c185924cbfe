"""Schema migrations: named, ordered functions, each applied once and recorded.

Each package lists its own migrations explicitly and hands them to the store that needs
them (``graph`` its :data:`GRAPH_MIGRATIONS` when an engine opens; ``context`` its list when
a ``ContextEngine`` first uses a store) — nothing registers itself as a side effect of an
import. Applications may add their own with :func:`register_migration`::

    @migration("myapp_0001_notes")
    def _create_notes(connection): ...

Migrations run in order inside one transaction each, under a lock, so two processes
opening the same database at once apply each migration exactly once.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import NamedTuple

from sqlalchemy import Connection, Engine, inspect, select, text

from ._errors import MigrationError
from ._identity import record_identity
from ._schema import DATABASE, EDGES, EVENTS, LEASES, LOGS, MIGRATIONS, NODES, SESSIONS, VALUES


class Migration(NamedTuple):
    """One schema change: a unique name and the function that applies it."""

    name: str
    apply: Callable[[Connection], None]


def _initial(connection: Connection) -> None:
    for table in (SESSIONS, NODES, EDGES, EVENTS):
        table.create(connection, checkfirst=True)


def _side_tables(connection: Connection) -> None:
    for table in (VALUES, LOGS):
        table.create(connection, checkfirst=True)


def _leases(connection: Connection) -> None:
    LEASES.create(connection, checkfirst=True)


def _edge_targets(connection: Connection) -> None:
    """Edges by session and target node (it replaces the session index it extends): a
    refresh reads only the new nodes' edges, and an append still updates one index."""
    for index in EDGES.indexes:
        index.create(connection, checkfirst=True)
    connection.execute(text("DROP INDEX IF EXISTS ix_graph_edges_session"))


def _database_id(connection: Connection) -> None:
    """The database's own identity: a UUID made once, which its state folder names."""
    connection.execute(
        text(
            "CREATE TABLE IF NOT EXISTS graph_database "
            "(key VARCHAR(64) NOT NULL PRIMARY KEY, value TEXT NOT NULL)"
        )
    )
    found = connection.execute(select(DATABASE.c.value).where(DATABASE.c.key == "id")).first()
    if found is None:
        connection.execute(DATABASE.insert().values(key="id", value=str(uuid.uuid4())))
    record_identity(connection)  # what tells a clone (which copies the UUID) from it


GRAPH_MIGRATIONS: tuple[Migration, ...] = (
    Migration("graph_0001_initial", _initial),
    Migration("graph_0002_side_tables", _side_tables),
    Migration("graph_0003_leases", _leases),
    Migration("graph_0004_edge_targets", _edge_targets),
    Migration("graph_0005_database_id", _database_id),
)
"""The graph package's own migrations, in order."""

_REGISTRY: list[Migration] = []
_APPLIED: dict[int, set[str]] = {}
_APPLIED_LOCK = threading.Lock()


def register_migration(name: str, apply: Callable[[Connection], None]) -> None:
    """Add an application's migration after every one registered so far (re-registering
    a name is a no-op); it applies the next time a database is opened."""
    if any(m.name == name for m in (*GRAPH_MIGRATIONS, *_REGISTRY)):
        return
    _REGISTRY.append(Migration(name, apply))


def migration(name: str) -> Callable[[Callable[[Connection], None]], Callable[[Connection], None]]:
    """Decorator form of :func:`register_migration`."""

    def decorate(apply: Callable[[Connection], None]) -> Callable[[Connection], None]:
        register_migration(name, apply)
        return apply

    return decorate


def registered_migrations() -> list[str]:
    """The names of the graph's and the application's migrations, in the order they apply."""
    return [m.name for m in (*GRAPH_MIGRATIONS, *_REGISTRY)]


def applied_migrations(engine: Engine) -> list[str]:
    """The names recorded as applied in this database."""
    if not inspect(engine).has_table(MIGRATIONS.name):
        return []
    with engine.connect() as connection:
        rows = connection.execute(select(MIGRATIONS.c.name).order_by(MIGRATIONS.c.applied_us))
        return [row[0] for row in rows]


def migrate(engine: Engine, extra: Sequence[Migration] = ()) -> list[str]:
    """Apply the graph's migrations, then ``extra``, then registered ones, where missing;
    return the names applied now. Cheap when nothing is missing (checked once per engine)."""
    wanted = [*GRAPH_MIGRATIONS, *extra, *_REGISTRY]
    with _APPLIED_LOCK:
        known = _APPLIED.get(id(engine))
        if known is not None and all(m.name in known for m in wanted):
            return []
    with engine.begin() as connection:  # under the lock too: openers of a new database race
        _lock(connection)
        MIGRATIONS.create(connection, checkfirst=True)
    done: list[str] = []
    for item in wanted:
        with engine.begin() as connection:
            _lock(connection)
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
    with _APPLIED_LOCK:
        _APPLIED.setdefault(id(engine), set()).update(m.name for m in wanted)
    return done


def _lock(connection: Connection) -> None:
    """Hold the migration lock until this transaction ends (SQLite's write transactions,
    begun IMMEDIATE, exclude each other already)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(7212026)"))


def forget_engine(engine: Engine) -> None:
    """Drop what :func:`migrate` remembers of a disposed engine."""
    with _APPLIED_LOCK:
        _APPLIED.pop(id(engine), None)
