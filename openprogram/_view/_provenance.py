"""Where each message of a prompt came from, in rows the prompt page shows: read from the
sources its render kept (a receipt written before sources names a tool output's node by
its call id, nothing else)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from context import ContextEngine, MessageSource, Rendered, TokenCounter
from graph import ChatMessage, ConversationGraph, LayerInfo, text_of
from openprogram._reports._prompts import part_of, sources_of


@dataclass(frozen=True)
class PromptRow:
    """One message of a prompt as sent, where it came from and its tokens."""

    index: int
    role: str
    kind: str
    tokens: int
    source: str
    node: str | None
    layer: str | None
    text: str
    variant: str | None = None
    """How the node is shown (``offloaded``: its output is in a file), from the source."""


def message_text(message: ChatMessage) -> str:
    """A message's text, its tool calls written out after it (as a reader sees them)."""
    text = text_of(message.get("content"))
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        text += f"\n→ {function.get('name')}({function.get('arguments', '')})"
    return text


def provenance(
    graph: ConversationGraph,
    rendered: Rendered,
    engine: ContextEngine,
    *,
    count: Callable[[ChatMessage, TokenCounter], int] | None = None,
) -> Iterator[PromptRow]:
    """Each message with where its render said it came from: a node (whole, or a
    placeholder for it), a layer, or a note the cascade wrote; a receipt written before
    sources were kept names a tool output's node by its call id, nothing else.
    ``count``: how a message's tokens are counted (default: the engine's counter)."""
    from graph import function_call_id

    counter = engine.counter
    by_call: dict[str, str] = {}
    sources = sources_of(rendered)
    if not any(sources):
        for stored in graph.nodes():
            if stored.kind == "tool":
                by_call[stored.payload.call_id] = stored.id  # type: ignore[union-attr]
            elif stored.kind == "function":
                by_call[function_call_id(stored)] = stored.id
    for index, (message, source) in enumerate(zip(rendered.messages, sources, strict=True)):
        node: str | None = None
        if source is None:
            node = by_call.get(str(message.get("tool_call_id")))
            said = f"node {node}" if node else "not known (a receipt written before sources)"
        else:
            node = source.nodes[0] if source.nodes else None
            said = _said(source, node)
        yield PromptRow(
            index,
            str(message.get("role")),
            part_of(message, source),
            counter.count_message(message) if count is None else count(message, counter),
            said,
            node if node is not None and node in graph else None,
            None if source is None else source.layer,
            message_text(message),
            None if source is None else source.variant,
        )


def _said(source: MessageSource, node: str | None) -> str:
    """Where a message came from, in words, from its source."""
    if source.layer is not None:
        return f"{source.tier or 'layer'} layer {source.layer}"
    if source.unit == "note" or source.unit == "stub":
        return f"note ({source.tier}: dropped rounds)"
    if node is None:
        return f"added by {source.tier}" if source.tier else "written by the engine"
    if source.current:
        return f"the current request, node {node}"
    if source.tier is not None:
        return f"node {node}, {source.variant} ({source.tier})"
    return f"node {node}"


def shown_in(rendered: Rendered, layers: Sequence[LayerInfo]) -> dict[str, str]:
    """How a prompt shows each node it holds, from its sources: ``shown``, ``offloaded``,
    another placeholder's variant, or the layer over it (each layer walked once, not once
    per message it shows)."""
    covers = {x.id: x.covers for x in layers}
    found: dict[str, str] = {}
    under: dict[str, None] = {}
    for source in sources_of(rendered):
        if source is None:
            continue
        if source.layer is not None:
            under.setdefault(source.layer)
            continue
        for node in source.nodes:
            if source.variant == "offloaded":
                found[node] = "offloaded"
            elif source.placeholder:
                found.setdefault(node, f"shown {source.variant}")
            else:
                found.setdefault(node, "shown")
    for layer in under:
        said = f"under layer {layer}"
        for node in covers.get(layer, ()):
            found.setdefault(node, said)
    return found
