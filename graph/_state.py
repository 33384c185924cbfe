"""The in-memory index of one session: nodes, edges and events applied in ``seq`` order.

The index is rebuilt from the same records the store holds, so reading the graph as of any
seq is just replaying the records up to it (:meth:`GraphState.upto`).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from ._errors import CycleError, NodeNotFound
from ._nodes import (
    Edge,
    Event,
    Finish,
    Function,
    Layer,
    LayerInfo,
    Node,
    Rollback,
    Tool,
    ToolResult,
)

_EDGE_RANK = {"next": 0, "caller": 1, "requested": 2, "spawned": 3}


class GraphState:
    """Nodes by id plus adjacency for the four edge types; cheap to query, append-only."""

    def __init__(self, session: str) -> None:
        self.session = session
        self.nodes: dict[str, Node] = {}
        self.order: list[str] = []
        self.prev: dict[str, str] = {}
        self.caller: dict[str, str] = {}
        self.tools: dict[str, tuple[str, ...]] = {}
        self.requested_by: dict[str, str] = {}
        self.spawned_by: dict[str, str] = {}
        self.children: dict[str, list[str]] = {}
        self.successors: dict[str, tuple[str, ...]] = {}
        """Tuples, not lists: a node has few tools and chain successors (forks), and a
        tuple of ids is one object the cyclic collector stops tracking, where a list per
        node is rescanned by every full collection for the life of the process."""
        self.pending: dict[str, str] = {}
        self.layers: dict[str, LayerInfo] = {}
        """Layers by id, in creation order (rolled back ones included)."""
        self.edges: list[Edge] = []
        self.events: list[Event] = []
        self.records: list[tuple[Node, tuple[Edge, ...]] | Event] = []
        self.last_seq = 0
        self.rollbacks = 0
        """How many times :meth:`truncate` undid records (readers that cache walks check it)."""
        self.scrubbed = 0
        """The store's scrub mark as last read (``Loaded.scrubbed``)."""
        self.reloads = 0
        """How many times a scrub made this index read its session afresh: whoever keeps
        text derived from it (a rendered prompt, tier state) drops it when this changes."""

    def adopt(self, fresh: GraphState) -> None:
        """Take ``fresh``'s contents in place (everything sharing this index sees them)."""
        reloads = self.reloads + 1
        vars(self).update(vars(fresh))
        self.reloads = reloads

    # -- applying records -------------------------------------------------------------
    def add_node(self, node: Node, edges: Iterable[Edge] = ()) -> None:
        """Index a new node and the edges that point at it (all from older nodes)."""
        edge_list = tuple(edges)
        if len(edge_list) > 1:
            edge_list = _ranked(edge_list)
        for edge in edge_list:
            self._check_edge(edge, node.id)
        self.nodes[node.id] = node
        self.order.append(node.id)
        for edge in edge_list:
            self._index_edge(edge)
        if isinstance(node.payload, Tool) and node.result is None:
            self.pending[node.payload.call_id] = node.id
        self.records.append((node, edge_list))
        self.last_seq = max(self.last_seq, node.seq)

    def _check_edge(self, edge: Edge, new_id: str) -> None:
        if edge.dst != new_id:
            raise CycleError(
                f"edge {edge.src}->{edge.dst} ({edge.type}) must point at the new node"
            )
        if edge.src == new_id:
            raise CycleError(f"edge {edge.src}->{edge.dst} ({edge.type}) is a self-loop")
        if edge.src not in self.nodes:
            raise NodeNotFound(edge.src, self.session)

    def _index_edge(self, edge: Edge) -> None:
        self.edges.append(edge)
        if edge.type == "next":
            self.prev[edge.dst] = edge.src
            found = self.successors.get(edge.src)
            self.successors[edge.src] = (edge.dst,) if found is None else (*found, edge.dst)
        elif edge.type == "caller":
            self.caller[edge.dst] = edge.src
            self.children.setdefault(edge.src, []).append(edge.dst)
        elif edge.type == "requested":
            self.requested_by[edge.dst] = edge.src
            found = self.tools.get(edge.src)
            self.tools[edge.src] = (edge.dst,) if found is None else (*found, edge.dst)
        else:
            self.spawned_by[edge.dst] = edge.src

    def apply_event(self, event: Event) -> None:
        """Apply a later fact: a tool result, a function finish, a fork, a layer or the
        rollback of one."""
        if isinstance(event.data, Layer | Rollback):
            self._apply_layer_event(event)
            self.events.append(event)
            self.records.append(event)
            self.last_seq = max(self.last_seq, event.seq)
            return
        node = self.nodes.get(event.node_id)
        if node is None:
            raise NodeNotFound(event.node_id, self.session)
        if isinstance(event.data, ToolResult) and isinstance(node.payload, Tool):
            self.nodes[node.id] = msgspec.structs.replace(node, result=event.data)
            if self.pending.get(node.payload.call_id) == node.id:
                del self.pending[node.payload.call_id]
        elif isinstance(event.data, Finish) and isinstance(node.payload, Function):
            self.nodes[node.id] = msgspec.structs.replace(node, finish=event.data)
        self.events.append(event)
        self.records.append(event)
        self.last_seq = max(self.last_seq, event.seq)

    def truncate(self, length: int) -> None:
        """Undo every record after the first ``length``, newest first (a failed batch).

        Each undo is the exact inverse of applying the record, so the index ends equal to
        one built from the first ``length`` records; the cost is the batch's size.
        """
        if length >= len(self.records):
            return
        while len(self.records) > length:
            record = self.records.pop()
            if isinstance(record, Event):
                self._undo_event(record)
            else:
                self._undo_node(record[0], record[1])
        last = self.records[-1] if self.records else None
        self.last_seq = (
            0 if last is None else (last.seq if isinstance(last, Event) else last[0].seq)
        )
        self.rollbacks += 1

    def _apply_layer_event(self, event: Event) -> None:
        if isinstance(event.data, Layer):
            self.layers[event.node_id] = LayerInfo(
                event.node_id, self.session, event.seq, event.at, event.data
            )
            return
        assert isinstance(event.data, Rollback)
        info = self.layers.get(event.node_id)
        if info is None:
            raise NodeNotFound(event.node_id, self.session)
        self.layers[info.id] = msgspec.structs.replace(
            info, rolled_back=event.seq, reason=event.data.reason
        )

    def _undo_event(self, event: Event) -> None:
        popped = self.events.pop()
        assert popped is event
        if isinstance(event.data, Layer):
            del self.layers[event.node_id]
            return
        if isinstance(event.data, Rollback):
            info = self.layers[event.node_id]
            self.layers[info.id] = msgspec.structs.replace(info, rolled_back=None, reason=None)
            return
        node = self.nodes[event.node_id]
        if isinstance(event.data, ToolResult) and isinstance(node.payload, Tool):
            self.nodes[node.id] = msgspec.structs.replace(node, result=None)
            self.pending[node.payload.call_id] = node.id
        elif isinstance(event.data, Finish) and isinstance(node.payload, Function):
            self.nodes[node.id] = msgspec.structs.replace(node, finish=None)

    def _undo_node(self, node: Node, edges: tuple[Edge, ...]) -> None:
        for edge in reversed(edges):
            popped = self.edges.pop()
            assert popped is edge
            if edge.type == "next":
                del self.prev[edge.dst]
                _drop_last(self.successors, edge.src)
            elif edge.type == "caller":
                del self.caller[edge.dst]
                _pop_last(self.children, edge.src)
            elif edge.type == "requested":
                del self.requested_by[edge.dst]
                _drop_last(self.tools, edge.src)
            else:
                del self.spawned_by[edge.dst]
        if isinstance(node.payload, Tool) and self.pending.get(node.payload.call_id) == node.id:
            del self.pending[node.payload.call_id]
        self.order.pop()
        del self.nodes[node.id]

    def upto(self, seq: int) -> GraphState:
        """A new index holding only the records with ``seq <= seq``."""
        state = GraphState(self.session)
        for record in self.records:
            if isinstance(record, Event):
                if record.seq <= seq:
                    state.apply_event(record)
            elif record[0].seq <= seq:
                base = msgspec.structs.replace(record[0], result=None, finish=None)
                state.add_node(base, record[1])
        return state

    # -- queries ----------------------------------------------------------------------
    def get(self, node_id: str) -> Node:
        """A node by id, or by the handle a prompt shows it under (``n42``, ``fn_42``)."""
        try:
            return self.nodes[node_id]
        except KeyError:
            from ._handles import resolve_ref  # it reads this index

            found = resolve_ref(self, node_id)
            if found is not None and found in self.nodes:
                return self.nodes[found]
            raise NodeNotFound(node_id, self.session) from None

    def chain(self, head: str | None, stop: str | None = None) -> list[str]:
        """Ids from the root of the conversation chain (or just after ``stop``) to ``head``."""
        path: list[str] = []
        current = head
        while current is not None and current != stop:
            path.append(current)
            current = self.prev.get(current)
        path.reverse()
        return path

    def ancestry(self, node_id: str) -> list[str]:
        """The functions that (transitively) call ``node_id``, innermost first."""
        result: list[str] = []
        current = self.caller.get(node_id)
        while current is not None:
            result.append(current)
            current = self.caller.get(current)
        return result

    def frame_head(self, function_id: str) -> str:
        """The newest node on a function's own chain (the function itself when empty)."""
        node = self.get(function_id)
        if node.finish is not None and node.finish.last is not None:
            return node.finish.last
        for child in reversed(self.children.get(function_id, [])):
            if self.nodes[child].kind != "tool" and child in self.prev:
                return child
        return function_id

    def one_walk(self, node_ids: Iterable[str]) -> bool:
        """Whether one branch's walk can hold all of ``node_ids``: their top-level chain
        nodes (a tool counts as its requester, a nested node as its outermost function)
        all lie on the chain of the newest of them. Nodes of two forks never do."""
        tops = {self.top(node_id) for node_id in node_ids}
        if len(tops) < 2:
            return True
        newest = max(tops, key=lambda node_id: self.nodes[node_id].seq)
        return tops <= set(self.chain(newest))

    def top(self, node_id: str) -> str:
        """The top-level chain node holding ``node_id`` (a tool's requester, a nested
        node's outermost function)."""
        node_id = self.requested_by.get(node_id, node_id)
        while node_id in self.caller:
            node_id = self.caller[node_id]
        return node_id

    def tips(self) -> list[str]:
        """Chain nodes with no chain successor in their own frame: the branch heads."""
        result = []
        for node_id in self.order:
            node = self.nodes[node_id]
            if node.kind == "tool":
                continue
            frame = self.caller.get(node_id)
            followers = [s for s in self.successors.get(node_id, []) if self.caller.get(s) == frame]
            if not followers:
                result.append(node_id)
        return result


def _ranked(edges: Iterable[Edge]) -> tuple[Edge, ...]:
    return tuple(sorted(edges, key=lambda e: _EDGE_RANK[e.type]))


def _pop_last(index: dict[str, list[str]], key: str) -> None:
    items = index[key]
    items.pop()
    if not items:
        del index[key]


def _drop_last(index: dict[str, tuple[str, ...]], key: str) -> None:
    items = index[key][:-1]
    if items:
        index[key] = items
    else:
        del index[key]


def _seq(record: tuple[Node, tuple[Edge, ...]] | Event) -> int:
    return record.seq if isinstance(record, Event) else record[0].seq
