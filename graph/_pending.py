"""Rows a SQL transaction has yet to send: appends inside ``transaction()`` are buffered.

Every append used to cost four statements (reserve seqs, insert the node, its edges, its
event), each paying SQLAlchemy's per-statement overhead, which is most of an import's
time. Inside a transaction the first commit to a session reserves seqs with the usual
``UPDATE … RETURNING`` (that takes the session row's lock, held until the transaction
ends), so later commits can count seqs themselves; their rows go out in large
``executemany`` batches, and the session row is set once per flush.

Anything else that touches the connection flushes first, so reads inside a transaction
see every earlier append, and a savepoint starts with nothing buffered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._codec import EPOCH, encode_json
from ._nodes import Dialogue, Edge, Function, Node, Tool, node_kind
from ._store import Record

FLUSH_ROWS = 20_000
"""Buffered rows that trigger a flush (bounds the buffer's memory)."""

Row = tuple[Any, ...]


class Held:
    """Seqs this transaction holds for one session: the last one given and the head."""

    __slots__ = ("dirty", "head", "last")

    def __init__(self, last: int, head: str | None) -> None:
        self.last = last
        self.head = head
        self.dirty = False


class Pending:
    """The buffered rows of one transaction, and the sessions whose seqs it holds."""

    __slots__ = ("edges", "events", "held", "nodes", "size")

    def __init__(self) -> None:
        self.held: dict[str, Held] = {}
        self.nodes: list[Row] = []
        self.edges: list[Row] = []
        self.events: list[Row] = []
        self.size = 0
        """Buffered rows."""

    def take(self, session: str, count: int, head: str | None) -> int | None:
        """The first of ``count`` new seqs, when the session's seqs are held (else None)."""
        held = self.held.get(session)
        if held is None:
            return None
        first = held.last + 1
        held.last += count
        if head is not None:  # None keeps the session's head (work on another branch)
            held.head = head
        held.dirty = True
        return first

    def hold(self, session: str, last: int, head: str | None) -> None:
        self.held[session] = Held(last, head)

    @property
    def dirty(self) -> bool:
        return bool(self.size) or any(h.dirty for h in self.held.values())

    def add(
        self, session: str, first: int, records: Sequence[Record], edges: Sequence[Edge]
    ) -> None:
        add_rows(self.nodes, self.edges, self.events, session, first, records, edges)
        self.size += len(records) + len(edges)

    def clear(self) -> None:
        """Forget buffered rows (sent, or undone with their savepoint)."""
        self.nodes, self.edges, self.events = [], [], []
        self.size = 0

    def forget(self) -> None:
        """Forget rows and held seqs (a savepoint rolled back: the seqs are the database's
        again, read afresh by the next commit)."""
        self.clear()
        self.held.clear()


def add_rows(
    nodes: list[Row],
    edge_rows: list[Row],
    events: list[Row],
    session: str,
    first: int,
    records: Sequence[Record],
    edges: Sequence[Edge],
) -> None:
    """The insert rows (tuples in the statements' column order) of ``records``, whose
    seqs start at ``first``, and of ``edges``."""
    seq = first
    kinds = _KINDS
    encode = encode_json
    for record in records:
        at = record.at - EPOCH
        micros = (at.days * 86_400 + at.seconds) * 1_000_000 + at.microseconds
        if isinstance(record, Node):
            payload = record.payload
            nodes.append(
                (
                    record.id,
                    session,
                    seq,
                    kinds.get(type(payload)) or node_kind(payload),
                    micros,
                    encode(payload).decode(),
                    encode(record.meta).decode() if record.meta else "{}",
                )
            )
        else:
            events.append((session, seq, record.node_id, micros, encode(record.data).decode()))
        seq += 1
    for e in edges:
        edge_rows.append((e.src, e.dst, e.type, session))


_KINDS: dict[type, str] = {Dialogue: "dialogue", Function: "function", Tool: "tool"}
