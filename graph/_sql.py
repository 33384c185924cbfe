"""The SQL store: a SQLite file (the default) or PostgreSQL, through the same code.

``commit`` assigns consecutive ``seq`` numbers to new nodes and events inside one
transaction (the session row's counter is the lock), so several writers on one session never
collide and a failed commit leaves nothing behind. Appends inside a transaction are
buffered and sent in batches (``_pending``); the side tables (values, logs, leases, session
meta) are ``_sql_side``; database errors become one-line ``StoreError``s in ``_sql_errors``.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, func, inspect, select
from sqlalchemy.exc import SQLAlchemyError

from ._engines import engine_for, normalize_url
from ._errors import InvalidText, StoreError
from ._identity import database_id as identified
from ._identity import rekey
from ._loading import records_of
from ._migrations import Migration, migrate
from ._nodes import Edge
from ._pending import FLUSH_ROWS, Pending, Row, add_rows
from ._pg import insert_rows, is_psycopg, streamed
from ._protocols import AUDIT, Loaded, LogEntry, SessionInfo
from ._schema import DATABASE, EDGES, EVENTS, LEASES, LOGS, NODES, SESSIONS, VALUES
from ._side_migrations import SideMigration, as_schema_migrations
from ._sql_errors import TABLES, Unreadable, store_error
from ._sql_side import SideTables, upsert_for
from ._store import Record, Store

_HOT_SQL = {
    "bump": "UPDATE graph_sessions SET next_seq = next_seq + :count, head = COALESCE(:head, head) "
    "WHERE id = :session RETURNING next_seq",
    "settle": "UPDATE graph_sessions SET next_seq = :seq, head = COALESCE(:head, head) "
    "WHERE id = :session",
    "node": "INSERT INTO graph_nodes (id, session, seq, kind, at_us, payload, meta) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)",
    "edge": "INSERT INTO graph_edges (src, dst, type, session) VALUES (?, ?, ?, ?)",
    "event": "INSERT INTO graph_events (session, seq, node_id, at_us, data) VALUES (?, ?, ?, ?, ?)",
    "since": "SELECT next_seq, head, (SELECT max(position) FROM graph_logs "
    f"WHERE session = :session AND namespace = '{AUDIT}') "
    "FROM graph_sessions WHERE id = :session",
    "since_unaudited": "SELECT next_seq, head, 0 FROM graph_sessions WHERE id = :session",
    "nodes": "SELECT id, seq, at_us, payload, meta FROM graph_nodes "
    "WHERE session = :session AND seq > :after AND seq <= :last ORDER BY seq",
    "edges": "SELECT src, dst, type FROM graph_edges WHERE session = :session",
    "edges_after": "SELECT e.src, e.dst, e.type FROM graph_nodes n "
    "JOIN graph_edges e ON e.session = n.session AND e.dst = n.id "
    "WHERE n.session = :session AND n.seq > :after AND n.seq <= :last",
    "events": "SELECT seq, node_id, at_us, data FROM graph_events "
    "WHERE session = :session AND seq > :after AND seq <= :last ORDER BY seq",
}
_CHUNK = 4096

_DRIVER_SQL: dict[tuple[str, str], str] = {}


class SQLStore(Store):
    """A store over SQLAlchemy: SQLite (WAL) or PostgreSQL, with the same code. Its side
    data (values, logs, leases, session meta) is a ``SideTables`` it holds and delegates to,
    on this store's connection and transaction."""

    def __init__(
        self,
        url_or_path: str | os.PathLike[str] | None = None,
        *,
        create: bool = True,
        read_only: bool = False,
    ) -> None:
        """``read_only``: open for reading only (SQLite's ``mode=ro``, a read-only
        transaction on PostgreSQL). Nothing is migrated or created, so a reader works on a
        database it may not write; a table the database predates is a one-line
        ``StoreError`` saying so, and a write is refused by the database."""
        self.read_only = read_only
        self.url = normalize_url(url_or_path, create=create and not read_only)
        self.engine = engine_for(self.url, read_only=read_only)
        self._local = threading.local()
        self._side = SideTables(self.url, self.engine, self._connection, self._create)
        self._holds_database = self.engine.dialect.name == "sqlite" and not read_only
        """Whether a transaction holds the database's write lock from its start (SQLite's
        ``BEGIN IMMEDIATE``, see ``engine_for``)."""
        self._audited: bool | None = None if read_only else True
        """Whether the database has the audit log a scrub writes (one that predates it,
        opened read-only, was never migrated: its sessions were never scrubbed either)."""

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        current: Connection | None = getattr(self._local, "connection", None)
        if current is not None:
            try:
                self._flush(current)  # whatever runs next sees every buffered append
                yield current
            except SQLAlchemyError as error:  # inside a transaction too: a StoreError
                raise store_error(self.url, error) from error
            except UnicodeEncodeError as error:
                raise InvalidText("id or name", str(error.object)) from None
            return
        try:
            with self.engine.begin() as connection:
                yield connection
        except SQLAlchemyError as error:
            raise store_error(self.url, error) from error
        except UnicodeEncodeError as error:  # a lone surrogate in a parameter: never stored
            raise InvalidText("id or name", str(error.object)) from None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction for every commit in the block; a nested block is a savepoint,
        so an inner failure the caller catches undoes only the inner commits.

        Appends inside are buffered (``_pending``) and sent in large batches; a block
        ends by sending what is left, so a failing row fails its own block."""
        current: Connection | None = getattr(self._local, "connection", None)
        if current is not None:
            pending: Pending = self._local.pending
            try:
                self._flush(current)
                savepoint = current.begin_nested()
            except SQLAlchemyError as error:
                raise store_error(self.url, error) from error
            try:
                yield
                self._flush(current)
            except BaseException as error:
                pending.forget()
                if savepoint.is_active:
                    savepoint.rollback()
                if isinstance(error, SQLAlchemyError):
                    raise store_error(self.url, error) from error
                raise
            else:
                savepoint.commit()
            return
        with self._connection() as connection:
            self._local.connection = connection
            self._local.pending = Pending()
            try:
                yield
                self._flush(connection)
            finally:
                self._local.connection = None
                self._local.pending = None

    def _flush(self, connection: Connection) -> None:
        """Send the buffered rows and set the held sessions' seq counters and heads."""
        pending: Pending | None = getattr(self._local, "pending", None)
        if pending is None or not pending.dirty:
            return
        rows = {"node": pending.nodes, "edge": pending.edges, "event": pending.events}
        pending.clear()
        for name, found in rows.items():
            self._insert(connection, name, found)
        for session, held in pending.held.items():
            if held.dirty:
                connection.exec_driver_sql(
                    self._statement(connection, "settle"),
                    {"seq": held.last, "head": held.head, "session": session},
                )
                held.dirty = False

    def has_session(self, session: str) -> bool:
        query = select(SESSIONS.c.id).where(SESSIONS.c.id == session)
        with self._connection() as connection:
            return connection.execute(query).first() is not None

    def lock_session(self, session: str) -> None:
        """Hold the session's row until the transaction ends. A writable SQLite database's
        transactions begin ``IMMEDIATE``: they hold the whole database's write lock from
        their start, so there is nothing more to take (every render's commit asks)."""
        if self._holds_database:
            return
        query = select(SESSIONS.c.id).where(SESSIONS.c.id == session).with_for_update()
        with self._connection() as connection:
            connection.execute(query)

    def ensure_session(self, session: str) -> bool:
        """Create the session row if missing (inside ``transaction()``: in that transaction,
        so it commits or rolls back with the data written there); True when it existed."""
        with self._connection() as connection:
            return self._create(connection, session)

    def _create(self, connection: Connection, session: str) -> bool:
        query = select(SESSIONS.c.id).where(SESSIONS.c.id == session)
        if connection.execute(query).first():
            return True
        row = {"id": session, "created_us": time.time_ns() // 1000, "next_seq": 0, "meta": "{}"}
        insert = upsert_for(self.engine)(SESSIONS).values(row).on_conflict_do_nothing()
        return not connection.execute(insert).rowcount

    def database_id(self) -> str | None:
        """The stored UUID; a PostgreSQL clone's own one (``_identity``)."""
        with self._connection() as connection:
            if not connection.dialect.has_table(connection, DATABASE.name):
                return None
            return identified(connection, writable=not self.read_only)

    def rekey(self) -> str:
        """Give this database a new UUID, so that a copy of a database (``cp``, a restored
        dump) becomes one of its own, with a state folder of its own; the new UUID."""
        if self.read_only:
            raise StoreError(f"{self.url} is open read-only; a new database UUID needs a writer")
        with self._connection() as connection:
            return rekey(connection)

    def _statement(self, connection: Connection, name: str) -> str:
        """The hot-path statements as driver SQL (``:name``/``?`` placeholders, or
        ``%(name)s``/``%s``): appends skip SQLAlchemy's statement compilation, which costs
        more than SQLite, and send rows as plain tuples."""
        style = connection.dialect.paramstyle
        key = (style, name)
        cached = _DRIVER_SQL.get(key)
        if cached is None:
            sql = _HOT_SQL[name]
            if style == "pyformat":
                sql = re.sub(r":(\w+)", r"%(\1)s", sql).replace("?", "%s")
            cached = _DRIVER_SQL[key] = sql
        return cached

    def commit(
        self,
        session: str,
        records: Sequence[Record],
        edges: Sequence[Edge],
        head: str | None,
        *,
        create: bool = True,
    ) -> int:
        current: Connection | None = getattr(self._local, "connection", None)
        if current is None and self._guards:  # the guards read in the commit's transaction
            with self.transaction():
                return self.commit(session, records, edges, head, create=create)
        if self._guards:
            self._guard(session, records, edges)
        if current is None:
            with self._connection() as connection:
                first = self._reserve(connection, session, len(records), head, create)
                nodes: list[Row] = []
                edge_rows: list[Row] = []
                events: list[Row] = []
                add_rows(nodes, edge_rows, events, session, first, records, edges)
                for name, rows in (("node", nodes), ("edge", edge_rows), ("event", events)):
                    self._insert(connection, name, rows)
                return first
        pending: Pending = self._local.pending
        taken = pending.take(session, len(records), head)
        if taken is None:
            self._flush(current)
            taken = self._reserve(current, session, len(records), head, create)
            pending.hold(session, taken + len(records) - 1, head)
        pending.add(session, taken, records, edges)
        if pending.size >= FLUSH_ROWS:
            self._flush(current)
        return taken

    def _insert(self, connection: Connection, name: str, rows: list[Row]) -> None:
        """Insert rows with one ``executemany`` (SQLite), or in bulk on PostgreSQL, where
        each row of an executemany is a round trip (see ``_pg``)."""
        if not rows:
            return
        if connection.dialect.name != "postgresql" or len(rows) == 1:
            connection.exec_driver_sql(self._statement(connection, name), rows)
            return
        insert_rows(connection, self._statement(connection, name), rows)

    def _reserve(
        self,
        connection: Connection,
        session: str,
        count: int,
        head: str | None,
        create: bool = True,
    ) -> int:
        """Take ``count`` seqs from the session row (locking it); return the first."""
        bump = self._statement(connection, "bump")
        key = {"count": count, "head": head, "session": session}
        last = connection.exec_driver_sql(bump, key).scalar()
        if last is None:
            if not create:
                raise StoreError(
                    f"session {session!r} is not in {self.url} (deleted by another process?); "
                    "nothing was appended"
                )
            self._create(connection, session)  # a session's first write creates it
            last = connection.exec_driver_sql(bump, key).scalar_one()
        return int(last) - count + 1

    def load(self, session: str, after: int = 0, *, skipped: list[str] | None = None) -> Loaded:
        """The records with ``after < seq <= last``, ``last`` being the session's counter as
        read first; when there are none, that one small query is all it costs, so polling
        for news is cheap. The bound matters on PostgreSQL: each statement sees its own
        snapshot (read committed), so without it a commit landing between the node and the
        event queries could show a later event and hide an earlier node, which a reader then
        skipped for good. Every seq up to the counter is committed (the counter's row lock
        orders commits by seq).

        A damaged row is a :class:`StoreError` naming session, seq and table; with a
        ``skipped`` list, what can be read is loaded (row by row where the database itself
        fails to read a range) and what cannot is described there."""
        key: dict[str, Any] = {"session": session, "after": after}
        last, head, scrubbed = after, None, 0
        try:
            with self._connection() as connection:
                since = self._statement(connection, self._since(connection))
                found = connection.exec_driver_sql(since, key).first()
                if found is None:
                    return Loaded([], None)
                last, head, scrubbed = int(found[0]), found[1], int(found[2] or 0)
                if last <= after:
                    return Loaded([], head, scrubbed)
                key["last"] = last
                records = records_of(
                    session,
                    self._rows(connection, "edges_after" if after else "edges", key),
                    self._rows(connection, "nodes", key),
                    self._rows(connection, "events", key),
                    skipped,
                )
        except Unreadable:
            if skipped is None or getattr(self._local, "connection", None) is not None:
                raise
            records = self._load_row_by_row(session, after, last, skipped)
        return Loaded(records, head, scrubbed)

    def _since(self, connection: Connection) -> str:
        if self._audited is None:
            self._audited = inspect(connection).has_table(LOGS.name)
        return "since" if self._audited else "since_unaudited"

    def _load_row_by_row(
        self, session: str, after: int, last: int, skipped: list[str]
    ) -> list[Any]:
        """A repair's read of a range the database fails to scan: one seq at a time, each
        in its own transaction, so one unreadable page costs only the rows on it."""
        records: list[Any] = []
        for seq in range(after + 1, last + 1):
            key: dict[str, Any] = {"session": session, "after": seq - 1, "last": seq}
            try:
                with self._connection() as connection:
                    nodes = list(self._rows(connection, "nodes", key))
                    events = list(self._rows(connection, "events", key))
                    edges = list(self._rows(connection, "edges_after", key)) if nodes else []
            except StoreError as error:
                problem = error.problem if isinstance(error, Unreadable) else str(error)
                note = f"skipped session {session!r}, seq {seq}: {problem}"
                if note not in skipped:  # a refresh reads an unreadable tail again
                    skipped.append(note)
                continue
            records.extend(records_of(session, edges, nodes, events, skipped))
        return records

    def _rows(self, connection: Connection, name: str, key: dict[str, Any]) -> Iterator[Any]:
        """Plain driver tuples, a chunk at a time (SQLAlchemy's row objects cost more than
        the query, and a whole session's text at once is a needless peak of memory).

        On PostgreSQL a plain cursor holds its whole result client-side, so the events
        (tool outputs, layers: most of a session's text, 40 MB of peak at 100k nodes) come
        through a server-side cursor; the nodes' many small rows do not need one.

        The database failing to read (a damaged file) is an ``Unreadable`` StoreError that
        names the table and session, not the driver's own error."""
        sql = self._statement(connection, name)
        dbapi: Any = connection.dialect.loaded_dbapi
        try:
            if name == "events" and is_psycopg(connection):
                yield from streamed(connection, sql, key)
                return
            plain = connection.exec_driver_sql(sql, key).cursor
            while plain is not None:
                found = plain.fetchmany(_CHUNK)
                if not found:
                    break
                yield from found
        except (dbapi.Error, SQLAlchemyError) as error:
            table = TABLES[name]
            where = f"seqs {key['after'] + 1} to {key['last']}"
            raise Unreadable(
                f"table {table} of session {key['session']!r} ({where})",
                f"{' '.join(str(error).split())}",
                self.url,
            ) from error

    def session_of(self, node_id: str) -> str | None:
        """The session holding a node (or a layer) with this id."""
        with self._connection() as connection:
            value = connection.execute(
                select(NODES.c.session).where(NODES.c.id == node_id)
            ).scalar()
            if value is None:
                value = connection.execute(
                    select(EVENTS.c.session).where(EVENTS.c.node_id == node_id).limit(1)
                ).scalar()
            return None if value is None else str(value)

    def sessions(self) -> list[SessionInfo]:
        sessions = SESSIONS
        nodes_t = NODES
        with self._connection() as connection:
            counts: dict[str, int] = dict(
                connection.execute(
                    select(nodes_t.c.session, func.count()).group_by(nodes_t.c.session)
                ).all()
            )
            rows = connection.execute(select(sessions).order_by(sessions.c.created_us)).all()
        return [
            SessionInfo(
                r.id, datetime.fromtimestamp(r.created_us / 1e6, UTC), int(counts.get(r.id, 0))
            )
            for r in rows
        ]

    def delete_session(self, session: str) -> None:
        with self._connection() as connection:
            for table in (LEASES, LOGS, VALUES, EVENTS, EDGES, NODES):
                connection.execute(delete(table).where(table.c.session == session))
            sessions = SESSIONS
            connection.execute(delete(sessions).where(sessions.c.id == session))
        pending: Pending | None = getattr(self._local, "pending", None)
        if pending is not None:  # the seqs it held went with the row: a commit starts afresh
            pending.held.pop(session, None)

    # -- side data (``_sql_side``) -------------------------------------------------------
    def get_values(
        self, session: str, namespace: str, keys: Collection[str] | None = None
    ) -> dict[str, str]:
        return self._side.get_values(session, namespace, keys)

    def put_values(self, session: str, namespace: str, values: Mapping[str, str]) -> None:
        self._side.put_values(session, namespace, values)

    def append_log(
        self, session: str, namespace: str, entries: Sequence[tuple[str, str]], seq: int
    ) -> None:
        self._side.append_log(session, namespace, entries, seq)

    def read_log(self, session: str, namespace: str) -> list[LogEntry]:
        return self._side.read_log(session, namespace)

    def side_namespaces(self, session: str) -> tuple[list[str], list[str]]:
        return self._side.namespaces(session)

    def put_lease(self, session: str, function_id: str, owner: str, expires_us: int) -> None:
        self._side.put_lease(session, function_id, owner, expires_us)

    def renew_lease(
        self,
        session: str,
        function_id: str,
        owner: str,
        expires_us: int,
        *,
        previous: str | None = None,
    ) -> bool:
        return self._side.renew_lease(session, function_id, owner, expires_us, previous=previous)

    def drop_lease(self, session: str, function_id: str) -> None:
        self._side.drop_lease(session, function_id)

    def leases(self, session: str) -> dict[str, tuple[str, int]]:
        return self._side.leases(session)

    def session_meta(self, session: str) -> dict[str, Any]:
        return self._side.session_meta(session)

    def update_session_meta(self, session: str, values: Mapping[str, Any]) -> dict[str, Any]:
        return self._side.update_session_meta(session, values)

    # -- migrations ----------------------------------------------------------------------
    def migrate(self, migrations: Sequence[Migration]) -> None:
        """Apply missing migrations; a read-only store applies none (what it reads of a
        table an older database lacks is a ``StoreError`` naming that table)."""
        if self.read_only:
            return
        try:
            migrate(self.engine, migrations)
        except SQLAlchemyError as error:
            raise StoreError(f"cannot migrate {self.url}: {error}") from error

    def migrate_side(self, migrations: Sequence[SideMigration]) -> None:
        """Apply side-data migrations, each recorded as a schema migration of its name."""
        self.migrate(as_schema_migrations(migrations, self._side))
