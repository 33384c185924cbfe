"""Where sessions live: the base every store builds on, and the in-memory store.

A store is append-only; what it offers is three protocols (``_protocols``); the SQL store
(SQLite by default, PostgreSQL by URL) is in ``_sql.py``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from ._codec import normalize_meta
from ._errors import StoreError
from ._migrations import Migration
from ._nodes import Edge, Event, Node
from ._protocols import AUDIT, EventLog, Leases, Loaded, LogEntry, SessionInfo, SideData, WriteGuard
from ._side_migrations import SideMigration

DEFAULT_PATH = Path(".openprogram") / "openprogram.db"

Record = Node | Event


class Store(EventLog, SideData, Leases):
    """Every store: an event log, side data and leases (see ``_protocols``) behind one
    database. What is shared by all stores is here; the rest each store implements."""

    url: str = "memory:"
    _guards: tuple[WriteGuard, ...] = ()

    def add_write_guard(self, guard: WriteGuard) -> None:
        self._guards = (*self._guards, guard)

    def remove_write_guard(self, guard: WriteGuard) -> None:
        self._guards = tuple(g for g in self._guards if g != guard)

    def _guard(self, session: str, records: Sequence[Record], edges: Sequence[Edge]) -> None:
        for guard in self._guards:
            guard(session, records, edges)

    def has_session(self, session: str) -> bool:
        return any(info.id == session for info in self.sessions())

    def side_namespaces(self, session: str) -> tuple[list[str], list[str]]:
        """The namespaces the session holds side values in, and those it holds side logs
        in (sorted): what an export must carry to be the whole session, whichever
        package wrote them."""
        raise NotImplementedError

    @contextmanager
    def transaction(self) -> Iterator[None]:
        yield

    def lock_session(self, session: str) -> None:
        """The memory store's transaction holds its lock already; so does SQLite's
        (``BEGIN IMMEDIATE``)."""

    def close(self) -> None:
        pass

    def migrate(self, migrations: Sequence[Migration]) -> None:
        pass

    def migrate_side(self, migrations: Sequence[SideMigration]) -> None:
        pass


def _with_seq(record: Record, seq: int) -> Record:
    return msgspec.structs.replace(record, seq=seq)


class MemoryStore(Store):
    """Keeps sessions in this process only; ``ConversationGraph.memory()`` uses one."""

    def __init__(self) -> None:
        self._sessions: dict[str, dict[str, Any]] = {}
        self._side_data: dict[str, dict[str, Any]] = {}
        """Side values, logs and leases by session (they do not make a session exist)."""
        self._owners: dict[str, str] = {}
        """Node id → its session: ids are unique in a store, as a database's key makes them."""
        self._journals: list[dict[tuple[str, str, str], Any]] = []
        """Per open transaction: each side container as it was before the block changed it."""
        self._lock = threading.RLock()
        self._id = str(uuid.uuid4())

    def database_id(self) -> str:
        return self._id

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All or nothing, like a database: a block that raises leaves every session as it
        found it. The store is locked for the block, so other threads wait rather than
        interleave their commits with ones that may be undone."""
        with self._lock:
            saved = {
                name: (data, data["seq"], data["head"], len(data["records"]), data["meta"])
                for name, data in self._sessions.items()
            }
            journal: dict[tuple[str, str, str], Any] = {}
            self._journals.append(journal)
            try:
                yield
            except BaseException:
                self._sessions.clear()
                for name, (data, seq, head, length, meta) in saved.items():
                    data["seq"], data["head"], data["meta"] = seq, head, meta
                    del data["records"][length:]
                    self._sessions[name] = data
                for (session, kind, namespace), before in journal.items():
                    self._side_data.setdefault(session, {}).setdefault(kind, {})[namespace] = before
                self._owners = {
                    r[0].id: name
                    for name, data in self._sessions.items()
                    for r in data["records"]
                    if not isinstance(r, Event)
                }
                raise
            finally:
                self._journals.pop()

    def ensure_session(self, session: str) -> bool:
        with self._lock:
            existed = session in self._sessions
            self._sessions.setdefault(
                session,
                {"seq": 0, "head": None, "records": [], "created": time.time(), "meta": {}},
            )
            return existed

    def _side(self, session: str, kind: str, namespace: str, *, writing: bool = False) -> Any:
        """A side container; reading one that was never written gives an empty one (and
        stores nothing), writing first notes it in every open transaction's journal."""
        if not writing:
            found = self._side_data.get(session, {}).get(kind, {}).get(namespace)
            return found if found is not None else ({} if kind == "values" else [])
        data = self._side_data.setdefault(session, {})
        found = data.setdefault(kind, {}).setdefault(namespace, {} if kind == "values" else [])
        for journal in self._journals:
            journal.setdefault((session, kind, namespace), found.copy())
        return found

    def get_values(
        self, session: str, namespace: str, keys: Collection[str] | None = None
    ) -> dict[str, str]:
        with self._lock:
            values: dict[str, str] = self._side(session, "values", namespace)
            if keys is None:
                return dict(values)
            return {key: values[key] for key in keys if key in values}

    def put_values(self, session: str, namespace: str, values: Mapping[str, str]) -> None:
        with self._lock:
            self._side(session, "values", namespace, writing=True).update(values)

    def append_log(
        self, session: str, namespace: str, entries: Sequence[tuple[str, str]], seq: int
    ) -> None:
        with self._lock:
            log: list[LogEntry] = self._side(session, "logs", namespace, writing=True)
            known = {entry.key for entry in log}
            for key, body in entries:
                if key not in known:
                    log.append(LogEntry(key, seq, body))
                    known.add(key)

    def read_log(self, session: str, namespace: str) -> list[LogEntry]:
        with self._lock:
            return list(self._side(session, "logs", namespace))

    def side_namespaces(self, session: str) -> tuple[list[str], list[str]]:
        with self._lock:
            kinds = self._side_data.get(session, {})
            found = [
                sorted(n for n, kept in kinds.get(kind, {}).items() if kept and n[:1] != "\0")
                for kind in ("values", "logs")
            ]
            return found[0], found[1]

    def put_lease(self, session: str, function_id: str, owner: str, expires_us: int) -> None:
        with self._lock:
            self._side(session, "values", "\0leases", writing=True)[function_id] = (
                owner,
                expires_us,
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
        with self._lock:
            leases = self._side(session, "values", "\0leases", writing=True)
            found = leases.get(function_id)
            if found is None or found[0] != (owner if previous is None else previous):
                return False
            leases[function_id] = (owner, expires_us)
            return True

    def drop_lease(self, session: str, function_id: str) -> None:
        with self._lock:
            self._side(session, "values", "\0leases", writing=True).pop(function_id, None)

    def leases(self, session: str) -> dict[str, tuple[str, int]]:
        with self._lock:
            return dict(self._side(session, "values", "\0leases"))

    def commit(
        self,
        session: str,
        records: Sequence[Record],
        edges: Sequence[Edge],
        head: str | None,
        *,
        create: bool = True,
    ) -> int:
        with self._lock:
            if session not in self._sessions and not create:
                raise StoreError(
                    f"session {session!r} is not in {self.url} (deleted?); nothing was appended"
                )
            self._guard(session, records, edges)
            ids = [r.id for r in records if isinstance(r, Node)]
            taken = next((i for i in ids if i in self._owners), None)
            if taken is None and len(set(ids)) < len(ids):
                taken = next(i for i in ids if ids.count(i) > 1)
            if taken is not None:
                raise StoreError(f"node id {taken} is taken already in this memory store")
            self.ensure_session(session)
            self._owners.update(dict.fromkeys(ids, session))
            data = self._sessions[session]
            first = data["seq"] + 1
            data["seq"] += len(records)
            by_dst: dict[str, list[Edge]] = {}
            for edge in edges:
                by_dst.setdefault(edge.dst, []).append(edge)
            for offset, record in enumerate(records):
                stored = _with_seq(record, first + offset)
                if isinstance(stored, Node):
                    data["records"].append((stored, tuple(by_dst.get(stored.id, ()))))
                else:
                    data["records"].append(stored)
            if head is not None:  # None keeps the head (work on another branch)
                data["head"] = head
            return int(first)

    def load(self, session: str, after: int = 0, *, skipped: list[str] | None = None) -> Loaded:
        with self._lock:
            data = self._sessions.get(session)
            if data is None:
                return Loaded([], None)
            records = [
                r for r in data["records"] if (r.seq if isinstance(r, Event) else r[0].seq) > after
            ]
            return Loaded(records, data["head"], len(self._side(session, "logs", AUDIT)))

    def session_of(self, node_id: str) -> str | None:
        with self._lock:
            if node_id in self._owners:
                return self._owners[node_id]
            for name, data in self._sessions.items():
                for record in data["records"]:
                    found = record.node_id if isinstance(record, Event) else record[0].id
                    if found == node_id:
                        return name
        return None

    def sessions(self) -> list[SessionInfo]:
        with self._lock:
            return [
                SessionInfo(
                    k,
                    datetime.fromtimestamp(v["created"], UTC),
                    sum(1 for r in v["records"] if not isinstance(r, Event)),
                )
                for k, v in self._sessions.items()
            ]

    def delete_session(self, session: str) -> None:
        with self._lock:
            data = self._sessions.pop(session, None)
            side = self._side_data.pop(session, {})
            for kind, namespaces in side.items():
                for namespace, found in namespaces.items():
                    for journal in self._journals:
                        journal.setdefault((session, kind, namespace), found.copy())
            for record in data["records"] if data else ():
                if not isinstance(record, Event):
                    self._owners.pop(record[0].id, None)

    def session_meta(self, session: str) -> dict[str, Any]:
        with self._lock:
            data = self._sessions.get(session)
            return {} if data is None else dict(data["meta"])

    def update_session_meta(self, session: str, values: Mapping[str, Any]) -> dict[str, Any]:
        changes = normalize_meta(dict(values) if isinstance(values, Mapping) else values, "values")
        with self._lock:
            self.ensure_session(session)
            data = self._sessions[session]
            data["meta"] = {**data["meta"], **changes}
            return dict(data["meta"])
