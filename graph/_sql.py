"""The SQL store: a SQLite file (the default) or PostgreSQL, through the same code.

``commit`` assigns consecutive ``seq`` numbers to new nodes and events inside one
transaction (the session row's counter is the lock), so several writers on one session never
collide and a failed commit leaves nothing behind.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, delete, event, func, select, update
from sqlalchemy.exc import SQLAlchemyError

from ._codec import (
    decode_any,
    decode_event,
    decode_payload,
    encode,
    from_micros,
    normalize_meta,
    to_micros,
)
from ._errors import StoreError
from ._migrations import Migration, forget_engine, migrate
from ._nodes import Edge, Event, Node
from ._schema import EDGES, EVENTS, LEASES, LOGS, NODES, SESSIONS, VALUES
from ._store import DEFAULT_PATH, Loaded, LogEntry, Record, SessionInfo, Store


def normalize_url(url_or_path: str | os.PathLike[str] | None, *, create: bool = True) -> str:
    """A SQLAlchemy URL from a URL, a file path, ``OPENPROGRAM_DB`` or the default path.

    With ``create=False`` a SQLite file that does not exist is a :class:`StoreError`, and
    no folder is made for it (readers never create a database).
    """
    if url_or_path is None:
        url_or_path = os.environ.get("OPENPROGRAM_DB") or DEFAULT_PATH
    text = os.fspath(url_or_path)
    if text.startswith(("postgres://", "postgresql://")):
        return "postgresql+psycopg://" + text.split("://", 1)[1]
    if "://" in text:
        if not create and text.startswith("sqlite:///") and not Path(text[10:]).exists():
            raise StoreError(f"no database at {text[10:]}")
        return text
    path = Path(text).expanduser().resolve()
    if not create:
        if not path.is_file():
            raise StoreError(f"no database at {path}")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


_HOT_SQL = {
    "bump": "UPDATE graph_sessions SET next_seq = next_seq + :count, head = :head "
    "WHERE id = :session RETURNING next_seq",
    "node": "INSERT INTO graph_nodes (id, session, seq, kind, at_us, payload, meta) "
    "VALUES (:id, :session, :seq, :kind, :at_us, :payload, :meta)",
    "edge": "INSERT INTO graph_edges (src, dst, type, session) "
    "VALUES (:src, :dst, :type, :session)",
    "event": "INSERT INTO graph_events (session, seq, node_id, at_us, data) "
    "VALUES (:session, :seq, :node_id, :at_us, :data)",
}
_DRIVER_SQL: dict[tuple[str, str], str] = {}

_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _sqlite_begin(connection: Connection) -> None:
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def engine_for(url: str) -> Engine:
    """One migrated engine per URL and process."""
    with _ENGINES_LOCK:
        engine = _ENGINES.get(url)
        if engine is not None:
            return engine
        try:
            if url.startswith("sqlite"):
                engine = create_engine(url, connect_args={"check_same_thread": False})
                event.listen(engine, "connect", _sqlite_pragmas)
                event.listen(engine, "begin", _sqlite_begin)
            else:
                engine = create_engine(url, pool_pre_ping=True)
        except SQLAlchemyError as error:
            raise StoreError(f"cannot open database {url}: {error}") from error
        try:
            migrate(engine)
        except BaseException as error:
            engine.dispose()  # an engine we do not cache must not leak its connections
            if isinstance(error, SQLAlchemyError):
                raise StoreError(f"cannot open database {url}: {error}") from error
            raise
        _ENGINES[url] = engine
        return engine


def dispose_engines() -> None:
    """Close every cached engine (tests and short-lived CLIs call this)."""
    with _ENGINES_LOCK:
        for engine in _ENGINES.values():
            forget_engine(engine)
            engine.dispose()
        _ENGINES.clear()


class SQLStore(Store):
    """A store over SQLAlchemy: SQLite (WAL) or PostgreSQL, with the same code."""

    def __init__(
        self, url_or_path: str | os.PathLike[str] | None = None, *, create: bool = True
    ) -> None:
        self.url = normalize_url(url_or_path, create=create)
        self.engine = engine_for(self.url)
        self._local = threading.local()

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        current: Connection | None = getattr(self._local, "connection", None)
        if current is not None:
            yield current
            return
        try:
            with self.engine.begin() as connection:
                yield connection
        except SQLAlchemyError as error:
            raise StoreError(f"database error on {self.url}: {error}") from error

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction for every commit in the block; a nested block is a savepoint,
        so an inner failure the caller catches undoes only the inner commits."""
        current: Connection | None = getattr(self._local, "connection", None)
        if current is not None:
            try:
                savepoint = current.begin_nested()
            except SQLAlchemyError as error:
                raise StoreError(f"database error on {self.url}: {error}") from error
            try:
                yield
            except BaseException:
                if savepoint.is_active:
                    savepoint.rollback()
                raise
            else:
                savepoint.commit()
            return
        with self._connection() as connection:
            self._local.connection = connection
            try:
                yield
            finally:
                self._local.connection = None

    def has_session(self, session: str) -> bool:
        query = select(SESSIONS.c.id).where(SESSIONS.c.id == session)
        with self._connection() as connection:
            return connection.execute(query).first() is not None

    def ensure_session(self, session: str) -> bool:
        query = select(SESSIONS.c.id).where(SESSIONS.c.id == session)
        with self._connection() as connection:
            if connection.execute(query).first():
                return True
        created = time.time_ns() // 1000
        try:
            with self._connection() as connection:
                connection.execute(
                    SESSIONS.insert().values(id=session, created_us=created, next_seq=0, meta="{}")
                )
        except StoreError:
            with self._connection() as connection:
                if connection.execute(query).first():
                    return True
            raise
        return False

    def _statement(self, connection: Connection, name: str) -> str:
        """The hot-path statements as driver SQL (``:name`` or ``%(name)s`` placeholders):
        appends skip SQLAlchemy's statement compilation, which costs more than SQLite."""
        style = connection.dialect.paramstyle
        key = (style, name)
        cached = _DRIVER_SQL.get(key)
        if cached is None:
            sql = _HOT_SQL[name]
            if style == "pyformat":
                sql = re.sub(r":(\w+)", r"%(\1)s", sql)
            cached = _DRIVER_SQL[key] = sql
        return cached

    def commit(
        self, session: str, records: Sequence[Record], edges: Sequence[Edge], head: str | None
    ) -> int:
        with self._connection() as connection:
            last = connection.exec_driver_sql(
                self._statement(connection, "bump"),
                {"count": len(records), "head": head, "session": session},
            ).scalar_one()
            first = int(last) - len(records) + 1
            nodes, events = [], []
            for offset, record in enumerate(records):
                seq = first + offset
                if isinstance(record, Node):
                    nodes.append(
                        {
                            "id": record.id,
                            "session": session,
                            "seq": seq,
                            "kind": record.kind,
                            "at_us": to_micros(record.at),
                            "payload": encode(record.payload),
                            "meta": encode(record.meta),
                        }
                    )
                else:
                    events.append(
                        {
                            "session": session,
                            "seq": seq,
                            "node_id": record.node_id,
                            "at_us": to_micros(record.at),
                            "data": encode(record.data),
                        }
                    )
            if nodes:
                connection.exec_driver_sql(self._statement(connection, "node"), nodes)
            if edges:
                rows = [
                    {"src": e.src, "dst": e.dst, "type": e.type, "session": session} for e in edges
                ]
                connection.exec_driver_sql(self._statement(connection, "edge"), rows)
            if events:
                connection.exec_driver_sql(self._statement(connection, "event"), events)
            return first

    def load(self, session: str, after: int = 0) -> Loaded:
        """The records with ``after < seq <= next_seq`` as read first: each statement of a
        PostgreSQL transaction sees its own snapshot (read committed), so without the bound
        a commit landing between the node and the event queries could show a later event
        and hide an earlier node, which a reader then skipped for good. Every seq up to the
        counter it read is committed (the counter's row lock orders commits by seq)."""
        nodes_t = NODES
        edges_t = EDGES
        events_t = EVENTS
        sessions = SESSIONS
        with self._connection() as connection:
            row = connection.execute(
                select(sessions.c.head, sessions.c.next_seq).where(sessions.c.id == session)
            ).first()
            head, last = (row[0], int(row[1])) if row is not None else (None, 0)
            node_rows = connection.execute(
                select(nodes_t).where(
                    nodes_t.c.session == session, nodes_t.c.seq > after, nodes_t.c.seq <= last
                )
            ).all()
            ids = {row.id for row in node_rows}
            edge_rows = connection.execute(
                select(edges_t).where(edges_t.c.session == session)
            ).all()
            event_rows = connection.execute(
                select(events_t).where(
                    events_t.c.session == session, events_t.c.seq > after, events_t.c.seq <= last
                )
            ).all()
        by_dst: dict[str, list[Edge]] = {}
        for row in edge_rows:
            if row.dst in ids:
                by_dst.setdefault(row.dst, []).append(Edge(row.src, row.dst, row.type))
        merged: list[tuple[int, tuple[Node, tuple[Edge, ...]] | Event]] = []
        for row in node_rows:
            node = Node(
                id=row.id,
                session=session,
                seq=int(row.seq),
                at=from_micros(int(row.at_us)),
                payload=decode_payload(row.payload),
                meta=decode_any(row.meta),
            )
            merged.append((node.seq, (node, tuple(by_dst.get(node.id, [])))))
        for row in event_rows:
            merged.append(
                (
                    int(row.seq),
                    Event(
                        session=session,
                        seq=int(row.seq),
                        node_id=row.node_id,
                        at=from_micros(int(row.at_us)),
                        data=decode_event(row.data),
                    ),
                )
            )
        merged.sort(key=lambda item: item[0])
        return Loaded([item[1] for item in merged], head)

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
        return [SessionInfo(r.id, r.created_us / 1e6, int(counts.get(r.id, 0))) for r in rows]

    def delete_session(self, session: str) -> None:
        with self._connection() as connection:
            for table in (LEASES, LOGS, VALUES, EVENTS, EDGES, NODES):
                connection.execute(delete(table).where(table.c.session == session))
            sessions = SESSIONS
            connection.execute(delete(sessions).where(sessions.c.id == session))

    # -- side data ------------------------------------------------------------------------
    def migrate(self, migrations: Sequence[Migration]) -> None:
        try:
            migrate(self.engine, migrations)
        except SQLAlchemyError as error:
            raise StoreError(f"cannot migrate {self.url}: {error}") from error

    def get_values(self, session: str, namespace: str) -> dict[str, str]:
        query = select(VALUES.c.key, VALUES.c.value).where(
            VALUES.c.session == session, VALUES.c.namespace == namespace
        )
        with self._connection() as connection:
            return {str(row[0]): str(row[1]) for row in connection.execute(query)}

    def put_values(self, session: str, namespace: str, values: Mapping[str, str]) -> None:
        if not values:
            return
        rows = [
            {"session": session, "namespace": namespace, "key": key, "value": value}
            for key, value in values.items()
        ]
        with self._connection() as connection:
            insert = _upsert_for(connection)(VALUES).values(rows)
            connection.execute(
                insert.on_conflict_do_update(
                    index_elements=["session", "namespace", "key"],
                    set_={"value": insert.excluded.value},
                )
            )

    def append_log(
        self, session: str, namespace: str, entries: Sequence[tuple[str, str]], seq: int
    ) -> None:
        if not entries:
            return
        rows = [
            {"session": session, "namespace": namespace, "key": key, "seq": seq, "body": body}
            for key, body in entries
        ]
        with self._connection() as connection:
            insert = _upsert_for(connection)(LOGS).values(rows)
            connection.execute(
                insert.on_conflict_do_nothing(index_elements=["session", "namespace", "key"])
            )

    def put_lease(self, session: str, function_id: str, owner: str, expires_us: int) -> None:
        row = {"session": session, "function_id": function_id, "owner": owner}
        with self._connection() as connection:
            insert = _upsert_for(connection)(LEASES).values({**row, "expires_us": expires_us})
            connection.execute(
                insert.on_conflict_do_update(
                    index_elements=["session", "function_id"],
                    set_={"owner": insert.excluded.owner, "expires_us": insert.excluded.expires_us},
                )
            )

    def drop_lease(self, session: str, function_id: str) -> None:
        with self._connection() as connection:
            connection.execute(
                delete(LEASES).where(
                    LEASES.c.session == session, LEASES.c.function_id == function_id
                )
            )

    def leases(self, session: str) -> dict[str, tuple[str, int]]:
        query = select(LEASES.c.function_id, LEASES.c.owner, LEASES.c.expires_us).where(
            LEASES.c.session == session
        )
        with self._connection() as connection:
            return _lease_rows(connection.execute(query))

    def read_log(self, session: str, namespace: str) -> list[LogEntry]:
        query = (
            select(LOGS.c.key, LOGS.c.seq, LOGS.c.body)
            .where(LOGS.c.session == session, LOGS.c.namespace == namespace)
            .order_by(LOGS.c.position)
        )
        with self._connection() as connection:
            return [LogEntry(str(r[0]), int(r[1]), str(r[2])) for r in connection.execute(query)]

    def session_meta(self, session: str) -> dict[str, Any]:
        with self._connection() as connection:
            return self._meta(connection, session, lock=False)

    def update_session_meta(self, session: str, values: Mapping[str, Any]) -> dict[str, Any]:
        changes = normalize_meta(dict(values) if isinstance(values, Mapping) else values, "values")
        with self._connection() as connection:
            meta = {**self._meta(connection, session, lock=True), **changes}
            connection.execute(
                update(SESSIONS).where(SESSIONS.c.id == session).values(meta=encode(meta))
            )
        return meta

    def _meta(self, connection: Connection, session: str, *, lock: bool) -> dict[str, Any]:
        """The stored meta; ``lock`` holds the row (PostgreSQL) so concurrent updates queue
        instead of overwriting each other (SQLite's write transactions are exclusive anyway)."""
        query = select(SESSIONS.c.meta).where(SESSIONS.c.id == session)
        text = connection.execute(query.with_for_update() if lock else query).scalar()
        if text is None:
            raise StoreError(f"no session {session!r} in {self.url}")
        value = decode_any(text)
        return value if isinstance(value, dict) else {}


def _lease_rows(rows: Any) -> dict[str, tuple[str, int]]:
    return {str(r[0]): (str(r[1]), int(r[2])) for r in rows}


def _upsert_for(connection: Connection) -> Any:
    """The dialect's INSERT with ON CONFLICT (SQLite and PostgreSQL both have one)."""
    if connection.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert
