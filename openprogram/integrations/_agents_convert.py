"""The Agents SDK's items as the chat messages the graph stores, and back (used by
``openai_agents``).

Items are converted by the SDK's own ``Converter.items_to_messages``, so the calls of one
turn are one assistant message, as the model sent them; a text message alone (what the
converter takes as an easy message, its content a string) is converted without it, to the
very message it would make (most of a stored list: a session made over one converts it
whole). Back, a call goes out with the SDK's own items for what compaction left alone and
new items for the rest.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any, Literal, cast

from agents.exceptions import UserError
from agents.items import TResponseInputItem
from agents.models.chatcmpl_converter import Converter

from graph import ChatMessage, call_id_text
from openprogram._errors import MalformedMessage
from openprogram.integrations._entry import Entry, Paired

__all__ = [
    "ASSISTANT_SIDE",
    "assistant_side",
    "content_text",
    "entry_starts",
    "from_messages",
    "sent_items",
    "to_entries",
]

NAME = "openai_agents"
ASSISTANT_SIDE = ("function_call", "reasoning")
KEPT = ("role", "content", "tool_calls", "tool_call_id")
TEXT_KEYS = {"role", "content"}
TEXT_ROLES = ("user", "assistant", "system", "developer")
"""A text message as the SDK's converter takes it the easy way (``maybe_easy_input_message``)."""


# -- items -> chat messages ---------------------------------------------------------------
def to_entries(items: Sequence[TResponseInputItem], start: int = 0) -> list[Entry]:
    """The items as chat messages by the SDK's ``Converter.items_to_messages``: one entry
    per message (``original``: the tuple of items it was made from), so the calls of one
    turn are one assistant message; an item the converter does not take (a hosted tool's
    call or output) is an entry of its own, named. ``start``: the index of the first item
    in the whole list (labels count from it)."""
    for index, item in enumerate(items, start):
        _check(index, item)
    entries: list[Entry] = []
    at = 0
    while at < len(items):
        end = at + 1
        if assistant_side(items[at]):
            while end < len(items) and assistant_side(items[end]):
                end += 1
        plain = _plain(items[at]) if end == at + 1 else None
        if plain is not None:
            meta = {NAME: [_ids(items[at])]}
            entries.append(Entry(plain, (items[at],), meta, f"item {start + at}"))
        else:
            entries.extend(_group(items[at:end], start + at))
        at = end
    return entries


def _plain(item: Any) -> ChatMessage | None:
    """What ``_group`` makes of a text message alone (what the SDK's converter takes as an
    easy message, its content a string), without the converter; None for any other item."""
    content, role = item.get("content"), item.get("role")
    if not isinstance(content, str):
        return None
    if item.keys() == TEXT_KEYS:  # the common case, as the converter takes it
        if role not in TEXT_ROLES:
            return None
    elif not Converter.maybe_easy_input_message(item):
        return None
    return cast(
        "ChatMessage", {"role": "system" if role == "developer" else role, "content": content}
    )


def _check(index: int, item: Any) -> None:
    kind = item.get("type") if isinstance(item, dict) else None

    def where() -> str:
        return f"{NAME} item {index} ({kind or type(item).__name__})"

    if not isinstance(item, dict):
        raise MalformedMessage(f"{where()}: expected a dict")
    if kind in ("function_call", "function_call_output"):
        call_id = call_id_text(item.get("call_id"))  # an integer is an id: stored as text
        if not isinstance(call_id, str) or not call_id:
            raise MalformedMessage(f"{where()}: no call_id")
    if kind == "function_call" and not isinstance(item.get("name"), str):
        raise MalformedMessage(f"{where()} ({item['call_id']!r}): no name")


def assistant_side(item: Any) -> bool:
    return item.get("type") in ASSISTANT_SIDE or (
        item.get("role") == "assistant" and item.get("type", "message") == "message"
    )


def _group(items: Sequence[Any], start: int) -> list[Entry]:
    """The entries of a run of items: each message the converter makes of them, with the
    items it was made from (a reasoning item goes with the message after it)."""
    try:
        messages = Converter.items_to_messages(list(items))
        owner = (
            [  # the last item's prefix is all of them: its messages are known
                max(0, len(Converter.items_to_messages(list(items[: k + 1]))) - 1)
                for k in range(len(items) - 1)
            ]
            + [max(0, len(messages) - 1)]
        )
    except (UserError, KeyError, TypeError):
        return [_placeholder(item, start + k) for k, item in enumerate(items)]
    if not messages:
        return [_placeholder(item, start + k) for k, item in enumerate(items)]
    entries = []
    for n, message in enumerate(messages):
        own = tuple(item for item, o in zip(items, owner, strict=True) if o == n)
        chat = _chat(dict(message))
        meta = {NAME: [_ids(item) for item in own]}
        models = [
            i["provider_data"]["model"]
            for i in own
            if isinstance(i.get("provider_data"), dict) and i["provider_data"].get("model")
        ]
        if models:
            meta["model"] = models[0]
        first = start + next(k for k, o in enumerate(owner) if o == n)
        entries.append(Entry(chat, own, meta, f"item {first}"))
    return entries


