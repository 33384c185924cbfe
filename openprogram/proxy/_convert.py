"""A request's messages as the mirror's entries, converted once per message.

Every request of a conversation carries the whole history again. A conversation keeps
its last conversion, and a request converts only the messages after the part it shares
with the last one. The shared part is found without a Python loop over the history: list
comparisons in C, which pass over the same objects by identity (``_kept_bodies`` hands a
later body the very objects it decoded before) and compare the others as parsed JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from context import equal_prefix
from graph import ToolSchema
from openprogram.integrations._mirror import Entry

__all__ = ["Converted", "Made", "convert"]

EntriesOf = Callable[[int, object], list[Entry]]
T = TypeVar("T")
M = TypeVar("M")


@dataclass(frozen=True)
class Converted:
    """A request as the mirror takes it: entries, tool schemas, instructions; and the
    messages each part of the entries came from (for the next request's reuse)."""

    entries: list[Entry]
    tools: list[ToolSchema]
    system: str | None
    first_user: str
    messages: Sequence[object] = ()
    parts: Sequence[list[Entry]] = ()
    items: Sequence[object] = ()
    """The client's items the messages were grouped from (when a message is a run of them)."""
    ends: Sequence[int] = ()
    """Where each message's items end in ``items``."""


class Made:
    """What a conversation's last request built for the messages compaction made, kept by
    message: while its layers stand, the render hands the very same message objects again
    (the engine never changes a message it rendered), so each is built once."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[object, object]] = {}
        self._now: dict[int, tuple[object, object]] = {}

    def get(self, message: M, build: Callable[[M], T]) -> T:
        """What ``build`` makes of ``message`` (the last request's, for the same object)."""
        found = self._last.get(id(message))
        value: T = found[1] if found is not None and found[0] is message else build(message)  # type: ignore[assignment]
        self._now[id(message)] = (message, value)
        return value

    def done(self) -> None:
        """A request was built: only its messages are kept for the next."""
        self._last, self._now = self._now, {}


def convert(
    messages: Sequence[object], entries_of: EntriesOf, previous: Converted | None, offset: int = 0
) -> tuple[list[Entry], list[list[Entry]]]:
    """The entries of ``messages`` (each by ``entries_of(index, message)``), reusing
    ``previous``'s for the messages they share from the start."""
    parts: list[list[Entry]] = []
    entries: list[Entry] = []
    shared = 0
    if previous is not None:
        shared = equal_prefix(previous.messages, messages)
        parts.extend(previous.parts[:shared])
        whole = shared == len(previous.parts)
        entries.extend(previous.entries if whole else previous.entries[: sum(map(len, parts))])
    for index in range(shared, len(messages)):
        part = entries_of(offset + index, messages[index])
        parts.append(part)
        entries.extend(part)
    return entries, parts


def first_user(entries: Sequence[Entry]) -> str:
    return next((str(e.message["content"]) for e in entries if e.message["role"] == "user"), "")


def plain_text(content: object) -> str:
    """An OpenAI content value (a string, or a list of parts) as the text the mirror
    stores: text parts joined by lines, any other part named by its type."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(text := part.get("text"), str):
                parts.append(text)
            elif isinstance(part, dict):
                parts.append(f"[{part.get('type')}]")
        return "\n".join(parts)
    return str(content)
