"""A session's records copied for another session: as they are (``clone``), or with new
node and layer ids, of the whole session or of one branch (``copy_to``)."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from ._codec import decode_any, encode
from ._ids import new_id
from ._nodes import Edge, Event, Finish, Fork, Layer, Node
from ._state import GraphState

_ULID = re.compile(r"(?<![0-9A-Za-z])[0-9A-Z]{26}(?![0-9A-Za-z])")


def same_records(state: GraphState, session: str) -> tuple[list[Node | Event], list[Edge]]:
    """Every record of ``state`` with the same ids and seqs, moved to ``session``."""
    records: list[Node | Event] = []
    edges: list[Edge] = []
    for record in state.records:
        if isinstance(record, Event):
            records.append(msgspec.structs.replace(record, session=session))
        else:
            records.append(msgspec.structs.replace(record[0], session=session))
            edges.extend(record[1])
    return records, edges


def renamed_records(
    state: GraphState, session: str, keep: set[str] | None
) -> tuple[list[Node | Event], list[Edge], dict[str, str]]:
    """The records of the nodes in ``keep`` (every node when None) and the events and
    layers over them, with new ids, for ``session``; also the old id → new id map."""
    ids: dict[str, str] = {}
    records: list[Node | Event] = []
    edges: list[Edge] = []
    for record in state.records:
        if isinstance(record, Event):
            copied = _copied_event(record, session, ids)
            if copied is not None:
                records.append(copied)
            continue
        node, node_edges = record
        if keep is not None and node.id not in keep:
            continue
        ids[node.id] = new_id()
        records.append(msgspec.structs.replace(node, id=ids[node.id], session=session))
        edges.extend(Edge(ids[e.src], ids[node.id], e.type) for e in node_edges if e.src in ids)
    return records, edges, ids


def branch_of(state: GraphState, head: str) -> set[str]:
    """The nodes of the branch ending at ``head``: its chain, the insides of its functions
    and its tool calls."""
    state.get(head)
    found: set[str] = set()
    todo = list(state.chain(head))
    while todo:
        node_id = todo.pop()
        if node_id in found:
            continue
        found.add(node_id)
        todo.extend(state.tools.get(node_id, ()))
        todo.extend(state.children.get(node_id, ()))
    return found


def _copied_event(event: Event, session: str, ids: dict[str, str]) -> Event | None:
    data = event.data
    if isinstance(data, Fork):
        return None
    if isinstance(data, Layer):
        if not all(n in ids for n in data.covers):
            return None
        ids[event.node_id] = new_id()
        data = msgspec.structs.replace(
            data,
            covers=tuple(ids[n] for n in data.covers),
            replacement=_renamed(data.replacement, ids),
            builds_on=tuple(ids[b] for b in data.builds_on if b in ids),
            meta=_renamed(data.meta, ids),
        )
    elif isinstance(data, Finish) and data.last is not None:
        data = msgspec.structs.replace(data, last=ids.get(data.last))
    if event.node_id not in ids:
        return None
    return msgspec.structs.replace(event, session=session, node_id=ids[event.node_id], data=data)


def _renamed(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with every copied node or layer id it mentions replaced by the copy's (a
    layer's summary names its own id and the nodes it stands for: ``expand_layer("…")``)."""
    if value is None:
        return None
    text = encode(value)
    renamed = _ULID.sub(lambda found: ids.get(found.group(0), found.group(0)), text)
    return value if renamed == text else decode_any(renamed)
