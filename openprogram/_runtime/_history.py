"""Tools the model calls to read what the context cascade put away.

Every placeholder a tier writes names one of these and the id it takes:
``read_output`` (offloaded, reduced, cleared or cut outputs), ``read_history`` (snipped
rounds), ``expand_layer`` (a collapse or compaction), ``expand_function`` (a finished
function's internals) — plus ``inspect_node`` and ``search_history`` over the whole
session. A bad id is a tool error the model reads, never an exception in the loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import PurePath
from typing import Any, Protocol

from context import HISTORY_TOOLS, ContextEngine, Policy, output_redactor
from graph import (
    ChatMessage,
    ConversationGraph,
    Dialogue,
    Function,
    Node,
    Tool,
    as_text,
    layer_handle,
    node_handle,
    resolve_ref,
    steps_to_messages,
    text_of,
)
from openprogram._runtime._tools import ToolSpec

__all__ = [
    "HISTORY_TOOLS",
    "READ_LIMIT",
    "HistorySource",
    "HistoryTools",
    "messages_text",
    "node_text",
]

READ_LIMIT = 8_000
"""Characters one read returns at most (under the offload threshold, so what the model
asked for is what it sees); the answer says where the next read starts."""


def messages_text(messages: list[ChatMessage]) -> str:
    """Messages as plain text a model reads (role, calls, results)."""
    lines = []
    for message in messages:
        role = message.get("role", "?")
        text = text_of(message.get("content"))
        if role == "tool":
            lines.append(f"[tool result {message.get('tool_call_id')}] {text}")
            continue
        if text:
            lines.append(f"[{role}] {text}")
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            lines.append(f"[{role} calls {function.get('name')}] {function.get('arguments')}")
    return "\n".join(lines)


def node_text(node: Node) -> str:
    """The whole text a node holds: a message's content, a tool's result, a function's output."""
    payload = node.payload
    if isinstance(payload, Dialogue):
        return text_of(payload.content)
    if isinstance(payload, Tool):
        return "" if node.result is None else text_of(node.result.content)
    assert isinstance(payload, Function)
    if node.finish is None:
        return ""
    return as_text(node.finish.output) if node.finish.error is None else node.finish.error


def _page(text: str, offset: int, limit: int, how: str) -> str:
    limit = max(1, min(limit, READ_LIMIT))
    offset = max(0, offset)
    piece = text[offset : offset + limit]
    end = offset + len(piece)
    if end < len(text):
        return f"{piece}\n[... {len(text) - end} more characters; {how.format(offset=end)}]"
    return piece


class HistorySource(Protocol):
    """What the history tools read of a session: its graph, and the engine and policy it
    renders with (a session, or the MCP server's reader of a stored one)."""

    @property
    def graph(self) -> ConversationGraph: ...

    @property
    def engine(self) -> ContextEngine: ...

    @property
    def policy(self) -> Policy: ...


