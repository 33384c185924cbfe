"""LangChain messages as chat messages (:func:`to_entries`) and the render's messages as
LangChain messages again (:func:`from_messages`, :class:`Outgoing`).

A plain message (one of the four message classes themselves, with text content) is
converted here as LangChain's ``convert_to_openai_messages`` converts it, without its
general machinery (a test compares the two on generated messages); any other goes through
LangChain's own function.
"""

from __future__ import annotations

import bisect
import json
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
)

from context import same_prefix
from graph import ChatMessage
from openprogram.integrations._entry import Entry, Paired
from openprogram.integrations._kept import frozen

__all__ = [
    "NAME",
    "Outgoing",
    "converted",
    "entries_of",
    "from_messages",
    "plain",
    "snapshot",
    "text",
    "to_entries",
]

NAME = "langchain"
CHAT_KEYS = ("role", "content", "tool_calls", "tool_call_id")
_PLAIN_ROLES: dict[type[BaseMessage], str] = {
    HumanMessage: "user",
    AIMessage: "assistant",
    SystemMessage: "system",
    ToolMessage: "tool",
}
"""The message classes (not their subclasses) converted here, and their OpenAI roles."""
_ATOMS = frozenset((str, int, float, bool, type(None)))


# -- LangChain messages -> chat messages ---------------------------------------------------
def to_entries(messages: Sequence[BaseMessage]) -> list[Entry]:
    """Each message as an :class:`Entry` (``original``: the message itself), converted as
    LangChain's own ``convert_to_openai_messages`` converts it."""
    return [entry for message in messages for entry in entries_of(message)]


def entries_of(message: BaseMessage) -> list[Entry]:
    label = f"{type(message).__name__} id={message.id}" if message.id else ""
    return [Entry(chat_message(message), message, _meta(message), label)]


def _meta(message: BaseMessage) -> dict[str, Any]:
    meta: dict[str, Any] = {NAME: {"id": message.id, "type": message.type}}
    if isinstance(message, AIMessage):
        metadata = message.response_metadata or {}
        meta["model"] = metadata.get("model_name") or metadata.get("model")
        usage = message.usage_metadata
        if usage:
            details = usage.get("input_token_details") or {}
            read = int(details.get("cache_read") or 0)
            written = int(details.get("cache_creation") or 0)
            meta["usage"] = {
                "input": max(0, usage["input_tokens"] - read - written),
                "cache_read": read,
                "cache_creation": written,
                "output": usage["output_tokens"],
            }
    return meta


def chat_message(message: BaseMessage) -> ChatMessage:
    """``message`` as a chat message: :func:`plain`'s when it is one, else
    :func:`converted`'s."""
    return plain(message) or converted(message)


def plain(message: BaseMessage) -> ChatMessage | None:
    """What :func:`converted` gives for a plain message (a ``HumanMessage``, ``AIMessage``,
    ``SystemMessage`` or ``ToolMessage`` itself with ``str`` content and no
    ``__openai_role__``), key for key and in the same order, read from its fields; None for
    any other message."""
    role = _PLAIN_ROLES.get(type(message))
    content = message.content
    extra = message.additional_kwargs
    if role is None or type(content) is not str or "__openai_role__" in extra:
        return None
    chat: dict[str, Any] = {"role": role}
    if role == "assistant" and cast("AIMessage", message).tool_calls:
        chat["tool_calls"] = [
            {
                "type": "function",
                "id": call["id"],
                "function": {
                    "name": call["name"],
                    "arguments": json.dumps(call["args"], ensure_ascii=False),
                },
            }
            for call in cast("AIMessage", message).tool_calls
        ]
    if extra.get("refusal"):
        chat["refusal"] = extra["refusal"]
    if role == "tool":
        chat["tool_call_id"] = cast("ToolMessage", message).tool_call_id
    chat["content"] = (content or None) if role == "assistant" else content
    if role == "tool" and cast("ToolMessage", message).status == "error":
        chat["is_error"] = True
    return cast("ChatMessage", chat)


def converted(message: BaseMessage) -> ChatMessage:
    """``message`` by LangChain's own ``convert_to_openai_messages``: its name left out
    (the graph keeps none), a developer message as a system one, an answer's and a tool
    result's content as their text."""
    chat: dict[str, Any] = dict(convert_to_openai_messages(message))
    chat.pop("name", None)
    role = chat.get("role")
    if role == "developer":
        chat["role"] = "system"
    if role == "assistant":
        chat["content"] = str(message.text) or None
    elif role == "tool":
        chat["content"] = str(message.text)
        if isinstance(message, ToolMessage) and message.status == "error":
            chat["is_error"] = True
    return cast("ChatMessage", chat)


