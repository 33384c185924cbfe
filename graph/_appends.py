"""Chat messages appended to a live graph: a message becomes a dialogue node on its frame's
chain and a pending tool node per call it requests; a ``tool`` message becomes a result
event on the pending tool node its ``tool_call_id`` names."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ._codec import is_plain, normalize_event, normalize_meta, normalize_payload, normalize_time
from ._cursor import Commit, Cursor
from ._errors import DuplicateToolResult, InvalidMessage, UnknownToolCall
from ._functions import Frame, FunctionWriter
from ._ids import new_id
from ._messages import ParsedResult, parse_message, stored_fields
from ._nodes import Edge, Event, EventData, Node, Payload, Tool
from ._reader import GraphReader


class MessageWriter:
    """Appends the chat messages of one live graph: it reads through ``reader`` (the
    graph), puts nodes on the chains ``functions`` keeps and writes through ``commit``."""

    def __init__(
        self,
        reader: GraphReader,
        cursor: Cursor,
        lock: threading.RLock,
        commit: Commit,
        functions: FunctionWriter,
        refresh: Callable[[], None],
    ) -> None:
        self._state = reader.state
        self._cursor = cursor
        self._lock = lock
        self._commit = commit
        self._functions = functions
        self._refresh = refresh

    def append(
        self,
        message: Mapping[str, object],
        *,
        at: Any = None,
        meta: dict[str, Any] | None = None,
        frame: Frame | None = None,
    ) -> Node:
        """The dialogue node of ``message`` (and a tool node per call it requests), or the
        tool node a ``tool`` message's result went to (see ``ConversationGraph.append``)."""
        parsed = parse_message(message)  # walks nothing recursively (json.dumps is guarded)
        when = normalize_time(at)
        meta_value = {} if meta is None else normalize_meta(meta)
        with self._lock:
            if isinstance(parsed, ParsedResult):
                return self._append_result(parsed, when, message)
            functions = self._functions
            function = functions.where(frame)
            if function is not None:
                functions.check_open(function)
            dialogue: Payload = parsed.dialogue
            if not is_plain(dialogue):
                dialogue = normalize_payload(dialogue, "message", stored_fields(message))
            session = self._state.session
            node = Node(
                id=new_id(), session=session, seq=0, at=when, payload=dialogue, meta=meta_value
            )
            records: list[Node | Event] = [node]
            edges = functions.chain_edges(node.id, function)
            for call in parsed.calls:
                if call.call_id in self._state.pending:
                    raise InvalidMessage(
                        "tool_calls", f"call id {call.call_id!r} is already pending in this session"
                    )
                tool = Node(
                    id=new_id(),
                    session=session,
                    seq=0,
                    at=when,
                    payload=normalize_payload(
                        call, "tool_calls", message.get("tool_calls"), deep_ok=True
                    ),
                )
                records.append(tool)
                edges.append(Edge(node.id, tool.id, "requested"))
                if function is not None:
                    edges.append(Edge(function, tool.id, "caller"))
            stored = self._commit(records, edges, node.id)
            self._cursor.heads[function] = node.id
            return self._state.nodes[stored[0].id]

    def _append_result(
        self, parsed: ParsedResult, when: datetime, message: Mapping[str, object]
    ) -> Node:
        tool_id = self._state.pending.get(parsed.call_id)
        if tool_id is None:
            self._refresh()
            tool_id = self._state.pending.get(parsed.call_id)
        if tool_id is None:
            answered = [
                n
                for n in self._state.nodes.values()
                if isinstance(n.payload, Tool) and n.payload.call_id == parsed.call_id
            ]
            if answered:
                raise DuplicateToolResult(
                    f"tool_call_id {parsed.call_id!r}: node {answered[-1].id} has a result already"
                )
            raise UnknownToolCall(
                f"tool_call_id {parsed.call_id!r} matches no pending tool call in session "
                f"{self._state.session!r}"
            )
        result: EventData = parsed.result
        if not is_plain(result):
            result = normalize_event(result, "message", {"content": message.get("content")})
        event = Event(session=self._state.session, seq=0, node_id=tool_id, at=when, data=result)
        self._commit([event], [], self._cursor.head)
        return self._state.nodes[tool_id]
