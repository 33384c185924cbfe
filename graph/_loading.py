"""Stored rows back into records, in seq order: the cost of reopening a session.

A reopen builds hundreds of thousands of small objects at once. CPython's cyclic collector
runs again and again while they pile up and rescans every older one each time, which cost
more than the decoding itself; none of these objects can form a cycle (nodes and edges are
``gc=False`` structs), so the collector is paused while they are built (see ``paused``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import msgspec

from ._codec import decode_any, decode_event, decode_payload, from_micros
from ._errors import NodeNotFound, StoreError
from ._nodes import EDGE_TYPES, Edge, Event, EventData, Layer, Node
from ._state import GraphState

Record = tuple[Node, tuple[Edge, ...]] | Event

_EDGE_TYPES: dict[str, Any] = {name: name for name in EDGE_TYPES}
"""One string object per edge type (not one per edge)."""


@contextmanager
def paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (restored after, as it was)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def records_of(
    session: str,
    edge_rows: Iterable[Sequence[Any]],
    node_rows: Iterable[Sequence[Any]],
    event_rows: Iterable[Sequence[Any]],
    skipped: list[str] | None = None,
) -> list[Record]:
    """Records from driver rows: nodes ``(id, seq, at_us, payload, meta)`` with the edges
    ``(src, dst, type)`` pointing at them, and events ``(seq, node_id, at_us, data)``;
    nodes and events each come in seq order and may be streamed (only the decoded records
    are kept, never every row's text at once).

    A row that does not decode is a :class:`StoreError` naming the session, seq and table;
    with a ``skipped`` list, it is left out and described there instead (a repair).

    An edge's, an event's and a layer's ids are the nodes' own string objects (one copy of
    each id in memory, not three or more).
    """
    with paused():
        by_dst: dict[str, list[tuple[str, str]]] = {}
        for src, dst, kind in edge_rows:
            found = by_dst.get(dst)
            if found is None:
                by_dst[dst] = [(src, kind)]
            else:
                found.append((src, kind))
        ids: dict[str, str] = {}
        nodes: list[Record] = []
        no_edges: tuple[Edge, ...] = ()
        for node_id, seq, at_us, payload, meta in node_rows:
            try:
                node = Node(
                    node_id,
                    session,
                    seq,
                    from_micros(at_us),
                    decode_payload(payload),
                    {} if meta == "{}" else _meta(meta),
                )
            except (msgspec.DecodeError, TypeError, ValueError, OverflowError) as error:
                _undecodable(skipped, session, seq, "graph_nodes", f"node {node_id}", error)
                continue
            ids[node_id] = node_id
            pointing = by_dst.pop(node_id, None)
            edges = (
                tuple(Edge(ids.get(s, s), node_id, _EDGE_TYPES.get(k, k)) for s, k in pointing)
                if pointing
                else no_edges
            )
            nodes.append((node, edges))
        events: list[Record] = []
        for seq, node_id, at_us, data in event_rows:
            try:
                event = Event(
                    session, seq, ids.get(node_id, node_id), from_micros(at_us), _shared(data, ids)
                )
            except (msgspec.DecodeError, TypeError, ValueError, OverflowError) as error:
                _undecodable(skipped, session, seq, "graph_events", f"event on {node_id}", error)
                continue
            events.append(event)
        if not events:
            return nodes
        nodes.extend(events)
        nodes.sort(key=_seq)  # two sorted runs: one linear merge
        return nodes


def _meta(text: str) -> dict[str, Any]:
    value = decode_any(text)
    if not isinstance(value, dict):
        raise ValueError(f"meta is a {type(value).__name__}, not an object")
    return value


def _undecodable(
    skipped: list[str] | None, session: str, seq: Any, table: str, what: str, error: Exception
) -> None:
    problem = f"session {session!r}, seq {seq}, table {table}: {what} does not decode ({error})"
    if skipped is None:
        raise StoreError(
            f"damaged row: {problem}; ConversationGraph.open(..., repair=True) or "
            "`openprogram check` loads the rest"
        )
    note = f"skipped {problem}"
    if note not in skipped:  # a refresh reads an unreadable tail again
        skipped.append(note)


def _shared(text: str, ids: dict[str, str]) -> EventData:
    """An event's data; a layer's covered ids are the nodes' own string objects (a long
    session's layers cover its nodes many times over: 15 MB of copies at 100k nodes)."""
    data = decode_event(text)
    if isinstance(data, Layer):
        covers = tuple([ids.get(node, node) for node in data.covers])
        return msgspec.structs.replace(data, covers=covers)
    return data


def _seq(record: Record) -> int:
    return record.seq if isinstance(record, Event) else record[0].seq


def apply_loaded(
    state: GraphState, records: Sequence[Record], before: int | None, repairs: list[str]
) -> None:
    """Index ``records`` (those below seq ``before``) in ``state``; what an older version
    stored after a failed batch (an edge or event naming a node that was never stored) is
    left out and noted in ``repairs``, so the session stays readable and nothing that was
    stored is lost."""
    with paused():
        for record in records:
            seq = record.seq if isinstance(record, Event) else record[0].seq
            if before is not None and seq >= before:
                break
            try:
                if isinstance(record, Event):
                    state.apply_event(record)
                else:
                    state.add_node(record[0], record[1])
            except NodeNotFound as error:
                _load_damaged(state, record, error, repairs)


def _load_damaged(
    state: GraphState, record: Record, error: NodeNotFound, repairs: list[str]
) -> None:
    if isinstance(record, Event):
        repairs.append(f"seq {record.seq}: skipped an event for missing {error.node_id}")
        state.last_seq = max(state.last_seq, record.seq)
        return
    node, edges = record
    kept = tuple(e for e in edges if e.src in state.nodes)
    for edge in edges:
        if edge not in kept:
            repairs.append(
                f"node {node.id}: dropped a {edge.type} edge from missing node {edge.src}"
            )
    state.add_node(node, kept)
