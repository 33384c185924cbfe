"""``graph.ChatMessage`` and ``graph.ToolCall`` describe what a graph renders: every key of
every rendered message is one the type names, and each required key is there (the types
are for the checker only, so this is what keeps them true when the rendering grows)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import graph
from graph import ChatMessage, ConversationGraph, FunctionCall, ToolCall


def _conforms(value: Mapping[str, Any], shape: Any) -> list[str]:
    keys = set(value)
    problems = [f"unknown key {key!r}" for key in keys - set(shape.__annotations__)]
    problems += [f"missing key {key!r}" for key in shape.__required_keys__ - keys]
    return problems


def test_every_rendered_message_is_a_chat_message() -> None:
    g = ConversationGraph.memory()
    g.append({"role": "system", "content": "be brief", "name": "rules"})
    g.append({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    g.append({"role": "assistant", "content": None, "thinking": "hm", "tool_calls": [call]})
    g.append({"role": "tool", "tool_call_id": "c1", "content": "1", "is_error": True})
    with g.function("lookup", input={"q": 1}, expose="io"):
        g.append({"role": "user", "content": "inside"})
    late = {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}}
    g.append({"role": "assistant", "content": "waiting", "tool_calls": [late]})

    functions = [n for n in g.state.nodes.values() if n.kind == "function"]
    messages = [*g.to_openai(), *graph.function_messages(functions[0])]
    assert {m["role"] for m in messages} == {"system", "user", "assistant", "tool"}
    assert sum(bool(m.get("tool_calls")) for m in messages) >= 3
    for message in messages:
        assert _conforms(message, ChatMessage) == [], message
        for entry in message.get("tool_calls", []):
            assert _conforms(entry, ToolCall) == [], entry
            assert _conforms(entry["function"], FunctionCall) == [], entry


def test_the_message_types_are_public() -> None:
    for name in ("ChatMessage", "ToolCall", "FunctionCall", "ToolSchema", "FunctionSchema"):
        assert name in graph.__all__
