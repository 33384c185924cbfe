"""The SQL store's side tables: keyed values, append-only logs and leases that the layers
above keep per session, and a session's meta. They share the store's connection and
transaction (the ``connection`` the store hands them), so a value written inside
``transaction()`` commits or rolls back with the nodes written there."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import msgspec
from sqlalchemy import Connection, Engine, delete, select, update

from ._codec import decode_any, encode, normalize_meta
from ._errors import StoreError
from ._protocols import LogEntry
from ._schema import LEASES, LOGS, SESSIONS, VALUES

KEYS_PER_QUERY = 500
"""Keys per ``IN`` list when side values are read by key (below SQLite's variable limit)."""


class SideTables:
    """Values, logs, leases and session meta of one ``SQLStore``: statements on the
    ``connection`` it hands out (the open transaction's, or a new one), on ``engine``'s
    dialect; ``create`` makes a session's row (meta is kept there)."""

    def __init__(
        self,
        url: str,
        engine: Engine,
        connection: Callable[[], AbstractContextManager[Connection]],
        create: Callable[[Connection, str], bool],
    ) -> None:
        self.url = url
        self.engine = engine
        self._connection = connection
        self._create = create
        self._upserts: dict[str, Any] = {}

    def get_values(
        self, session: str, namespace: str, keys: Collection[str] | None = None
    ) -> dict[str, str]:
        query = select(VALUES.c.key, VALUES.c.value).where(
            VALUES.c.session == session, VALUES.c.namespace == namespace
        )
        with self._connection() as connection:
            if keys is None:
                return {str(row[0]): str(row[1]) for row in connection.execute(query)}
            wanted = list(dict.fromkeys(keys))
            found: dict[str, str] = {}
            for start in range(0, len(wanted), KEYS_PER_QUERY):
                chunk = wanted[start : start + KEYS_PER_QUERY]
                rows = connection.execute(query.where(VALUES.c.key.in_(chunk)))
                found.update((str(row[0]), str(row[1])) for row in rows)
            return found

    def put_values(self, session: str, namespace: str, values: Mapping[str, str]) -> None:
        if not values:
            return
        rows = [
            {"session": session, "namespace": namespace, "key": key, "value": value}
            for key, value in values.items()
        ]
        statement = self.upsert("values")
        with self._connection() as connection:
            # executemany: one compiled statement whatever the count (a multi-row VALUES
            # of 30k token counts took seconds to compile)
            connection.execute(statement, rows)

    def append_log(
        self, session: str, namespace: str, entries: Sequence[tuple[str, str]], seq: int
    ) -> None:
        if not entries:
            return
        rows = [
            {"session": session, "namespace": namespace, "key": key, "seq": seq, "body": body}
            for key, body in entries
        ]
        statement = self.upsert("logs")
        with self._connection() as connection:
            connection.execute(statement, rows)

    def upsert(self, table: str) -> Any:
        """The side tables' INSERT … ON CONFLICT statements, built once per store (building
        one costs more than running it on SQLite, and a render saves state every turn)."""
        found = self._upserts.get(table)
        if found is None:
            if table == "values":
                insert = upsert_for(self.engine)(VALUES)
                found = insert.on_conflict_do_update(
                    index_elements=["session", "namespace", "key"],
                    set_={"value": insert.excluded.value},
                )
            else:
                found = upsert_for(self.engine)(LOGS).on_conflict_do_nothing(
                    index_elements=["session", "namespace", "key"]
                )
            self._upserts[table] = found
        return found

    def put_lease(self, session: str, function_id: str, owner: str, expires_us: int) -> None:
        row = {"session": session, "function_id": function_id, "owner": owner}
        with self._connection() as connection:
            insert = upsert_for(self.engine)(LEASES).values({**row, "expires_us": expires_us})
            connection.execute(
                insert.on_conflict_do_update(
                    index_elements=["session", "function_id"],
                    set_={"owner": insert.excluded.owner, "expires_us": insert.excluded.expires_us},
                )
            )

    def renew_lease(
        self,
        session: str,
        function_id: str,
        owner: str,
        expires_us: int,
        *,
        previous: str | None = None,
    ) -> bool:
        statement = (
            update(LEASES)
            .where(
                LEASES.c.session == session,
                LEASES.c.function_id == function_id,
                LEASES.c.owner == (owner if previous is None else previous),
            )
            .values(owner=owner, expires_us=expires_us)
        )
        with self._connection() as connection:
            return bool(connection.execute(statement).rowcount)

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

    def namespaces(self, session: str) -> tuple[list[str], list[str]]:
        """The namespaces the session holds values in, and logs in (sorted)."""
        found: list[list[str]] = []
        with self._connection() as connection:
            for table in (VALUES, LOGS):
                query = select(table.c.namespace).where(table.c.session == session).distinct()
                found.append(sorted(str(row[0]) for row in connection.execute(query)))
        return found[0], found[1]

    def session_meta(self, session: str) -> dict[str, Any]:
        with self._connection() as connection:
            try:
                return self._meta(connection, session, lock=False)
            except _NoSession:
                return {}

    def update_session_meta(self, session: str, values: Mapping[str, Any]) -> dict[str, Any]:
        changes = normalize_meta(dict(values) if isinstance(values, Mapping) else values, "values")
        with self._connection() as connection:
            self._create(connection, session)
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
            raise _NoSession(f"no session {session!r} in {self.url}")
        try:
            value = decode_any(text)
        except msgspec.DecodeError as error:
            raise StoreError(
                f"damaged row: session {session!r}, table graph_sessions: its meta does not "
                f"decode ({error})"
            ) from None
        return value if isinstance(value, dict) else {}


class _NoSession(StoreError):
    pass


def _lease_rows(rows: Any) -> dict[str, tuple[str, int]]:
    return {str(r[0]): (str(r[1]), int(r[2])) for r in rows}


def upsert_for(engine: Engine) -> Any:
    """The dialect's INSERT with ON CONFLICT (SQLite and PostgreSQL both have one)."""
    if engine.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert
