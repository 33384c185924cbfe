"""OpenAI Responses requests (stateless ``input`` arrays) as the graph's messages, and back.

A run of the model's items (its ``reasoning``, assistant ``message`` and ``function_call``
items, as the client sends them back) is one assistant entry that keeps the items whole: a
``function_call`` and the ``reasoning`` item that led to it, encrypted content included,
are one message to compaction, which keeps or drops them together. A ``function_call_output``
is a tool entry; a user message a user entry. What compaction left alone goes upstream as
the client sent it; what it changed is built anew, and a call it kept in a changed message
goes with its own ``reasoning`` and ``function_call`` items from the client's input.

A request that leans on state kept by the provider (``previous_response_id``, a
``conversation``, an ``item_reference``) holds only part of its conversation: it cannot be
rendered here, and goes as it came, with the reason (:func:`server_state`).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import cast

from context import equal_prefix
from graph import ChatMessage, FunctionCall, FunctionSchema, ToolCall, ToolSchema
from openprogram._errors import MalformedMessage
from openprogram._json import JSONObject, obj, objects
from openprogram._messages import FunctionCallItem, FunctionCallOutputItem, MessageItem
from openprogram.integrations._mirror import Entry, Paired
from openprogram.proxy._bodies import Request
from openprogram.proxy._convert import (
    Converted,
    Made,
    convert,
    first_user,
    plain_text,
)

__all__ = ["from_request", "peek", "server_state", "to_request"]

MODEL_ITEMS = frozenset({"reasoning", "function_call", "custom_tool_call", "compaction"})
"""Item types the model wrote (with an assistant message): they join one assistant entry."""
OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
INSTRUCTION_ROLES = ("system", "developer")


def server_state(body: Mapping[str, object], raw: bytes | None = None) -> str | None:
    """Why a request cannot be rendered here (None: its ``input`` is the whole conversation);
    ``raw``, the body's bytes, spares the walk of the items when none can be a reference."""
    if body.get("previous_response_id"):
        return "server-side state: previous_response_id (the provider holds the history)"
    if body.get("conversation"):
        return "server-side state: conversation (the provider holds the history)"
    items = body.get("input")
    if raw is not None and b"item_reference" not in raw:
        return None
    if isinstance(items, list) and any(
        isinstance(item, dict) and item.get("type") == "item_reference" for item in items
    ):
        return "server-side state: item_reference (an item only the provider holds)"
    return None


def _role(item: Mapping[str, object]) -> str | None:
    """The role of a message item (None: not a message)."""
    if item.get("type", "message") != "message":
        return None
    role = item.get("role")
    return role if isinstance(role, str) else None


def _groups(body: Request) -> list[object]:
    """The input as the mirror's units: each run of model items one list, anything else
    itself (a string ``input`` is one user message)."""
    items = body.get("input")
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise MalformedMessage("responses request: input is neither a string nor a list of items")
    return _grouped(items, 0)[0]


def _grouped(items: Sequence[object], start: int) -> tuple[list[object], list[int]]:
    """``items[start:]`` as units (see :func:`_groups`), and where each one ends."""
    groups: list[object] = []
    ends: list[int] = []
    run: list[JSONObject] | None = None
    for at in range(start, len(items)):
        item = items[at]
        if isinstance(item, dict) and (
            item.get("type") in MODEL_ITEMS or item.get("role") == "assistant"
        ):
            if run is None:
                run = []
                groups.append(run)
                ends.append(at)
            run.append(item)
        else:
            run = None
            groups.append(item)
            ends.append(at)
        ends[-1] = at + 1
    return groups, ends


def _regrouped(items: list[object], previous: Converted | None) -> tuple[list[object], list[int]]:
    """The units of ``items``, ``previous``'s as they were for the items it shares (but
    the last of those, which a new item may join)."""
    if previous is None or not previous.items:
        return _grouped(items, 0)
    shared = equal_prefix(previous.items, items)
    kept = bisect.bisect_left(previous.ends, shared)  # those that end before it
    start = previous.ends[kept - 1] if kept else 0
    groups, ends = _grouped(items, start)
    return [*previous.messages[:kept], *groups], [*previous.ends[:kept], *ends]


def _call(index: int, item: JSONObject) -> ToolCall:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise MalformedMessage(f"responses item {index}: a {item.get('type')} without call_id")
    arguments = item.get("arguments") if item.get("type") == "function_call" else item.get("input")
    function: FunctionCall = {"name": str(item.get("name")), "arguments": str(arguments or "{}")}
    return {"id": call_id, "type": "function", "function": function}


def _assistant(index: int, group: list[JSONObject]) -> Entry:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for item in group:
        kind = item.get("type", "message")
        if kind in ("function_call", "custom_tool_call"):
            calls.append(_call(index, item))
        elif kind == "message":
            texts.append(plain_text(item.get("content")))
        elif kind == "compaction":
            texts.append("[compaction]")
    message: ChatMessage = {
        "role": "assistant",
        "content": "\n".join(t for t in texts if t) or None,
    }
    if calls:
        message["tool_calls"] = calls
    return Entry(message, group, {}, f"{index}")


