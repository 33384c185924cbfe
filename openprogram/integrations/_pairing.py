"""A render's messages paired with the framework entries they show unchanged, so that an
adapter sends the framework's own objects for what compaction left alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from context import MessageSource, Rendered
from graph import ChatMessage
from openprogram.integrations._calls import FrameworkIds
from openprogram.integrations._entry import Entry, Paired, other_ids

__all__ = ["pair"]


class Step(Protocol):
    """What the mirror wrote for one entry: its node, and the graph call ids of each of the
    framework's call ids."""

    @property
    def node(self) -> str: ...

    @property
    def calls(self) -> dict[str, list[str]]: ...


def pair(
    rendered: Rendered,
    entries: Sequence[Entry],
    path: Sequence[Step],
    system: tuple[list[ChatMessage], set[str]],
    last: dict[int, Paired],
) -> tuple[list[Paired], dict[int, Paired]]:
    """Each rendered message with the entry (of ``entries``, written as ``path``) it shows
    unchanged: its source names the entry's node, shown in full by no tier (never a
    comparison of texts). ``system``: the current instructions and the superseded ones'
    nodes (counted in the budget, never sent: the framework sends the new ones). ``last``:
    the pairs of the last render's messages without call ids, by the message's identity (a
    render hands back the same message objects for what did not change), kept when their
    entry is the same; returned with the pairs for the next call."""
    instructions, superseded = system
    by_node = dict(zip([step.node for step in path], entries, strict=False))
    framework_ids: dict[str, str] = {}
    for step in path:
        for framework_id, graph_ids in step.calls.items():
            for graph_id in graph_ids:
                framework_ids[graph_id] = framework_id
    ids = FrameworkIds(framework_ids)
    sources: Sequence[MessageSource] = rendered.sources
    if len(sources) != len(rendered.messages):  # no sources: nothing is paired
        sources = [MessageSource()] * len(rendered.messages)
    kept: dict[int, Paired] = {}
    paired = []
    for message, source in zip(rendered.messages, sources, strict=True):
        node = source.nodes[0] if len(source.nodes) == 1 else None
        role = message.get("role")
        if role == "system" and node in superseded and message not in instructions:
            continue
        shows = by_node.pop(node, None) if node is not None and source.verbatim else None
        if shows is not None and shows.message.get("role") != role:
            shows = None
        if role == "tool" or message.get("tool_calls"):
            mapped = ids.map(message)
            if shows is not None and other_ids(mapped, shows.message):
                shows = None  # its framework ids would repeat one: sent as a new message
            paired.append(Paired(mapped, shows, source.layer))
            continue
        before = last.get(id(message))
        if before is None or before.message is not message or before.entry is not shows:
            if shows is not None and shows.message.get("tool_calls"):
                shows = None  # the entry's calls would go unsent: a new message
            before = Paired(message, shows, source.layer)
        elif before.layer != source.layer:
            before = Paired(message, shows, source.layer)
        kept[id(message)] = before
        paired.append(before)
    return paired, kept
