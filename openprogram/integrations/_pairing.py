"""A render's messages paired with the framework entries they show unchanged, so that an
adapter sends the framework's own objects for what compaction left alone.

A render hands back the very message objects of the last one for what did not change, so
the pairs of the start both share are the last call's: it is found in C (the messages by
identity, their sources by the fields pairing reads), and only the messages after it are
paired one by one."""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from context import MessageSource, Rendered, equal_prefix, same_prefix
from graph import ChatMessage
from openprogram.integrations._calls import FrameworkIds
from openprogram.integrations._entry import Entry, Paired, other_ids

__all__ = ["Pairing"]

_KEY = operator.attrgetter("nodes", "variant", "merged", "layer")
"""What pairing reads of a message's source (its render id aside)."""
_NODE = operator.attrgetter("node")
_DIGEST = operator.attrgetter("digest")
_MESSAGE, _LAYER = operator.itemgetter(0), operator.itemgetter(2)


class Step(Protocol):
    """What the mirror wrote for one entry: its node, and the graph call ids of each of the
    framework's call ids."""

    @property
    def node(self) -> str: ...

    @property
    def calls(self) -> dict[str, list[str]]: ...


@dataclass
class _Last:
    """The last call's inputs and pairs, and per message what pairing it changed: where
    its pairs start (``out``), how many nodes were taken before it (``took``), how far
    the call ids' logs were (``used``, ``assigned``), and the highest entry position
    paired before it (``top``); each list has one more element for the end."""

    messages: list[ChatMessage]
    keys: list[Any]
    entries: list[Entry]
    path: list[Step]
    system: tuple[list[ChatMessage], set[str]]
    framework_ids: dict[str, str]
    ids: FrameworkIds
    paired: list[Paired] = field(default_factory=list)
    at: list[int] = field(default_factory=list)
    """The entry position of each pair (-1: none)."""
    taken: list[str] = field(default_factory=list)
    out: list[int] = field(default_factory=list)
    took: list[int] = field(default_factory=list)
    used: list[int] = field(default_factory=list)
    assigned: list[int] = field(default_factory=list)
    top: list[int] = field(default_factory=list)