def snapshot(message: BaseMessage) -> dict[str, Any]:
    """The copy :class:`KeptEntries` compares a message's fields with (its default state):
    :func:`frozen`'s, with the immutable values and the empty containers a message mostly
    holds copied without a call each."""
    fields = vars(message)
    copied = fields.copy()
    for key, value in fields.items():
        kind = type(value)
        if kind in _ATOMS:
            continue
        if (kind is dict or kind is list) and not value:
            copied[key] = kind()
        else:
            copied[key] = frozen(value)
    return copied


def text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for block in content or ():
        if isinstance(block, str):
            texts.append(block)
        elif block.get("type") == "text":
            texts.append(str(block.get("text", "")))
    return "\n".join(texts)


# -- rendered chat messages -> LangChain messages ------------------------------------------
def from_messages(paired: Sequence[Paired]) -> list[AnyMessage]:
    """The messages a call goes out with: the state's own objects for what compaction left
    alone, new ones for the rest."""
    names: dict[str, str] = {}
    messages: list[AnyMessage] = []
    for item in paired:
        message = item.message
        for call in message.get("tool_calls") or ():
            names[call["id"]] = call["function"]["name"]
        if item.entry is not None and isinstance(item.entry.original, BaseMessage):
            messages.append(cast("AnyMessage", item.entry.original))
        else:
            messages.append(_new(message, names))
    return messages


_OTHER = object()
"""The key of a pair shown as a new message (its entry is no key: the pair itself is)."""


class Outgoing:
    """One conversation's calls, as :func:`from_messages` gives them but with the render's
    instructions (its system messages without an entry) apart. A pair sends what the same
    pair, or another pair of the same entry, sent at the same place in the last call (a
    message depends only on its pair and the calls before it), so the part of the paired
    list that begins as the last one did, found in C, reuses the last call's messages and
    only the rest is converted."""

    def __init__(self) -> None:
        self._last = _Sent([], [], [], [0], [], [])

    def messages(self, paired: Sequence[Paired]) -> tuple[str, list[AnyMessage]]:
        """The instructions (joined) and the messages the call goes out with."""
        last = self._last  # (replaced whole: a concurrent call reads one call's or the other's)
        shared = _shared(paired, last)
        instructions = last.instructions[: bisect.bisect_left(last.instructions, (shared,))]
        calls = last.calls[: bisect.bisect_left(last.calls, (shared,))]
        names = {call_id: name for _, call_id, name in calls}
        messages = last.messages[: last.sent[shared]]
        sent, entries = last.sent[: shared + 1], last.entries[:shared]
        for at in range(shared, len(paired)):
            item = paired[at]
            message, entry = item.message, item.entry
            for call in message.get("tool_calls") or ():
                names[call["id"]] = call["function"]["name"]
                calls.append((at, call["id"], call["function"]["name"]))
            if entry is not None and isinstance(entry.original, BaseMessage):
                messages.append(cast("AnyMessage", entry.original))
                entries.append(entry)
            else:
                entries.append(_OTHER)
                if entry is None and message.get("role") == "system":
                    instructions.append((at, text(message.get("content"))))
                else:
                    messages.append(_new(message, names))
            sent.append(len(messages))
        self._last = _Sent(list(paired), entries, messages, sent, instructions, calls)
        return "\n\n".join(part for _, part in instructions), list(messages)


def _shared(paired: Sequence[Paired], last: _Sent) -> int:
    """How many pairs at the start are the last call's or show the same entry at the same
    place (compared in C: the same pairs first, the entries after the first other pair)."""
    shared = same_prefix(paired, last.paired)
    if shared == min(len(paired), len(last.paired)):
        return shared
    rest = paired[shared:]
    same = list(
        map(
            operator.or_,
            map(operator.is_, rest, last.paired[shared:]),
            map(operator.is_, map(_ENTRY, rest), last.entries[shared:]),
        )
    )
    try:
        return shared + same.index(False)
    except ValueError:
        return shared + len(same)


class _Sent(NamedTuple):
    """What one call sent, by the position of each pair."""

    paired: list[Paired]
    entries: list[Any]
    """Each pair's entry where it sends the entry's message, else ``_OTHER``."""
    messages: list[AnyMessage]
    sent: list[int]
    """How many messages the pairs before each position give (the instructions none)."""
    instructions: list[tuple[int, str]]
    """The instructions' positions and texts."""
    calls: list[tuple[int, str, str]]
    """Each tool call's position, id and name (the names of the results after it)."""


_ENTRY = operator.attrgetter("entry")


def _new(message: ChatMessage, names: dict[str, str]) -> AnyMessage:
    """A message compaction made or changed, by LangChain's own ``convert_to_messages``."""
    chat: dict[str, Any] = {key: value for key, value in message.items() if key in CHAT_KEYS}
    chat["content"] = chat.get("content") or ""
    if chat.get("role") == "tool" and chat.get("tool_call_id") in names:
        chat["name"] = names[chat["tool_call_id"]]
    return cast("AnyMessage", convert_to_messages([chat])[0])
