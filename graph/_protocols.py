"""What a store offers, as three small protocols: the event log (sessions and their
records), side data (values and logs other layers keep per session) and leases (which
process runs which function). A :class:`~graph.Store` implements all three; a caller
asks only for the one it uses (``context`` keeps its records through side data alone).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:
    from ._migrations import Migration
    from ._nodes import Edge, Event, Node
    from ._side_migrations import SideMigration

    Record = Node | Event


AUDIT = "audit"
"""The side-log namespace of scrub entries (``store.read_log(session, AUDIT)``)."""


class Loaded(NamedTuple):
    """A session as stored: its records in seq order, the last head, and its scrub mark."""

    records: list[tuple[Node, tuple[Edge, ...]] | Event]
    head: str | None
    scrubbed: int = 0
    """Changes when a scrub rewrote the session's stored text (its newest audit entry):
    a reader that holds text read before must read the session afresh."""


class LogEntry(NamedTuple):
    """One appended entry of a side log."""

    key: str
    seq: int
    body: str


class SessionInfo(NamedTuple):
    """A session as listed: its id, when it was created (UTC, the type of ``LayerInfo.at``
    and ``Node.at``) and how many nodes it holds."""

    id: str
    created: datetime
    nodes: int


WriteGuard = Callable[[str, Sequence["Record"], Sequence["Edge"]], None]
"""Called with (session, records, edges) inside a commit's transaction, before anything is
written; raising refuses the commit (the runtime fences writes under a lost lease)."""


class Database(Protocol):
    """What every part of a store shares: where it is, which database it is, and one
    transaction around several writes."""

    url: str

    def database_id(self) -> str | None:
        """The database's UUID, made once and stored in it (None: a database that predates
        it, opened read-only). A state folder names the database it serves by it."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """Group several writes into one transaction (a no-op where it does not matter)."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


class EventLog(Database, Protocol):
    """Sessions as append-only logs of nodes and events, with a head and session meta."""

    def add_write_guard(self, guard: WriteGuard) -> None:
        """Run ``guard`` in every later commit's transaction, before it writes."""
        ...

    def remove_write_guard(self, guard: WriteGuard) -> None: ...

    def ensure_session(self, session: str) -> bool:
        """Create the session if missing; True when it already existed.

        Writing needs no call to this first: ``commit`` and ``update_session_meta`` create
        a missing session in their own transaction, so a write that fails (or a process
        killed before it commits) leaves no empty session behind."""
        ...

    def has_session(self, session: str) -> bool:
        """Whether the session exists (nothing is created)."""
        ...

    def commit(
        self,
        session: str,
        records: Sequence[Record],
        edges: Sequence[Edge],
        head: str | None,
        *,
        create: bool = True,
    ) -> int:
        """Store ``records`` with consecutive seqs (in list order); return the first seq.
        ``head`` becomes the session's head; None keeps the one it has. A session's first
        write creates it, in the same transaction; with ``create`` false a missing session
        (deleted by another process) is a ``StoreError`` and nothing is written."""
        ...

    def load(self, session: str, after: int = 0, *, skipped: list[str] | None = None) -> Loaded:
        """The records with a seq above ``after``, and the last head. A row that cannot be
        read is a ``StoreError`` naming session, seq and table; given a ``skipped`` list,
        the readable rest is loaded and each unreadable row described there."""
        ...

    def session_of(self, node_id: str) -> str | None: ...

    def sessions(self) -> list[SessionInfo]: ...

    def delete_session(self, session: str) -> None: ...

    def session_meta(self, session: str) -> dict[str, Any]:
        """The session's own metadata, a JSON object (``{}`` until something is recorded,
        and for a session that does not exist)."""
        ...

    def update_session_meta(self, session: str, values: Mapping[str, Any]) -> dict[str, Any]:
        """Set top-level keys of the session's metadata (others are kept); return it all.

        Inside ``transaction()`` the update commits or rolls back with the appends around it,
        which is what lets a caller record "done" atomically with the work it describes.
        """
        ...

    def lock_session(self, session: str) -> None:
        """Hold the session's row until the enclosing ``transaction()`` ends, so writers
        that check before they write (layers, rollbacks) take turns."""
        ...

    def migrate(self, migrations: Sequence[Migration]) -> None:
        """Apply an application's schema migrations to this store (where it has a schema)."""
        ...


class SideData(Database, Protocol):
    """Keyed values and append-only logs another layer keeps per session, by namespace."""

    def get_values(
        self, session: str, namespace: str, keys: Collection[str] | None = None
    ) -> dict[str, str]:
        """Every keyed value of a namespace (e.g. token counts, tier state), or only those
        of ``keys`` (a reader that needs a few of many need not load them all)."""
        ...

    def put_values(self, session: str, namespace: str, values: Mapping[str, str]) -> None:
        """Insert or replace keyed values."""
        ...

    def append_log(
        self, session: str, namespace: str, entries: Sequence[tuple[str, str]], seq: int
    ) -> None:
        """Append ``(key, body)`` entries; a key already logged is skipped (retries are
        safe). ``seq`` is the graph seq the entries belong to."""
        ...

    def read_log(self, session: str, namespace: str) -> list[LogEntry]:
        """A namespace's entries in the order they were appended."""
        ...

    def migrate_side(self, migrations: Sequence[SideMigration]) -> None:
        """Apply another package's side-data migrations (each once per database; a
        store with nothing from before, or opened read-only, applies none)."""
        ...


class Leases(Protocol):
    """Which process runs which function node, until when."""

    def put_lease(self, session: str, function_id: str, owner: str, expires_us: int) -> None:
        """Take or renew the lease on a running function."""
        ...

    def renew_lease(
        self,
        session: str,
        function_id: str,
        owner: str,
        expires_us: int,
        *,
        previous: str | None = None,
    ) -> bool:
        """Set the lease's owner and expiry only where it is held by ``previous`` (by
        ``owner`` itself when None): a heartbeat that never takes back a lease another
        process claimed, and a claim that loses to a renewal. True when it was set."""
        ...

    def drop_lease(self, session: str, function_id: str) -> None: ...

    def leases(self, session: str) -> dict[str, tuple[str, int]]:
        """Leases by function id: (owner, expiry in epoch microseconds)."""
        ...