class Pairing:
    """Pairs each render's messages with the entries they show (see :meth:`pair`),
    reusing the last call's pairs for the start both renders share."""

    def __init__(self) -> None:
        self._last: _Last | None = None

    def pair(
        self,
        rendered: Rendered,
        entries: Sequence[Entry],
        path: Sequence[Step],
        system: tuple[list[ChatMessage], set[str]],
    ) -> list[Paired]:
        """Each rendered message with the entry (of ``entries``, written as ``path``) it
        shows unchanged: its source names the entry's node, shown in full by no tier (never
        a comparison of texts); each node is shown by one message at most. ``system``: the
        current instructions and the superseded ones' nodes (counted in the budget, never
        sent: the framework sends the new ones)."""
        messages = list(rendered.messages)
        sources: Sequence[MessageSource] = rendered.sources
        if len(sources) != len(messages):  # no sources: nothing is paired
            sources = [MessageSource()] * len(messages)
        keys = list(map(_KEY, sources))
        entries, path = list(entries), list(path)
        last = self._last
        framework_ids = _framework_ids(path, last)
        now = _Last(messages, keys, entries, path, system, framework_ids, FrameworkIds({}))
        start = self._reusable(now, last) if last is not None else 0
        if last is not None and start:
            start = self._reuse(now, last, start)
        else:
            now.ids = FrameworkIds(framework_ids)
            for name in ("out", "took", "used", "assigned"):
                getattr(now, name).append(0)
            now.top.append(-1)
        self._rest(now, sources, start)
        self._last = now
        return list(now.paired)

    @staticmethod
    def _reusable(now: _Last, last: _Last) -> int:
        """How many of the first messages are paired as the last call paired them: the
        same objects, from the same sources, under the same instructions and call ids,
        showing entries of the path both calls share."""
        if now.framework_ids is not last.framework_ids or now.system != last.system:
            return 0
        start = same_prefix(now.messages, last.messages)
        start = equal_prefix(now.keys[:start], last.keys[:start])
        shown = min(same_prefix(now.path, last.path), len(now.entries), len(last.entries))
        # the last message before which every pair shows an entry of the shared path
        return min(start, bisect.bisect_left(last.top, shown, 0, start + 1) - 1)

    @staticmethod
    def _reuse(now: _Last, last: _Last, start: int) -> int:
        """Take the last call's pairs of the first ``start`` messages (each pointed at this
        call's entry where the entries are other objects holding the same); how many
        messages that covers."""
        same = same_prefix(now.entries, last.entries)
        end = last.top[start] + 1
        if end > same:  # other entry objects: where they hold another message, stop before
            digests = list(map(_DIGEST, now.entries[same:end]))
            changed = same + equal_prefix(digests, list(map(_DIGEST, last.entries[same:end])))
            start = min(start, bisect.bisect_left(last.top, changed, 0, start + 1) - 1)
        count = last.out[start]
        paired, at = last.paired[:count], last.at[:count]
        moved = [n for n, position in enumerate(at) if position >= same]
        if moved:  # the last pairs, pointed at this call's entries (made in C)
            pairs = list(map(paired.__getitem__, moved))
            shown = map(now.entries.__getitem__, map(at.__getitem__, moved))
            fields = zip(map(_MESSAGE, pairs), shown, map(_LAYER, pairs), strict=True)
            made = map(tuple.__new__, itertools.repeat(Paired), fields)
            for n, pair in zip(moved, made, strict=True):
                paired[n] = pair
        now.paired, now.at = paired, at
        now.taken = last.taken[: last.took[start]]
        for name in ("out", "took", "used", "assigned", "top"):
            setattr(now, name, getattr(last, name)[: start + 1])
        now.ids = FrameworkIds.resumed(
            now.framework_ids,
            last.ids.used_log[: last.used[start]],
            last.ids.assigned_log[: last.assigned[start]],
        )
        return start

    @staticmethod
    def _rest(now: _Last, sources: Sequence[MessageSource], start: int) -> None:
        """Pair the messages from ``start`` on, one by one."""
        if start == len(now.messages):
            return
        entries, ids = now.entries, now.ids
        instructions, superseded = now.system
        by_node = dict(zip(map(_NODE, now.path), range(len(entries)), strict=False))
        taken = set(now.taken)
        top = now.top[-1]
        for message, source in zip(now.messages[start:], sources[start:], strict=True):
            node = source.nodes[0] if len(source.nodes) == 1 else None
            role = message.get("role")
            if not (role == "system" and node in superseded and message not in instructions):
                position = -1
                if node is not None and source.verbatim and node not in taken:
                    position = by_node.get(node, -1)
                    if position >= 0:
                        taken.add(node)
                        now.taken.append(node)
                        top = max(top, position)
                shows = entries[position] if position >= 0 else None
                if shows is not None and shows.message.get("role") != role:
                    shows = None
                if role == "tool" or message.get("tool_calls"):
                    message = ids.map(message)
                    if shows is not None and other_ids(message, shows.message):
                        shows = None  # its framework ids would repeat one: a new message
                elif shows is not None and shows.message.get("tool_calls"):
                    shows = None  # the entry's calls would go unsent: a new message
                now.paired.append(Paired(message, shows, source.layer))
                now.at.append(position if shows is not None else -1)
            now.out.append(len(now.paired))
            now.took.append(len(now.taken))
            now.used.append(len(ids.used_log))
            now.assigned.append(len(ids.assigned_log))
            now.top.append(top)


def _framework_ids(path: list[Step], last: _Last | None) -> dict[str, str]:
    """The framework's call id of each graph call id the path's steps made (a graph id not
    in it is the framework's own): the last call's very map when it maps every id as this
    path's would, which a path that extends the last one tells from its new steps alone."""
    if last is None:
        return _mapped(path)
    old = last.framework_ids
    if same_prefix(path, last.path) == len(last.path):
        added = _mapped(path[len(last.path) :])
        if all(old.get(graph_id, graph_id) == mine for graph_id, mine in added.items()):
            return old
        return {**old, **added}
    mapped = _mapped(path)
    return old if mapped == old else mapped


def _mapped(path: Sequence[Step]) -> dict[str, str]:
    framework_ids: dict[str, str] = {}
    for step in path:
        for framework_id, graph_ids in step.calls.items():
            for graph_id in graph_ids:
                framework_ids[graph_id] = framework_id
    return framework_ids