class HistoryTools:
    """The six history tools, bound to one session."""

    def __init__(self, session: HistorySource) -> None:
        self.session = session

    def _clean(self, text: str) -> str:
        """``text`` redacted when the policy asks for redacted outputs (whole, before it is
        paged, so a key never straddles two reads)."""
        redactor = output_redactor(self.session.policy, self.session.graph)
        return text if redactor is None else redactor.redact(text)

    def _resolve(self, ref: str) -> str:
        """The stored id a reference names: a node or layer id, a handle as prompts show
        them (``n42``, a finished function's call ``fn_42``, a layer ``L3``), an older
        prompt's ``fn_<id>``, or an offload file's path. Anything else comes back as it
        was (an id this session does not hold)."""
        ref = ref.strip().strip("\"'")
        candidates = [ref]
        if "/" in ref or "\\" in ref or ref.endswith(".txt"):
            candidates.append(PurePath(ref.replace("\\", "/")).stem)
        graph = self.session.graph
        for attempt in range(2):
            for candidate in candidates:
                found = resolve_ref(graph.state, candidate)
                if found is not None:
                    return found
            if attempt == 0:
                graph.refresh()
        return ref

    def _node(self, node_id: str) -> Node:
        resolved = self._resolve(node_id)
        graph = self.session.graph
        if resolved not in graph:
            raise ValueError(f"no node {node_id!r} in this session; search_history finds ids")
        return graph.get(resolved)

    def inspect_node(self, id: str) -> str:
        """Show one node of the conversation graph: its kind, status, content and links.

        Args:
            id: the node id (as placeholders and notes name it)
        """
        node = self._node(id)
        graph = self.session.graph
        info: dict[str, Any] = {"node": node_handle(node), "kind": node.kind}
        payload = node.payload
        if isinstance(payload, Dialogue):
            info["role"] = payload.role
        elif isinstance(payload, Tool):
            info.update(tool=payload.name, arguments=payload.arguments, status=node.status)
        else:
            info.update(function=payload.name, input=payload.input, status=node.status)
        caller = graph.caller(node.id)
        if caller is not None:
            info["caller"] = node_handle(caller)
        layers = [layer_handle(i) for i in graph.layers(active=True) if node.id in i.covers]
        if layers:
            info["layers"] = layers
        text = self._clean(node_text(node))
        info["chars"] = len(text)
        head = self._clean(json.dumps(info, ensure_ascii=False, default=str))
        how = 'read_output("' + node_handle(node) + '", offset={offset})'
        return f"{head}\n{_page(text, 0, 4_000, how)}"

    def read_output(self, id: str, offset: int = 0, limit: int = READ_LIMIT) -> str:
        """Read the full text of a node — an offloaded, reduced or cleared tool output, a
        function's output or a message — from ``offset``, at most 8,000 characters a time.

        Args:
            id: the node id a placeholder names
            offset: the first character to return
            limit: how many characters to return at most (8,000 at most)
        """
        node = self._node(id)
        again = self._history_call(node)
        if again is not None:
            return again(offset)
        how = f'read_output("{node_handle(node)}", offset={{offset}})'
        page = _page(self._clean(node_text(node)), offset, limit, how)
        if limit > READ_LIMIT:
            return f"[one read returns at most {READ_LIMIT:,} characters]\n{page}"
        return page

    def _history_call(self, node: Node) -> Callable[[int], str] | None:
        """For the result of a history tool, the call that reads what it read, from an
        offset: reading the result itself could be cut again and point back at itself."""
        payload = node.payload
        if not isinstance(payload, Tool) or payload.name not in HISTORY_TOOLS:
            return None
        try:
            args = json.loads(payload.arguments or "{}")
        except json.JSONDecodeError:
            return None
        if not isinstance(args, dict) or payload.name == "search_history":
            return None
        tool = getattr(self, payload.name)
        if payload.name == "inspect_node":
            tool, args = self.read_output, {"id": args.get("id", "")}

        def read(offset: int) -> str:
            call = {**args, "offset": offset}
            what = f"node {node_handle(node)} is what {payload.name} returned"
            note = f"[{what}; read again from the source]"
            return f"{note}\n{tool(**call)}"

        return read

    def read_history(self, first: str, last: str, offset: int = 0) -> str:
        """Read earlier rounds removed to fit the context, from node ``first`` to ``last``.

        Args:
            first: the first node id the removal note names
            last: the last node id the removal note names
            offset: the first character to return (a long range is read in pieces)
        """
        start, end = self._node(first), self._node(last)
        graph = self.session.graph
        head = end.id if end.kind != "tool" else graph.state.requested_by[end.id]
        steps = graph.visible(head=head, expose="io")
        ids = [step.node.id for step in steps]
        if start.id not in ids:
            raise ValueError(f"node {first} does not come before {last} in the conversation")
        chosen = steps[ids.index(start.id) :]
        how = f'read_history("{node_handle(start)}", "{node_handle(end)}", offset={{offset}})'
        return _page(self._clean(messages_text(steps_to_messages(chosen))), offset, READ_LIMIT, how)

    def expand_function(self, id: str, depth: int = 1, offset: int = 0) -> str:
        """Show a finished function's internals as they were seen inside it while it ran.

        Args:
            id: the function node id
            depth: 1 shows nested functions by their input and output, 2 or more opens them
            offset: the first character to return (long internals are read in pieces)
        """
        node = self._node(id)
        if node.kind != "function":
            raise ValueError(f"node {id} is a {node.kind} node, not a function")
        messages = self.session.engine.expand(node.id, depth=depth)
        how = f'expand_function("{node_handle(node)}", depth={depth}, offset={{offset}})'
        return _page(self._clean(messages_text(messages)), offset, READ_LIMIT, how)

    def expand_layer(self, id: str, offset: int = 0) -> str:
        """Show the original messages under a collapsed segment or a compaction.

        Args:
            id: the layer id its summary names
            offset: the first character to return (a long segment is read in pieces)
        """
        engine = self.session.engine
        layer = engine.layer(self._resolve(id))
        messages = engine.expand(layer.id)
        how = f'expand_layer("{layer_handle(layer)}", offset={{offset}})'
        return _page(self._clean(messages_text(messages)), offset, READ_LIMIT, how)

    def search_history(self, query: str, limit: int = 20) -> str:
        """Search the whole session — collapsed, snipped and offloaded parts included — for
        nodes whose text holds every word of ``query``; newest first.

        Args:
            query: words to find (case-insensitive)
            limit: how many matches to list at most
        """
        words = [w for w in query.lower().split() if w]
        if not words:
            raise ValueError("the query is empty")
        hits = []
        for node in reversed(self.session.graph.nodes()):
            text = self._clean(node_text(node))
            lowered = text.lower()
            if all(word in lowered for word in words):
                at = lowered.find(words[0])
                snippet = " ".join(text[max(0, at - 80) : at + 160].split())
                label = node.role or (
                    node.payload.name if not isinstance(node.payload, Dialogue) else ""
                )
                hit = f"- {node_handle(node)} ({node.kind} {label}): …{snippet}…"
                hits.append(self._clean(hit))
                if len(hits) >= max(1, limit):
                    break
        return "\n".join(hits) if hits else f"no node holds all of: {', '.join(words)}"

    def specs(self) -> list[ToolSpec]:
        return [ToolSpec(getattr(self, name), name) for name in HISTORY_TOOLS]
