"""OpenAI Chat Completions requests as the graph's messages, and the render back.

The wire format is the graph's own, so an entry is the client's message with only what the
graph stores (role, text, calls, the id a result answers), and keeps the client's message
whole: what compaction left alone goes upstream as the client sent it (content parts,
names, provider fields). The leading system or developer messages are the instructions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from graph import ChatMessage, ToolCall, ToolSchema
from openprogram._errors import MalformedMessage
from openprogram._json import obj, objects
from openprogram.integrations._mirror import Entry, Paired
from openprogram.proxy._bodies import Request
from openprogram.proxy._convert import Converted, Made, convert, first_user, plain_text

__all__ = ["from_request", "peek", "to_request"]

INSTRUCTION_ROLES = ("system", "developer")


def _entry(index: int, message: object) -> Entry:
    if not isinstance(message, dict):
        raise MalformedMessage(f"openai message {index}: not an object")
    role = message.get("role")
    if role == "developer":
        role = "system"
    if role == "function":  # the deprecated form of a tool result
        role = "tool"
    if role not in ("system", "user", "assistant", "tool"):
        raise MalformedMessage(f"openai message {index}: unknown role {message.get('role')!r}")
    chat: ChatMessage = {"role": role, "content": plain_text(message.get("content"))}
    if role == "assistant":
        chat["content"] = chat["content"] or None
        calls: list[ToolCall] = []
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                raise MalformedMessage(f"openai message {index}: a tool call without function")
            calls.append(cast("ToolCall",  # a missing id or name: refused by the mirror's check
                {"id": call.get("id"), "type": "function",
                 "function": {"name": function.get("name"),
                              "arguments": function.get("arguments") or "{}"}}
            ))  # fmt: skip
        if calls:
            chat["tool_calls"] = calls
    if role == "tool":
        chat["tool_call_id"] = cast(str, message.get("tool_call_id") or message.get("name"))
    return Entry(chat, message, {}, str(index))


def _split(body: Request) -> tuple[list[object], int]:
    """The messages, and how many lead them as instructions."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise MalformedMessage("openai request: no messages list")
    lead = 0
    while (
        lead < len(messages)
        and isinstance(message := messages[lead], dict)
        and message.get("role") in INSTRUCTION_ROLES
    ):
        lead += 1
    return messages, lead


def _system(messages: list[object], lead: int) -> str | None:
    said = (plain_text(obj(m).get("content")) for m in messages[:lead])
    return "\n\n".join(said) if lead else None


def peek(body: Request) -> tuple[str, str]:
    """What recognises the conversation: the instructions and the first user message."""
    messages, lead = _split(body)
    for index in range(lead, len(messages)):
        said = first_user([_entry(index, messages[index])])
        if said:
            return _system(messages, lead) or "", said
    return _system(messages, lead) or "", ""


def from_request(body: Request, previous: Converted | None = None) -> Converted:
    messages, lead = _split(body)
    rest = messages[lead:]
    entries, parts = convert(rest, lambda i, m: [_entry(i, m)], previous, offset=lead)
    # the client's own chat schemas, passed on as they came
    tools = cast("list[ToolSchema]", objects(body.get("tools")))
    return Converted(entries, tools, _system(messages, lead), first_user(entries), rest, parts)


def to_request(body: Request, paired: Sequence[Paired], made: Made | None = None) -> Request:
    """The client's body with the rendered messages (its own where left alone; ``made`` is
    not needed: a chat message goes up as the render made it)."""
    messages = body["messages"]
    lead = [m for m in messages if isinstance(m, dict)]
    lead = lead[: next((n for n, m in enumerate(lead) if m.get("role") not in INSTRUCTION_ROLES),
                       len(lead))]  # fmt: skip
    kept = "\n\n".join(plain_text(m.get("content")) for m in lead) if lead else None
    out: list[object] = []
    for item in paired:
        if item.entry is not None and isinstance(item.entry.original, dict):
            out.append(item.entry.original)
            continue
        message = item.message
        if message.get("role") == "system" and kept is not None and message.get("content") == kept:
            out.extend(lead)
            continue
        sent = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls",
                                                            "tool_call_id", "name")}  # fmt: skip
        out.append(sent)
    return {**body, "messages": out}
