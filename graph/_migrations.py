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
from ._schema import MIGRATIONS


class Migration(NamedTuple):
    """One schema change: a unique name and the function that applies it."""

    name: str
    apply: Callable[[Connection], None]


# Each migration's DDL is frozen as it was written (what the sqlmodel tables of its day
# emitted), so a migration's body never changes when a model in ``_schema`` does; a test
# checks that migrating an empty database gives exactly the schema the models make now.
# ``{serial}`` is the dialect's auto-incrementing big integer key.

_SERIAL = {"sqlite": "INTEGER", "postgresql": "BIGSERIAL"}

_MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS graph_migrations (name VARCHAR(200) NOT NULL, "
    "applied_us BIGINT NOT NULL, PRIMARY KEY (name))"
)

_INITIAL = (  # 6de9ab8: sessions, nodes, edges (by session), events
    "CREATE TABLE IF NOT EXISTS graph_sessions (id VARCHAR(128) NOT NULL, "
    "created_us BIGINT NOT NULL, next_seq BIGINT NOT NULL, head VARCHAR(128), "
    "meta TEXT NOT NULL, PRIMARY KEY (id))",
    "CREATE TABLE IF NOT EXISTS graph_nodes (id VARCHAR(128) NOT NULL, "
    "session VARCHAR(128) NOT NULL, seq BIGINT NOT NULL, kind VARCHAR(16) NOT NULL, "
    "at_us BIGINT NOT NULL, payload TEXT NOT NULL, meta TEXT NOT NULL, PRIMARY KEY (id))",
    "CREATE UNIQUE INDEX IF NOT EXISTS ix_graph_nodes_session_seq ON graph_nodes (session, seq)",
    "CREATE TABLE IF NOT EXISTS graph_edges (src VARCHAR(128) NOT NULL, "
    "dst VARCHAR(128) NOT NULL, type VARCHAR(16) NOT NULL, session VARCHAR(128) NOT NULL, "
    "PRIMARY KEY (src, dst, type))",
    "CREATE INDEX IF NOT EXISTS ix_graph_edges_session ON graph_edges (session)",
    "CREATE TABLE IF NOT EXISTS graph_events (session VARCHAR(128) NOT NULL, "
    "seq BIGINT NOT NULL, node_id VARCHAR(128) NOT NULL, at_us BIGINT NOT NULL, "
    "data TEXT NOT NULL, PRIMARY KEY (session, seq))",
    "CREATE INDEX IF NOT EXISTS ix_graph_events_node_id ON graph_events (node_id)",
)

_SIDE_TABLES = (  # 2c973a1: keyed values and append-only logs for the layers above
    "CREATE TABLE IF NOT EXISTS graph_values (session VARCHAR(128) NOT NULL, "
    'namespace VARCHAR(64) NOT NULL, "key" VARCHAR(200) NOT NULL, value TEXT NOT NULL, '
    'PRIMARY KEY (session, namespace, "key"))',
    "CREATE TABLE IF NOT EXISTS graph_logs (position {serial} NOT NULL, "
    "session VARCHAR(128) NOT NULL, namespace VARCHAR(64) NOT NULL, "
    '"key" VARCHAR(200) NOT NULL, seq BIGINT NOT NULL, body TEXT NOT NULL, '
    "PRIMARY KEY (position))",
    'CREATE UNIQUE INDEX IF NOT EXISTS ix_graph_logs_key ON graph_logs (session, namespace, "key")',
    "CREATE INDEX IF NOT EXISTS ix_graph_logs_order ON graph_logs (session, namespace, position)",
)

_LEASES = (  # dd164c9: who runs a function node, until when
    "CREATE TABLE IF NOT EXISTS graph_leases (session VARCHAR(128) NOT NULL, "
    "function_id VARCHAR(128) NOT NULL, owner VARCHAR(200) NOT NULL, "
    "expires_us BIGINT NOT NULL, PRIMARY KEY (session, function_id))",
)

_EDGE_TARGETS = (  # 9d2c652: edges by session and target replace edges by session
    "CREATE INDEX IF NOT EXISTS ix_graph_edges_session_dst ON graph_edges (session, dst)",
    "DROP INDEX IF EXISTS ix_graph_edges_session",
)

_DATABASE = (  # a3e1e59: the database's own identity
    "CREATE TABLE IF NOT EXISTS graph_database "
    "(key VARCHAR(64) NOT NULL PRIMARY KEY, value TEXT NOT NULL)",
)


def _run(connection: Connection, statements: Sequence[str]) -> None:
    serial = _SERIAL.get(connection.dialect.name, "BIGINT")
    for statement in statements:
        connection.exec_driver_sql(statement.replace("{serial}", serial))


def _initial(connection: Connection) -> None:
    _run(connection, _INITIAL)


def _side_tables(connection: Connection) -> None:
    _run(connection, _SIDE_TABLES)


def _leases(connection: Connection) -> None:
    _run(connection, _LEASES)


def _edge_targets(connection: Connection) -> None:
    """Edges by session and target node (it replaces the session index it extends): a
    refresh reads only the new nodes' edges, and an append still updates one index."""
    _run(connection, _EDGE_TARGETS)


def _database_id(connection: Connection) -> None:
    """The database's own identity: a UUID made once, which its state folder names."""
    _run(connection, _DATABASE)
    found = connection.execute(text("SELECT value FROM graph_database WHERE key = 'id'")).first()
    if found is None:
        connection.execute(
            text("INSERT INTO graph_database (key, value) VALUES ('id', :value)"),
            {"value": str(uuid.uuid4())},
        )
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
        connection.exec_driver_sql(_MIGRATIONS_TABLE)
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