def _entries(index: int, unit: object) -> list[Entry]:
    if isinstance(unit, list):
        return [_assistant(index, unit)]
    if not isinstance(unit, dict):
        raise MalformedMessage(f"responses item {index}: not an object")
    kind = unit.get("type", "message")
    if kind in OUTPUTS:
        call_id = unit.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise MalformedMessage(f"responses item {index}: {kind} without call_id")
        said: ChatMessage = {
            "role": "tool",
            "tool_call_id": call_id,
            "content": plain_text(unit.get("output")),
        }
        return [Entry(said, unit, {}, f"{index} {kind}")]
    role = _role(unit)
    if role in INSTRUCTION_ROLES:
        return [
            Entry(
                {"role": "system", "content": plain_text(unit.get("content"))}, unit, {}, f"{index}"
            )
        ]
    if role == "user":
        return [
            Entry(
                {"role": "user", "content": plain_text(unit.get("content"))}, unit, {}, f"{index}"
            )
        ]
    # an item of a kind we do not read (a built-in tool's call…): kept, shown by its type
    return [Entry({"role": "user", "content": f"[{kind}]"}, unit, {}, f"{index} {kind}")]


def _instructions(body: Mapping[str, object]) -> str | None:
    given = body.get("instructions")
    return plain_text(given) if given is not None else None


def peek(body: Mapping[str, object]) -> tuple[str, str]:
    """What recognises the conversation: the instructions and the first user message."""
    items = body.get("input")
    if isinstance(items, str):
        return _instructions(body) or "", items
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and _role(item) == "user":
            said = plain_text(item.get("content"))
            if said:
                return _instructions(body) or "", said
    return _instructions(body) or "", ""


def _schema(tool: JSONObject) -> ToolSchema:
    """A Responses tool as the chat schema the budget counts (a built-in tool by its type)."""
    function: FunctionSchema = {
        "name": str(tool.get("name") or tool.get("type")),
        "description": str(tool.get("description") or ""),
        "parameters": obj(tool.get("parameters")) or {"type": "object"},
    }
    return {"type": "function", "function": function}


def from_request(body: Request, previous: Converted | None = None) -> Converted:
    """The request's input as entries (reusing ``previous``'s for the units it shares)."""
    items = body.get("input")
    if isinstance(items, list):
        groups, ends = _regrouped(items, previous)
    else:
        groups, ends, items = _groups(body), [], []
    entries, parts = convert(groups, _entries, previous)
    tools = [_schema(t) for t in objects(body.get("tools"))]
    system = _instructions(body)
    return Converted(entries, tools, system, first_user(entries), groups, parts, items, ends)


def _with_calls(body: Request) -> dict[str, list[JSONObject]]:
    """Each call id of the client's input: its run's ``reasoning`` items and the call item."""
    found: dict[str, list[JSONObject]] = {}
    items = body.get("input")
    for group in _groups(body) if isinstance(items, list) else ():
        if not isinstance(group, list):
            continue
        reasoning = [i for i in group if i.get("type") == "reasoning"]
        for item in group:
            if item.get("type") in ("function_call", "custom_tool_call"):
                found[str(item.get("call_id"))] = [*reasoning, item]
    return found


def _made(
    message: ChatMessage, originals: dict[str, list[JSONObject]]
) -> list[Mapping[str, object]]:
    """Items for a message compaction changed or made."""
    role = message.get("role")
    content = message.get("content")
    text = content if isinstance(content, str) else plain_text(content)
    fields = message.get("provider_specific_fields") or {}
    if role == "assistant" and fields.get("compaction_blocks"):
        return list(fields["compaction_blocks"])  # the provider's own compaction, as it came
    if role == "tool":
        output: FunctionCallOutputItem = {
            "type": "function_call_output",
            "call_id": cast(str, message.get("tool_call_id")),  # a tool message has one
            "output": text,
        }
        return [output]
    if role != "assistant":
        said: MessageItem = {"role": "user", "content": text or "(no content)"}
        return [said]
    out: list[Mapping[str, object]] = []
    if text:
        spoken: MessageItem = {"role": "assistant", "content": text}
        out.append(spoken)
    sent: set[int] = set()
    for call in message.get("tool_calls") or ():
        kept = originals.get(str(call["id"]))
        if kept is None:
            function = call["function"]
            made: FunctionCallItem = {
                "type": "function_call",
                "call_id": call["id"],
                "name": function["name"],
                "arguments": function.get("arguments") or "{}",
            }
            out.append(made)
            continue
        for item in kept:  # the call with the reasoning it came with, once each
            if id(item) not in sent:
                sent.add(id(item))
                out.append(item)
    return out or [{"role": "assistant", "content": "(no content)"}]


def _made_alone(message: ChatMessage) -> list[Mapping[str, object]]:
    """Items for a message compaction changed or made, with no call of the client's."""
    return _made(message, {})


def to_request(body: Request, paired: Sequence[Paired], made: Made | None = None) -> Request:
    """The client's body with the rendered input (its own items where left alone; ``made``:
    the items the conversation's last request built for the rest, but calls: those go with
    the client's own items of this request)."""
    kept = _instructions(body)
    instructions: list[str] = []
    originals: dict[str, list[JSONObject]] | None = None
    out: list[object] = []
    for item in paired:
        message = item.message
        if message.get("role") == "system" and item.entry is None:
            instructions.append(plain_text(message.get("content")))
            continue
        if item.entry is not None:
            original = item.entry.original
            out.extend(original if isinstance(original, list) else [original])
            continue
        if message.get("tool_calls"):
            if originals is None:
                originals = _with_calls(body)
            out.extend(_made(message, originals))
        else:
            out.extend(_made_alone(message) if made is None else made.get(message, _made_alone))
    if made is not None:
        made.done()
    request: Request = {**body, "input": out}
    if instructions != ([kept] if kept is not None else []):
        request["instructions"] = "\n\n".join(t for t in instructions if t)
        if not request["instructions"]:
            del request["instructions"]
    return request
