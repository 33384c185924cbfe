"""Short handles: how a prompt names nodes, finished functions and layers.

A ULID costs 13 to 17 cl100k tokens and differs from database to database, so a prompt
that named nodes by id cost ~50 tokens per placeholder and sent different bytes for the
same history in two stores. A handle is derived from the session's own sequence, which
copy, export and import keep: a node is ``n<seq>``, a finished function's call
``fn_<seq>``, a layer ``L<k>`` (its maker stores ``k``, the session's layer count when
it was made, in the layer's meta, since its seq is not known while a render decides).
Once shown, a handle never changes. Ids stay the stored identity; every reader accepts
both forms through :func:`resolve_ref`.

>>> NODE_HANDLE.fullmatch("n42") is not None, NODE_HANDLE.fullmatch("n042") is None
(True, True)
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ._nodes import LayerInfo, Node

if TYPE_CHECKING:
    from ._state import GraphState

NODE_HANDLE = re.compile(r"n([1-9][0-9]*)")
"""A node's handle: ``n`` and its seq in its session."""
FUNCTION_HANDLE = re.compile(r"fn_([1-9][0-9]*)")
"""A finished function's tool-call id as a prompt shows it: ``fn_`` and its seq."""
LAYER_HANDLE = re.compile(r"L([1-9][0-9]*)")
"""A layer's handle: ``L`` and its number in its session."""
HANDLE_KEY = "handle"
"""The key of a layer's meta that holds its handle."""


def node_handle(node: Node) -> str:
    """The short name a prompt gives a node.

    >>> from datetime import UTC, datetime
    >>> from graph import Dialogue
    >>> node_handle(Node("01J", "s", 7, datetime.now(UTC), Dialogue("user", "hi")))
    'n7'
    """
    return f"n{node.seq}"


def layer_handle(info: LayerInfo) -> str:
    """The short name a prompt gives a layer (its id when its maker stored none: layers
    made before handles, or by hand)."""
    handle = info.layer.meta.get(HANDLE_KEY)
    return handle if isinstance(handle, str) and LAYER_HANDLE.fullmatch(handle) else info.id


def next_layer_handle(layers: Iterable[LayerInfo]) -> str:
    """The handle for a session's next layer: one past the count of its layers (the ones
    a render is still making included) and past every handle they hold.

    >>> next_layer_handle([])
    'L1'
    """
    count = 0
    highest = 0
    for info in layers:
        count += 1
        found = LAYER_HANDLE.fullmatch(str(info.layer.meta.get(HANDLE_KEY, "")))
        if found:
            highest = max(highest, int(found.group(1)))
    return f"L{max(count, highest) + 1}"


def _node_at(state: GraphState, seq: int) -> str | None:
    """The id of the node appended at ``seq`` (nodes are indexed in seq order)."""
    order, nodes = state.order, state.nodes
    at = bisect.bisect_left(order, seq, key=lambda node_id: nodes[node_id].seq)
    if at < len(order) and nodes[order[at]].seq == seq:
        return order[at]
    return next((node_id for node_id in order if nodes[node_id].seq == seq), None)


def resolve_ref(state: GraphState, ref: str) -> str | None:
    """The stored id ``ref`` names in this session: a node or layer id as it is, a
    finished function's call id (``fn_<id>`` or ``fn_<seq>``), a node handle ``n<seq>`` or
    a layer handle ``L<k>``; None when it names nothing here."""
    if ref in state.nodes or ref in state.layers:
        return ref
    if ref.startswith("fn_") and ref[3:] in state.nodes:
        return ref[3:]
    found = NODE_HANDLE.fullmatch(ref) or FUNCTION_HANDLE.fullmatch(ref)
    if found:
        return _node_at(state, int(found.group(1)))
    if LAYER_HANDLE.fullmatch(ref):
        return next((i.id for i in state.layers.values() if layer_handle(i) == ref), None)
    return None


def is_handle(ref: str) -> bool:
    """Whether ``ref`` has the shape of a handle (whether or not a session holds it).

    >>> is_handle("n42"), is_handle("fn_3"), is_handle("L2"), is_handle("01JABC")
    (True, True, True, False)
    """
    return any(p.fullmatch(ref) for p in (NODE_HANDLE, FUNCTION_HANDLE, LAYER_HANDLE))
