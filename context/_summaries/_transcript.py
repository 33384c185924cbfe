"""The covered units read as a flat transcript: who said what, which call failed.

Both summarizers need the same reading of a unit (a call paired with its result, an error
told apart from a success, a function's input rather than its JSON envelope), so it is
done once here. What a layer or a note shows (an earlier summary, "rounds left out") is a
``summary`` entry, never a user's request, though its message has the user's role.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

from graph import Function, Node, text_of

from .._view import Unit, UnitKind

EntryRole = Literal["system", "user", "assistant", "call", "result", "summary"]
NOT_SAID: tuple[UnitKind, ...] = ("layer", "note", "stub")
"""Units that show what the context engine wrote (a summary, a note), not what was said."""
"""Unit kinds whose messages we wrote (summaries, notes), not the user or the agent."""

_ERROR = re.compile(
    r"Traceback \(most recent call last\)|^\s*(?:[\w.]*(?:Error|Exception)\b|error(?:\[\w+\])?"
    r"|fatal\b|FAILED\b|ERROR\b)[:\s]"
    r"|(?i:exit(?:ed with)?[ _]?(?:code|status))[\"']?\s*[:=]?\s*-?[1-9]"
    r"|returncode[\"']?\s*[:=]\s*-?[1-9]|command not found|No such file or directory"
    r"|Permission denied|\b[1-9][0-9]* failed\b",
    re.MULTILINE,
)
_EDGE_LINES = 5
_KEY_ARGUMENTS = (
    "path",
    "file_path",
    "filepath",
    "file",
    "filename",
    "notebook_path",
    "command",
    "cmd",
    "script",
    "pattern",
    "query",
    "url",
    "uri",
    "target",
    "name",
)


class Entry(msgspec.Struct, frozen=True):
    """One step of the transcript; ``text`` is the content, a call's arguments (a
    function's input) or a result's output (a failed function's error)."""

    role: EntryRole
    text: str
    name: str = ""
    call_id: str = ""
    function: bool = False
    error: bool = False
    pending: bool = False


def looks_like_error(text: str) -> bool:
    """Whether a tool output reads as a failure (only its first and last lines are looked
    at, so a file that merely mentions ``Error`` does not count).

    >>> looks_like_error("Traceback (most recent call last):\\n  ...\\nKeyError: 'x'")
    True
    >>> looks_like_error("class ContextError(Exception):\\n    pass")
    False
    """
    lines = text.strip().splitlines()
    if len(lines) > 2 * _EDGE_LINES:
        lines = lines[:_EDGE_LINES] + lines[-_EDGE_LINES:]
    return _ERROR.search("\n".join(lines)) is not None


def key_argument(arguments: str) -> str:
    """The argument that says what a call was about (a path, a command), else all of them.

    >>> key_argument('{"limit": 20, "file_path": "src/app.py"}')
    'src/app.py'
    >>> key_argument('{"limit": 20}')
    '{"limit":20}'
    """
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments.strip()
    if isinstance(value, dict):
        lowered = {str(key).lower(): item for key, item in value.items()}
        for key in _KEY_ARGUMENTS:
            item = lowered.get(key)
            if isinstance(item, str) and item.strip():
                return item.strip()
        for item in value.values():
            if isinstance(item, str) and item.strip():
                return item.strip()
    if isinstance(value, str):
        return value.strip()
    if value is None or value == {}:
        return ""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _function_input(arguments: str) -> str:
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(value, dict) and set(value) == {"input"}:
        value = value["input"]
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _unit_entries(unit: Unit, nodes: Mapping[str, Node]) -> list[Entry]:
    entries: list[Entry] = []
    names: dict[str, str] = {}
    is_call = unit.kind == "call"
    if unit.kind in NOT_SAID:
        texts = (text_of(item.message.get("content")) for item in unit.items)
        return [Entry("summary", text) for text in texts if text.strip()]
    for item in unit.items:
        message = item.message
        role = message.get("role")
        node = nodes.get(item.node_id) if item.node_id else None
        if role == "tool":
            entries.append(_result(message, node, names, item.tool_name, is_call))
            continue
        text = text_of(message.get("content"))
        if role in ("system", "user") or (role == "assistant" and text.strip()):
            entries.append(Entry(role, text))
        for call in message.get("tool_calls") or ():
            if not isinstance(call, Mapping):
                continue
            entries.append(_call(call, node, is_call))
            names[entries[-1].call_id] = entries[-1].name
    return entries


def _call(call: Mapping[str, Any], node: Node | None, is_call: bool) -> Entry:
    function = call.get("function")
    function = function if isinstance(function, Mapping) else {}
    name = str(function.get("name") or "")
    arguments = function.get("arguments")
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    if is_call:
        if node is not None and isinstance(node.payload, Function):
            name = node.payload.name
        text = _function_input(text)
    return Entry("call", text, name, str(call.get("id") or ""), function=is_call)


def _result(
    message: Mapping[str, Any],
    node: Node | None,
    names: Mapping[str, str],
    tool_name: str | None,
    is_call: bool,
) -> Entry:
    call_id = str(message.get("tool_call_id") or "")
    name = names.get(call_id) or tool_name or ""
    text = text_of(message.get("content"))
    if is_call:
        finish = node.finish if node is not None else None
        if finish is not None:
            failed = finish.status == "error"
            text = (finish.error or text) if failed else text
        else:
            failed = text.startswith("[function ") and " failed: " in text
        running = node is not None and finish is None
        return Entry("result", text, name, call_id, True, failed, running)
    pending = node is not None and node.kind == "tool" and node.result is None
    failed = node is not None and node.result is not None and node.result.is_error
    failed = failed or (not pending and looks_like_error(text))
    return Entry("result", text, name, call_id, error=failed, pending=pending)


def read_units(units: Sequence[Unit], nodes: Mapping[str, Node]) -> tuple[Entry, ...]:
    """The transcript of ``units``; ``nodes`` (by id) tell failed calls and functions."""
    return tuple(entry for unit in units for entry in _unit_entries(unit, nodes))
