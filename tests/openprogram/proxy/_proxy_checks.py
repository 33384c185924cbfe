"""What every upstream request must be, checked from the wire (written for the tests, not
taken from the proxy): within the budget, every tool call answered in the next message,
and the client's current request in it."""

from __future__ import annotations

import json
from typing import Any

from context import TokenCounter

COUNTER = TokenCounter("claude-sonnet-4-5")


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    kind = block.get("type")
    if kind == "text":
        return str(block["text"])
    if kind == "tool_use":
        return f"{block['name']} {json.dumps(block.get('input'))}"
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return "\n".join(_block_text(b) for b in content)
        return str(content or "")
    return ""  # thinking: the provider does not count an old turn's


def anthropic_tokens(body: dict[str, Any]) -> int:
    """Tokens of a Messages request as the budget counts them (system, tools, messages)."""
    system = body.get("system") or ""
    if isinstance(system, list):
        system = "\n\n".join(b.get("text", "") for b in system)
    total = COUNTER.count_message({"role": "system", "content": system}) if system else 0
    tools = [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                               "parameters": t.get("input_schema", {})}}
             for t in body.get("tools") or ()]  # fmt: skip
    total += COUNTER.count_tools(tools) if tools else 0
    for message in body["messages"]:
        content = message["content"]
        blocks = [content] if isinstance(content, str) else content
        text = "\n".join(_block_text(b) for b in blocks)
        total += COUNTER.count_message({"role": message["role"], "content": text})
    return total


def anthropic_pair_problems(body: dict[str, Any]) -> list[str]:
    """Anthropic's rule: a ``tool_use`` is answered by a ``tool_result`` in the very next
    (user) message, and a ``tool_result`` answers a ``tool_use`` of the message before
    (consecutive turns of one role are one turn to the API; system messages sit between)."""
    problems = []
    messages = [m for m in body["messages"] if m["role"] != "system"]  # between turns
    if messages and messages[0]["role"] != "user":
        problems.append("the first message is not the user's")
    for n, message in enumerate(messages):
        blocks = message["content"] if isinstance(message["content"], list) else []
        if message["role"] == "assistant":
            uses = {b["id"] for b in blocks if b.get("type") == "tool_use"}
            after = messages[n + 1]["content"] if n + 1 < len(messages) else []
            results = {b["tool_use_id"] for b in after if isinstance(b, dict) and b.get("type") == "tool_result"}  # fmt: skip
            if n + 1 < len(messages) and uses - results:
                problems.append(f"message {n}: calls {sorted(uses - results)} unanswered")
        else:
            before = messages[n - 1]["content"] if n else []
            uses = {b["id"] for b in before if isinstance(b, dict) and b.get("type") == "tool_use"}
            for b in blocks:
                if b.get("type") == "tool_result" and b["tool_use_id"] not in uses:
                    problems.append(f"message {n}: result {b['tool_use_id']} has no call before it")
    return problems


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message that says something (not only tool results)."""
    for message in reversed(body["messages"]):
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            return content
        texts = [b["text"] for b in content if b.get("type") == "text"]
        if texts:
            return "\n".join(texts)
    return ""


def holds(body: dict[str, Any], text: str) -> bool:
    """Whether ``text`` is in the request, as sent."""
    return json.dumps(text, ensure_ascii=False)[1:-1] in json.dumps(body, ensure_ascii=False)
