"""Pydantic AI messages converted once: the entries of a message kept while its fields (its
parts' and its usage's too) are those it was converted with.

Pydantic AI sends a run's whole history with each model request, as the very message
objects it holds, so most of a request is the last one's messages again, in the same
order. Those are found in C (``map(operator.is_, …)``) and checked all at once, in C
(``map(vars, …)`` compared with the copies of their fields taken when they were converted),
and their entries reused: no Python call per message. Any other message (the request's
new ones, those of a history whose order changed, one edited in place and those after it)
is looked up by identity and compared on its own, as
:class:`~openprogram.integrations._kept.KeptEntries` does, and converted again when it
changed. Only the last request's messages of each of the last few histories are kept (a
history is known by its first message: each conversation through one capability keeps its
own).
"""

from __future__ import annotations

import bisect
import datetime
import itertools
import operator
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse

from context import equal_prefix, same_prefix
from openprogram.integrations._entry import Entry
from openprogram.integrations._kept import frozen

__all__ = ["KeptMessages", "snapshot", "state"]

_PLAIN = frozenset((str, int, float, bool, type(None), datetime.datetime))
"""Immutable values, shared by a copy (found in C: most fields are of these)."""

_parts = operator.attrgetter("parts")
_usage = operator.attrgetter("usage")


def state(message: ModelMessage) -> list[dict[str, Any]]:
    """What a message's entries are made of: its fields, each part's and its usage's."""
    usage = [vars(message.usage)] if isinstance(message, ModelResponse) else []
    return [vars(message), *map(vars, message.parts), *usage]


def snapshot(message: ModelMessage) -> list[Any]:
    """A copy of :func:`state` that a change in place does not reach, in which the message's
    parts and usage are the very objects (compared by identity, then by the copies of their
    own fields)."""
    try:
        top = dict(vars(message))
        parts, usage = top.pop("parts"), top.pop("usage", None)
        if not _PLAIN.issuperset(map(type, top.values())):
            top = frozen(top)
        top["parts"] = list(parts)
        fields = [top, *[_copy(vars(part)) for part in parts]]
        if usage is not None:
            top["usage"] = usage
            fields.append(_copy(vars(usage)))
    except Exception:  # a value that cannot be copied: converted again every time
        usages = 1 if isinstance(message, ModelResponse) else 0
        return [_NEVER] * (1 + len(message.parts) + usages)
    return fields


def _copy(fields: dict[str, Any]) -> dict[str, Any]:
    """A :func:`frozen` copy of an object's fields."""
    if _PLAIN.issuperset(map(type, fields.values())):
        return fields.copy()
    copied: dict[str, Any] = frozen(fields)
    return copied


class _Never:
    """A copy equal to nothing (of a message whose values could not be copied)."""

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


_NEVER = _Never()


@dataclass
class _Seen:
    """The last request's messages, with what each was converted to and from: per message
    its entries and its copy, and all of them laid end to end (the messages' own fields,
    their parts', their usages'), ``ends`` giving where each message's share ends."""

    messages: list[ModelMessage] = field(default_factory=list)
    flat: list[Entry] = field(default_factory=list)
    """All the messages' entries, in order."""
    entries: list[list[Entry]] = field(default_factory=list)
    copies: list[list[Any]] = field(default_factory=list)
    responses: list[bool] = field(default_factory=list)
    tops: list[Any] = field(default_factory=list)
    parts: list[Any] = field(default_factory=list)
    usages: list[Any] = field(default_factory=list)
    ends: list[tuple[int, int, int]] = field(default_factory=lambda: [(0, 0, 0)])
    """Per message, the number of parts, usages and entries up to it (the first: none)."""

    def unchanged(self, messages: Sequence[ModelMessage]) -> int:
        """How many of ``messages`` (this one's first ones, the same objects) still hold the
        values they were converted with: all of them, checked at once in C, or up to the
        first that changed."""
        count = len(messages)
        try:
            tops = list(map(vars, messages))
            if self.tops[:count] != tops:
                count = equal_prefix(self.tops, tops)
            parts = list(map(vars, itertools.chain.from_iterable(map(_parts, messages[:count]))))
            if self.parts[: self.ends[count][0]] != parts:
                ends = [end[0] for end in self.ends]
                count = bisect.bisect_right(ends, equal_prefix(self.parts, parts)) - 1
            usages = list(
                map(vars, map(_usage, itertools.compress(messages[:count], self.responses)))
            )
            if self.usages[: self.ends[count][1]] != usages:
                ends = [end[1] for end in self.ends]
                count = bisect.bisect_right(ends, equal_prefix(self.usages, usages)) - 1
        except TypeError:  # an object without fields of its own
            return 0
        return count

    def add(self, message: ModelMessage, entries: list[Entry], copy: list[Any]) -> None:
        response = isinstance(message, ModelResponse)
        self.messages.append(message)
        self.flat += entries
        self.entries.append(entries)
        self.copies.append(copy)
        self.responses.append(response)
        self.tops.append(copy[0])
        self.parts += copy[1 : len(copy) - 1] if response else copy[1:]
        if response:
            self.usages.append(copy[-1])
        self.ends.append((len(self.parts), len(self.usages), len(self.flat)))

    def head(self, count: int) -> _Seen:
        """The first ``count`` messages, as a start for the next request's."""
        parts, usages, entries = self.ends[count]
        return _Seen(
            self.messages[:count],
            self.flat[:entries],
            self.entries[:count],
            self.copies[:count],
            self.responses[:count],
            self.tops[:count],
            self.parts[:parts],
            self.usages[:usages],
            self.ends[: count + 1],
        )


class KeptMessages:
    """The entries of Pydantic AI messages, converted by ``convert`` the first time a
    message is seen and again only when it changed (see the module docstring). Histories
    that begin with another message (another conversation through the same capability)
    are kept apart, the last ``histories`` of them."""

    def __init__(self, convert: Callable[[ModelMessage], list[Entry]], histories: int = 8) -> None:
        self._convert = convert
        self._histories = histories
        self._seen: dict[int, _Seen] = {}
        """By the identity of the history's first message, the last used last."""
        self._last = _Seen()
        self._lock = threading.Lock()

    def entries(self, messages: Sequence[ModelMessage]) -> list[Entry]:
        """The entries of ``messages``, in order (the same :class:`Entry` objects as the
        last call for the messages that did not change, their digests with them)."""
        if not messages:
            return []
        key = id(messages[0])
        with self._lock:
            seen = self._seen.get(key)
            if seen is None or not seen.messages or seen.messages[0] is not messages[0]:
                seen = self._last  # a history not seen yet, or a window moved on
        shared = same_prefix(messages, seen.messages)
        if shared:
            shared = seen.unchanged(messages[:shared])
        now = seen.head(shared)
        rest = seen.messages[shared:]
        at = {id(message): shared + index for index, message in enumerate(rest)}
        for message in messages[shared:]:
            index = at.get(id(message))
            if (
                index is not None
                and seen.messages[index] is message
                and seen.copies[index] == state(message)
            ):
                now.add(message, seen.entries[index], seen.copies[index])
            else:
                now.add(message, self._convert(message), snapshot(message))
        with self._lock:
            self._seen.pop(key, None)
            self._seen[key] = self._last = now
            while len(self._seen) > self._histories:
                del self._seen[next(iter(self._seen))]
        return list(now.flat)
