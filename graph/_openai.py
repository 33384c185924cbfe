"""Render visible steps as OpenAI chat messages, with tool pairs always valid.

A tool node's result is rendered right after its assistant message, whenever it arrived,
so a pair can never be split; a call with no result yet gets a placeholder result. A
function seen as one unit is a call/result pair whose id names the function node.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ._chat import ChatMessage, ToolCall
from ._nodes import Content, Dialogue, Function, Node, Tool
from ._walk import Step

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_-]")


def text_of(content: Content) -> str:
    """The plain text of a content value (text parts joined by newlines)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content if p.get("type") == "text")


def as_text(value: Any) -> str:
    """A function input or output as the text a model reads."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def function_call_id(node: Node) -> str:
    """The tool-call id a function unit renders with; it names the node by its seq (a
    short handle, the same in every database holding the session; see ``_handles``)."""
    return f"fn_{node.seq}"


def function_tool_name(node: Node) -> str:
    """A provider-safe tool name for a function node (``[A-Za-z0-9_-]``, at most 64)."""
    assert isinstance(node.payload, Function)
    return _UNSAFE_NAME.sub("_", node.payload.name)[:64] or "function"


def dialogue_message(node: Node) -> ChatMessage:
    """A dialogue node as a message, without tool calls."""
    payload = node.payload
    assert isinstance(payload, Dialogue)
    message: ChatMessage = {"role": payload.role, "content": payload.content}
    if payload.name is not None:
        message["name"] = payload.name
    if payload.thinking:
        message["thinking"] = payload.thinking
    return message


def tool_call(node: Node) -> ToolCall:
    """A tool node as an entry of its assistant's ``tool_calls``."""
    payload = node.payload
    assert isinstance(payload, Tool)
    return {
        "id": payload.call_id,
        "type": "function",
        "function": {"name": payload.name, "arguments": payload.arguments},
    }


def tool_result_message(node: Node) -> ChatMessage:
    """A tool node's result message (a placeholder while the call is still running)."""
    payload = node.payload
    assert isinstance(payload, Tool)
    if node.result is None:
        content: Content = f"[no result yet: tool call {payload.call_id} is still running]"
    else:
        content = node.result.content
    return {"role": "tool", "tool_call_id": payload.call_id, "content": content}


def function_messages(node: Node) -> list[ChatMessage]:
    """A function node as one call/result pair: input as arguments, output as result."""
    payload = node.payload
    assert isinstance(payload, Function)
    call_id = function_call_id(node)
    arguments = json.dumps({"input": payload.input}, ensure_ascii=False, default=str)
    if node.finish is None:
        result = f"[function {payload.name} (node {node.id}) is still running]"
    elif node.finish.status == "error":
        result = f"[function {payload.name} failed: {node.finish.error}]"
    elif node.finish.status == "interrupted":
        result = f"[function {payload.name} (node {node.id}) never finished: {node.finish.error}]"
    else:
        result = as_text(node.finish.output)
    call: ToolCall = {
        "id": call_id,
        "type": "function",
        "function": {"name": function_tool_name(node), "arguments": arguments},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def steps_to_messages(steps: Iterable[Step]) -> list[ChatMessage]:
    """OpenAI messages for a walk: each assistant with its calls, then their results."""
    messages: list[ChatMessage] = []
    results: list[ChatMessage] = []
    current: ChatMessage | None = None

    def flush() -> None:
        nonlocal current
        messages.extend(results)
        results.clear()
        current = None

    for step in steps:
        if step.view == "tool":
            if current is not None:
                current.setdefault("tool_calls", []).append(tool_call(step.node))
                results.append(tool_result_message(step.node))
            continue
        flush()
        if step.view == "message":
            current = dialogue_message(step.node)
            messages.append(current)
        elif step.view == "call":
            messages.extend(function_messages(step.node))
    flush()
    return messages
