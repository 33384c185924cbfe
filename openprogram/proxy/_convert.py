"""A request's messages as the mirror's entries, converted once per message.

Every request of a conversation carries the whole history again. A conversation keeps
its last conversion, and a request converts only the messages after the part it shares
with the last one (compared as parsed JSON, which costs far less than converting).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from graph import ToolSchema
from openprogram.integrations._mirror import Entry

__all__ = ["Converted", "convert"]

EntriesOf = Callable[[int, object], list[Entry]]


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


def convert(
    messages: Sequence[object], entries_of: EntriesOf, previous: Converted | None, offset: int = 0
) -> tuple[list[Entry], list[list[Entry]]]:
    """The entries of ``messages`` (each by ``entries_of(index, message)``), reusing
    ``previous``'s for the messages they share from the start."""
    parts: list[list[Entry]] = []
    shared = 0
    if previous is not None:
        old = previous.messages
        limit = min(len(old), len(messages))
        while shared < limit and old[shared] == messages[shared]:
            shared += 1
        parts.extend(previous.parts[:shared])
    for index in range(shared, len(messages)):
        parts.append(entries_of(offset + index, messages[index]))
    return [entry for part in parts for entry in part], parts


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
