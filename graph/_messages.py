"""Turn an OpenAI chat message into node payloads, or say exactly which field is wrong.

Validation happens before anything is written, so a rejected message changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

from ._errors import InvalidMessage
from ._nodes import Content, Dialogue, Tool, ToolResult

# ``type(x) is dict`` before ``isinstance(x, Mapping)``: an ABC check costs a Python call,
# and nearly every message and tool call is a plain dict.

ROLES = ("system", "user", "assistant", "tool")
STORED = ("content", "thinking", "reasoning_content", "name")
"""The fields of a system/user/assistant message that end up in its dialogue payload."""


def stored_fields(message: Mapping[str, Any]) -> dict[str, Any]:
    """The part of ``message`` a dialogue payload is made from, for naming the field that
    cannot be stored (an unknown key the payload leaves out is never blamed)."""
    return {key: message[key] for key in STORED if key in message}


class ParsedDialogue(msgspec.Struct, frozen=True):
    """A system/user/assistant message: the dialogue payload and its requested calls."""

    dialogue: Dialogue
    calls: tuple[Tool, ...] = ()


class ParsedResult(msgspec.Struct, frozen=True):
    """A ``tool`` message: the call id it answers and the result."""

    call_id: str
    result: ToolResult


def parse_content(value: Any, field: str = "content") -> Content:
    """Check that ``value`` is None, a string, or a list of OpenAI content parts."""
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise InvalidMessage(
            field, f"must be a string or a list of content parts, not {type(value).__name__}"
        )
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(value):
        where = f"{field}[{index}]"
        if type(part) is not dict and not isinstance(part, Mapping):
            raise InvalidMessage(
                where, f"a content part must be an object, not {type(part).__name__}"
            )
        kind = part.get("type")
        if not isinstance(kind, str) or not kind:
            raise InvalidMessage(f"{where}.type", "a content part needs a string 'type'")
        if kind == "text" and not isinstance(part.get("text"), str):
            raise InvalidMessage(f"{where}.text", "a text part needs a string 'text'")
        if kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            if not isinstance(url, str):
                raise InvalidMessage(f"{where}.image_url", "an image_url part needs a url string")
        parts.append(dict(part))
    return parts


def _arguments(value: Any, field: str) -> str:
    if value is None:
        return "{}"
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping | list):
        try:
            return json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError) as error:  # objects, cycles, huge ints
            raise InvalidMessage(field, f"cannot be written as JSON ({error})") from None
    raise InvalidMessage(field, f"must be a JSON string or object, not {type(value).__name__}")


def call_id_text(value: Any) -> Any:
    """A tool call id as the graph keeps it: an integer (``0``, ``7``: a provider that
    sends one means it as an id) as its decimal text, for a call and its result alike so
    that they still pair; anything else as it is (a bool is no id).

    >>> call_id_text(0), call_id_text("call_1"), call_id_text(True)
    ('0', 'call_1', True)
    """
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _parse_calls(value: Any) -> tuple[Tool, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidMessage("tool_calls", f"must be a list, not {type(value).__name__}")
    calls: list[Tool] = []
    seen: set[str] = set()
    for index, call in enumerate(value):
        where = f"tool_calls[{index}]"
        if type(call) is not dict and not isinstance(call, Mapping):
            raise InvalidMessage(where, "a tool call must be an object")
        call_id = call_id_text(call.get("id"))
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage(f"{where}.id", "every tool call needs a non-empty string id")
        if call_id in seen:
            raise InvalidMessage(f"{where}.id", f"duplicate tool call id {call_id!r}")
        seen.add(call_id)
        function = call.get("function")
        if type(function) is not dict and not isinstance(function, Mapping):
            raise InvalidMessage(f"{where}.function", "needs an object with name and arguments")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidMessage(f"{where}.function.name", "needs a non-empty string")
        arguments = _arguments(function.get("arguments"), f"{where}.function.arguments")
        calls.append(Tool(name=name, arguments=arguments, call_id=call_id))
    return tuple(calls)


def parse_message(message: Any) -> ParsedDialogue | ParsedResult:
    """Validate one OpenAI chat message.

    >>> parse_message({"role": "user", "content": "hi"}).dialogue.content
    'hi'
    >>> parse_message({"role": "robot", "content": "hi"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    graph._errors.InvalidMessage: invalid message: role: unknown role 'robot' (expected ...)
    """
    if type(message) is not dict and not isinstance(message, Mapping):
        raise InvalidMessage("message", f"must be a dict, not {type(message).__name__}")
    role = message.get("role")
    if role not in ROLES:
        raise InvalidMessage("role", f"unknown role {role!r} (expected one of {', '.join(ROLES)})")
    content = parse_content(message.get("content"))
    if role == "tool":
        call_id = call_id_text(message.get("tool_call_id"))
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessage("tool_call_id", "a tool message needs a non-empty string id")
        is_error = bool(message.get("is_error", False))
        return ParsedResult(call_id=call_id, result=ToolResult(content=content, is_error=is_error))
    thinking = message.get("thinking", message.get("reasoning_content"))
    if thinking is not None and not isinstance(thinking, str):
        raise InvalidMessage("thinking", "must be a string")
    name = message.get("name")
    if name is not None and not isinstance(name, str):
        raise InvalidMessage("name", "must be a string")
    calls = _parse_calls(message.get("tool_calls"))
    if calls and role != "assistant":
        raise InvalidMessage("tool_calls", f"only assistant messages request tools, not {role}")
    dialogue = Dialogue(role=role, content=content, thinking=thinking or None, name=name)
    return ParsedDialogue(dialogue=dialogue, calls=calls)