def _placeholder(item: Any, index: int) -> Entry:
    """An item the converter does not take, named, and sent back as it is."""
    kind = item.get("type") or "item"
    by: Literal["user", "assistant"] = "user" if str(kind).endswith("_output") else "assistant"
    return Entry(
        {"role": by, "content": f"[{kind}]"}, (item,), {NAME: [_ids(item)]}, f"item {index}"
    )


def _ids(item: Any) -> dict[str, Any]:
    return {key: item[key] for key in ("id", "type", "call_id") if key in item}


def _chat(message: Mapping[str, object]) -> ChatMessage:
    """A converter's message as the graph stores it (a developer message is a system one;
    provider fields the graph does not keep are left to the original items)."""
    chat: dict[str, Any] = {key: value for key, value in message.items() if key in KEPT}
    if message.get("role") == "developer":
        chat["role"] = "system"
    if chat.get("role") in ("user", "system", "tool", "assistant") and "content" in chat:
        chat["content"] = content_text(chat["content"]) if chat["content"] is not None else None
    if chat.get("tool_calls"):
        chat["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": dict(c["function"])}
            for c in chat["tool_calls"]
        ]
    if chat.get("role") == "assistant" and "content" not in chat:
        chat["content"] = None
    return cast("ChatMessage", chat)


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    texts = []
    for part in content or ():
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part, dict):
            texts.append(f"[{part.get('type')}]")
    return "\n".join(texts)


# -- rendered chat messages -> items ------------------------------------------------------
def entry_starts(
    entries: list[Entry], before: list[Entry] | None, known: dict[int, int]
) -> dict[int, int]:
    """Where each of ``entries``' items start in their list, by the entry's id (``known``:
    the same for ``before``, extended when ``entries`` begins with its very objects: their
    places stay, and a render that holds ``known`` meets only ids of entries it was not
    given; a new dict otherwise)."""
    same = len(before) if before and len(before) <= len(entries) else 0
    if same and not all(map(operator.is_, entries[:same], before or ())):
        same = 0
    starts, at = {}, 0
    if same and before:
        starts = known
        at = known[id(before[-1])] + len(before[-1].original)
    for entry in entries[same:]:
        starts[id(entry)] = at
        at += len(entry.original)
    return starts


def sent_items(
    paired: Sequence[Paired],
    items: list[TResponseInputItem],
    starts: Mapping[int, int],
    instructions: list[str],
) -> list[TResponseInputItem]:
    """The items a call goes out with (see ``from_messages``): for an entry of the live
    list, the call's own items at its place (a run of such entries in order is one slice);
    the texts of the instructions it shows go to ``instructions`` instead."""
    sent: list[Any] = []
    begin = end = 0
    get = starts.get
    for item in paired:
        entry = item.entry
        if entry is None and item.message.get("role") == "system":
            instructions.append(content_text(item.message.get("content")))
        elif entry is None or (start := get(id(entry))) is None:
            sent += items[begin:end]
            begin = end
            sent += from_messages((item,))
        elif start == end:
            end += len(entry.original)
        else:
            sent += items[begin:end]
            begin, end = start, start + len(entry.original)
    sent += items[begin:end]
    return sent


def from_messages(paired: Sequence[Paired]) -> list[TResponseInputItem]:
    """The items a call goes out with: the SDK's own for what compaction left alone, new
    ones for the rest."""
    items: list[Any] = []
    for item in paired:
        if item.entry is not None and isinstance(item.entry.original, tuple):
            items.extend(item.entry.original)
            continue
        message = item.message
        content = message.get("content")
        text = content if isinstance(content, str) else content_text(content)
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            items.append({"type": "function_call_output", "call_id": call_id, "output": text})
            continue
        if text or role != "assistant":
            items.append({"role": role, "content": text})
        for call in message.get("tool_calls") or ():
            function = call["function"]
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": function["name"],
                    "arguments": function.get("arguments") or "{}",
                }
            )
    return items
