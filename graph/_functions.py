"""Function nodes: started, nested and finished, on an implicit stack or explicit frames.

``with graph.function(...)`` keeps one stack of frames per graph, which is all a single
thread of code needs. Concurrent code (threads, asyncio tasks) holds a :class:`Frame` per
call instead: ``start_function(..., frame=parent)`` puts the function node on the parent's
chain and returns a handle whose ``frame`` the function's own appends go to, so sibling
calls chain in start order under their caller and never interleave their insides.
"""

from __future__ import annotations

import threading
import traceback
from typing import Any, NamedTuple

import msgspec

from ._codec import normalize_event, normalize_meta, normalize_payload, normalize_time
from ._cursor import Commit, Cursor
from ._errors import FunctionFinished, GraphError, InvalidMessage
from ._ids import new_id
from ._nodes import EXPOSE_MODES, Edge, Event, Finish, Function, Node
from ._reader import GraphReader


class Frame(NamedTuple):
    """Where an append goes: the chain of ``function`` (None: the top level)."""

    function: str | None = None


TOP = Frame(None)
"""The top-level chain, as an explicit frame."""


class FunctionHandle:
    """A running function node: its id, the frame its own appends go to, its output."""

    def __init__(self, graph: GraphReader, node: Node) -> None:
        self.graph = graph
        self.id = node.id
        self.name = node.payload.name if isinstance(node.payload, Function) else ""
        self.output: Any = None

    @property
    def frame(self) -> Frame:
        return Frame(self.id)

    @property
    def node(self) -> Node:
        return self.graph.get(self.id)


class FunctionWriter:
    """Starts, nests and finishes the function nodes of one live graph: it reads through
    ``reader`` (the graph), moves the shared ``cursor`` and writes through ``commit``."""

    def __init__(
        self, reader: GraphReader, cursor: Cursor, lock: threading.RLock, commit: Commit
    ) -> None:
        self._reader = reader
        self._state = reader.state
        self._cursor = cursor
        self._lock = lock
        self._commit = commit

    # -- frames ---------------------------------------------------------------------------
    def where(self, frame: Frame | None) -> str | None:
        """The function whose chain an append goes to (the implicit stack when None)."""
        if frame is None:
            return self._cursor.frame
        if frame.function is not None:
            node = self._state.get(frame.function)
            if node.kind != "function":
                raise GraphError(f"frame {frame.function!r} is a {node.kind} node, not a function")
        return frame.function

    def head_of(self, frame: Frame | None = None) -> str | None:
        function = self.where(frame)
        heads = self._cursor.heads
        if function in heads:
            return heads[function]
        if function is None:
            return self._cursor.head
        return self._state.frame_head(function)

    def check_open(self, function: str | None) -> None:
        """Refuse to append into a finished function (or one inside a finished one)."""
        chain = [] if function is None else [function, *self._state.ancestry(function)]
        for function_id in chain:
            node = self._state.nodes[function_id]
            if node.finish is not None:
                assert isinstance(node.payload, Function)
                raise FunctionFinished(
                    f"function {node.payload.name!r} (node {function_id}) already finished "
                    f"({node.finish.status}); fork from a node outside it to continue"
                )

    def chain_edges(self, node_id: str, function: str | None) -> list[Edge]:
        """The edges that put a new node at the end of ``function``'s chain."""
        edges: list[Edge] = []
        heads = self._cursor.heads
        head = heads[function] if function in heads else self.head_of(Frame(function))
        if head is not None:
            edges.append(Edge(head, node_id, "next"))
        if function is not None:
            edges.append(Edge(function, node_id, "caller"))
        return edges

    # -- starting and finishing -----------------------------------------------------------
    def start_function(
        self,
        name: str,
        input: Any = None,
        expose: str = "io",
        *,
        frame: Frame | None = None,
        spawned_by: str | None = None,
        at: Any = None,
        meta: dict[str, Any] | None = None,
    ) -> FunctionHandle:
        if not isinstance(name, str) or not name:
            raise InvalidMessage("name", "a function needs a non-empty string name")
        if expose not in EXPOSE_MODES:
            raise InvalidMessage("expose", f"{expose!r} is not one of {', '.join(EXPOSE_MODES)}")
        when = normalize_time(at)
        meta_value = normalize_meta(meta)
        cursor = self._cursor
        with self._lock:
            parent = self.where(frame)
            self.check_open(parent)
            spawner = spawned_by if spawned_by is not None else self._single_pending_tool(parent)
            if spawner is not None and self._state.get(spawner).kind != "tool":
                raise InvalidMessage("spawned_by", f"node {spawner} is not a tool node")
            payload = normalize_payload(Function(name=name, input=input, expose=expose))  # type: ignore[arg-type]
            node = Node(
                id=new_id(),
                session=self._state.session,
                seq=0,
                at=when,
                payload=payload,
                meta=meta_value,
            )
            edges = self.chain_edges(node.id, parent)
            if spawner is not None:
                edges.append(Edge(spawner, node.id, "spawned"))
            self._commit([node], edges, node.id)
            cursor.heads[parent] = node.id
            cursor.heads[node.id] = node.id
            if frame is None:
                cursor.frames.append(node.id)
        return FunctionHandle(self._reader, node)

    def finish_function(
        self,
        function: FunctionHandle | str,
        *,
        output: Any = None,
        error: BaseException | str | None = None,
        status: str | None = None,
    ) -> Node:
        function_id = function.id if isinstance(function, FunctionHandle) else function
        if isinstance(error, BaseException):
            error = "".join(traceback.format_exception_only(type(error), error)).strip()
        chosen = status or ("error" if error is not None else "completed")
        if chosen not in ("completed", "error", "interrupted"):
            raise InvalidMessage("status", f"{chosen!r} is not completed, error or interrupted")
        with self._lock:
            node = self._state.get(function_id)
            if node.kind != "function":
                raise GraphError(f"node {function_id} is a {node.kind} node, not a function")
            if node.finish is not None:
                raise FunctionFinished(f"function {function_id} already finished ({node.status})")
            finish = Finish(status=chosen, output=output, error=error)  # type: ignore[arg-type]
            self._finish(function_id, finish)
        return self._state.nodes[function_id]

    def _single_pending_tool(self, function: str | None) -> str | None:
        head = self.head_of(Frame(function))
        if head is None:
            return None
        pending = [
            t for t in self._state.tools.get(head, []) if self._state.nodes[t].result is None
        ]
        return pending[0] if len(pending) == 1 else None

    def _finish(self, function_id: str, finish: Finish) -> None:
        cursor = self._cursor
        with self._lock:
            last = cursor.heads.get(function_id) or self._state.frame_head(function_id)
            data = normalize_event(msgspec.structs.replace(finish, last=last))
            if function_id in cursor.frames:
                index = cursor.frames.index(function_id)
                for inner in cursor.frames[index:]:
                    cursor.heads.pop(inner, None)
                cursor.frames = cursor.frames[:index]
                cursor.heads[cursor.frame] = function_id
            else:
                cursor.heads.pop(function_id, None)
            event = Event(
                session=self._state.session,
                seq=0,
                node_id=function_id,
                at=normalize_time(None),
                data=data,
            )
            self._commit([event], [], cursor.head)
